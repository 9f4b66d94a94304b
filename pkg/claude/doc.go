// Package claude is the Claude Code adapter behind forge-claude-plugin: it
// runs the Claude Code CLI headless (`claude -p`, checked against
// @anthropic-ai/claude-code 2.1.328: its --help and its bundled code) in a
// workspace and turns its stream-json events into the run's outcome and its
// structured output into an optional commit subject and agent report. It
// stands on pkg/agent (private run directory, profile loader, bounded
// raw-before-parse event reading, completion table, structured answer,
// supervision); this package holds only what is Claude Code's. It never
// commits and never claims business success: the Worker validates the
// workspace, runs the checks and commits.
//
// # Invocation
//
// The executable is CLAUDE_BIN, or "claude" looked up in the PATH of the
// plugin's environment (only absolute PATH entries). The argv is exactly
// (Args):
//
//	claude -p --bare --output-format stream-json --verbose
//	    --no-session-persistence --tools Read,Edit --restricted
//	    --permission-mode acceptEdits --permission-prompts none
//	    --strict-mcp-config --disable-slash-commands
//	    [--model MODEL] [--effort EFFORT] [--json-schema SCHEMA]
//
// and the prompt (agent.Prompt: the fixed Worker constraints around the
// task) goes to stdin. Each flag, and why:
//
//   - -p: print mode, one non-interactive run that exits when done (it
//     also skips the workspace trust dialog).
//   - --bare: no hooks from settings or plugins, no LSP, no plugin sync, no
//     attribution, no auto-memory, no background prefetches, no keychain
//     reads, no CLAUDE.md auto-discovery (neither the operator's nor the
//     repository's: repository instructions never reach the run
//     implicitly), and authentication strictly from ANTHROPIC_API_KEY,
//     the gateway's credential (never OAuth or a keychain). It also narrows the built-in tools to
//     Bash, Edit and Read.
//   - --output-format stream-json --verbose: one JSON event per line on
//     stdout (stream-json requires --verbose in print mode).
//   - --no-session-persistence: no transcript is written, nothing can be
//     resumed.
//   - --tools Read,Edit: the only tools. Edit also creates a missing file
//     (empty old_string). Bash is left out: the commands it runs would
//     inherit Claude Code's environment, key included (2.1.328 scrubs it
//     only with bubblewrap, CLAUDE_CODE_SUBPROCESS_ENV_SCRUB), so the
//     adapter runs no command at all; checks are the Worker's.
//   - --restricted: the file tools are confined to the working directory
//     (an edit of a path outside it is refused with a permission_denied
//     event and an is_error tool result), user, project and local settings
//     files are ignored (a repository's .claude/settings.json cannot widen
//     permissions or add hooks), bypassPermissions is refused.
//   - --permission-mode acceptEdits: edits inside the working directory are
//     accepted without a prompt.
//   - --permission-prompts none: nobody answers prompts; whatever would
//     prompt is denied.
//   - --strict-mcp-config: only MCP servers from --mcp-config, of which
//     there are none.
//   - --disable-slash-commands: no skills or commands.
//   - --model, --effort: the profile's, when set (effort reaches the
//     request as output_config.effort for models that support it).
//   - --json-schema: when commit_subject or agent_report was negotiated,
//     the compact agent.Schema document. Claude Code then offers its
//     StructuredOutput tool, validates the model's answer against the
//     schema and returns it as result.structured_output.
//
// # Environment and private directories
//
// Each run gets a private 0700 run directory inside the plugin's private
// working directory (removed afterwards) holding three empty 0700
// directories: home (HOME), config (CLAUDE_CONFIG_DIR, where Claude Code
// writes .claude.json, backups and its plugin store) and tmp (TMPDIR).
// The operator's ~/.claude and ~/.claude.json are never read; two lanes
// share no file. Claude Code's environment is the plugin's (already the
// Worker's allowlist and the gateway's variables) without every
// ANTHROPIC_*, CLAUDE_*, DISABLE_* and FORGE_GATEWAY_* variable, plus
// (Env):
//
//   - HOME, CLAUDE_CONFIG_DIR, TMPDIR: the private directories;
//   - ANTHROPIC_API_KEY: the attempt's gateway credential (the only key
//     Claude Code ever sees; no provider key is in the plugin's reach,
//     DECISIONS 19), redacted from the raw tail;
//   - ANTHROPIC_BASE_URL: the gateway's path for the profile's
//     worker.json provider, or the only anthropic-messages one
//     (agent.SelectGateway); without the gateway, or without a provider
//     of that kind, the run fails before Claude Code starts;
//   - CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1: no auto-update check, no
//     feedback command, no error reporting, no telemetry, no feature-flag
//     downloads;
//   - DISABLE_AUTOUPDATER=1, DISABLE_TELEMETRY=1, DISABLE_ERROR_REPORTING=1:
//     the same switches one by one, so a future version that splits the
//     umbrella variable still has them off.
//
// # Events and outcome
//
// Classify reads each line (bounded, valid UTF-8, one object with unique
// top-level keys and a string type) into a kind of Rules, the closed
// completion table: system/init begins; the final result event completes
// when its subtype is success and is_error false, and fails otherwise;
// nothing may follow it. system/api_retry (a cut stream or a provider 5xx
// Claude Code retries), system/permission_denied and tool results marked
// is_error are diagnostics, counted and never forwarded. A retry after the
// provider refused the credentials (error authentication_failed, status
// 401 or 403) stops Claude Code at once: Claude Code would retry it for
// minutes, and it is a misconfiguration; so does the synthetic assistant
// message it writes when authentication failed outright ("error":
// "authentication_failed", "Not logged in"). Any other type or system subtype
// fails the run closed. Streams captured from the real CLI are replayed
// in the tests (testdata/events).
//
// A run succeeds only when Claude Code exits 0 and the stream completed.
// Failures are *agent.Error values: the workspace is not a directory →
// invalid_request; Claude Code not found or not startable, an invalid
// profile, no gateway or no provider for it, or refused credentials →
// incompatible
// (the Worker's terminal plugin_incompatible); nonzero exit, timeout,
// output limit, a malformed or rule-breaking stream, a failed result or
// no result → execution_failed (retryable); the caller's context ending
// → cancelled. Claude Code runs in its own process group under the
// supervise subreaper, so a timeout or cancel leaves no process behind.
// Progress is fixed text: "claude started", "claude editing" (at
// system/init), "claude finished".
package claude
