// Package githubfake is a local stand-in for github.com and api.github.com,
// used only by tests and e2e scripts that run the production binaries
// offline.
//
// One TLS server answers both hosts and routes each request by its Host
// header:
//
//   - github.com: git smart HTTP for the bare repositories under a root
//     directory laid out as <root>/<owner>/<repo>.git, served by the real
//     `git http-backend` (through net/http/cgi), so clients meet git's own
//     protocol implementation rather than ours;
//   - api.github.com: whatever http.Handler the caller plugs into
//     Server.API (404 JSON in GitHub's error shape when none is set).
//
// Per-repository faults (Server.SetFault) make github.com answer a
// redirect, ask for credentials, fail with 500, drop a push's answer or
// stall a push, the way a hostile or broken upstream would. A Server.Auth
// hook decides who may read or push; Server.OnPush hears every push that
// moved branches (push-event workflow runs start from it). The
// repositories' pre-receive hook (WriteWorkflowHook) is GitHub's push
// checks: rulesets (GH013), the workflows permission, and a log of each
// push's object count.
//
// Every request is appended to a JSON-lines request log holding the time,
// host, method, path, query and status. Header values, bodies and
// credentials are never logged, so tests can grep the log for secrets.
//
// WritePKI generates a throwaway CA and a server certificate for
// github.com, api.github.com, localhost and 127.0.0.1; the e2e scripts
// bind-mount a CA bundle that also trusts that CA (see scripts/lib/netns.sh).
//
// The program testdata/fake-github wraps this package for shell scripts.
package githubfake
