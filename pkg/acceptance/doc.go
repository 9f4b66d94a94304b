// Package acceptance holds black-box tests of the shipped binaries: it
// builds forge-gate, forge-worker, forge-ref-plugin and forge into a
// temporary directory, runs them as subprocesses on loopback with private
// temporary state and real SQLite files, and drives them only through their
// public surfaces (the owner HTTP API, the Worker WebSocket endpoint, the
// plugin protocol and the CLI), as an independent user would.
package acceptance
