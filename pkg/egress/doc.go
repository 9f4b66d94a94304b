// Package egress is an attempt's way to the few hosts its repository's
// policy lists (network_allow): an HTTP CONNECT proxy the Worker serves on
// loopback, one per attempt, on a port of its own (so one attempt's
// sandbox, whose Landlock rule names only its own proxy's port, cannot use
// another's allowance).
//
// The proxy reads one CONNECT request (bounded in size and time), checks
// the host name and port against the list exactly (a name is compared in
// lower case), and only then resolves the name, drops the addresses no
// registry has (loopback, unspecified, link-local, multicast and the
// ranges of Reachable: the gateway, the Gate and the clouds' metadata
// services stay out of reach even through a name that resolves to them),
// connects to a resolved address and tunnels
// bytes both ways. There is nothing to redirect: a tunnel carries the
// client's own TLS. Every refused request is counted with its host and
// port (never more of it).
package egress
