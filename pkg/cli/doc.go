// Package cli implements the `forge` command: the owner's client for the
// Gate's HTTP API (docs/api.md).
//
// Subcommands, one file each: submit, wait, status, events, result, plus
// `forge --version`. Every subcommand takes -url (default $FORGE_GATE_URL)
// and -token-env (default FORGE_OWNER_TOKEN). The owner token is read only
// from the named environment variable and is sent only in the
// `Authorization: Bearer` header; it never appears in argv, output or errors.
//
// Output contract: stdout carries only JSON, exactly the objects the Gate
// documents (job, event array, aggregate), each strictly decoded, checked and
// re-encoded with two-space indentation and a trailing newline. Human text
// goes to stderr as `forge: error: …` and `forge: hint: …`; a Gate error body
// {"error":{"code":c,"message":m}} is shown as `forge: error: c: m`. While
// waiting, `-progress` (automatic when stderr is a terminal) prints live
// activity stage changes as `forge: progress: …` (see progress.go).
//
// Exit codes:
//
//	0  success: the object was printed; for wait and submit -wait the job
//	   succeeded; result exits 0 whenever it printed the aggregate
//	1  error: network, Gate error response, invalid response, bad task file,
//	   missing token
//	2  usage: unknown subcommand or flag, bad flag value, missing or invalid
//	   Gate URL, malformed job id
//	3  wait or submit -wait: the job ended failed (the aggregate is printed)
//	4  wait or submit -wait: the timeout passed before the job was terminal
//	   (nothing is printed on stdout)
package cli
