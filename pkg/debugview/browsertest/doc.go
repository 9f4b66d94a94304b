// Package browsertest drives a headless Chromium through the DevTools
// protocol so the debug viewer can be tested in a real browser.
//
// Chromium runs as a child process with --remote-debugging-pipe: commands go
// to its file descriptor 3 and replies and events come back on descriptor 4,
// each message one JSON object terminated by a NUL byte. No network port is
// opened for debugging and no third-party module is needed. Each Browser gets
// a fresh profile directory and its own process group, which Close ends.
//
// The package has no production users; its tests are the browser test.
package browsertest
