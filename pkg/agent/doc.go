// Package agent is the adapter layer every coding-agent plugin stands on:
// what is not about one vendor's CLI. An adapter (pkg/codex, pkg/claude)
// knows its CLI's argv, its private home's files, its event lines and its
// completion table; this package does the rest, the same way for all:
//
//   - a private run directory per run (RunDir), created inside the
//     plugin's private working directory, seeded read-only with the files
//     the adapter generates from the operator profile, removed afterwards;
//     the agent's own home and configuration directory point into it, so
//     no ambient user configuration (the operator's ~/.codex, ~/.claude,
//     CLAUDE.md files outside the task, hooks, plugins) is read and two
//     lanes never share a file;
//   - the strict operator profile loader (LoadProfile: a regular file of
//     at most 16 KiB, pkg/strictjson rules, version 1) and the shared value
//     rules (model names, worker.json provider ids);
//   - the model gateway (SelectGateway): the Worker's FORGE_GATEWAY_*
//     variables checked and the provider of the adapter's API kind chosen,
//     so an agent's base URL is the gateway's and its only key the
//     attempt's credential (DECISIONS 19);
//   - the run itself (Run): the agent in its own process group under
//     pkg/supervise (the subreaper wrapper when given), a timeout a margin
//     below the request's, one output budget, SIGTERM then SIGKILL; stdout
//     read line by line, each line bounded, recorded raw in a bounded tail
//     before it is parsed, the credential redacted from the tail;
//   - the completion rule table (Rules, Verdict): each adapter lists every
//     event kind it knows with its effect (Known, Diagnostic, Begin,
//     Complete, Fail, Refused) and whether it may follow the completion.
//     The table is closed: an unlisted kind, a second Begin, a Complete
//     without a Begin or anything unlisted after the completion breaks the
//     stream and fails the run closed; a Refused (the provider refused the
//     credentials) stops the agent at once as a misconfiguration;
//   - the structured final answer (Want, Schema, Prompt, ParseFinal): the
//     commit subject and agent report the run asks for when negotiated,
//     kept only when valid, never repaired;
//   - the failure classes (Error, Class): a misconfiguration (missing
//     executable, invalid profile, no gateway for it, refused
//     credentials) is protocol category incompatible, which the Worker
//     reports as the terminal plugin_incompatible; a run that was attempted
//     and failed (nonzero exit, timeout, cut stream the agent gave up on,
//     provider error, broken stream) is execution_failed (retryable);
//   - declared capabilities (Capabilities) with one semantic each.
//
// Error texts are fixed reasons: never a path, argv, output or secret. The
// raw tail travels only in Error.Tail, for local diagnosis.
package agent
