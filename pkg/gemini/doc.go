// Package gemini is the Gemini CLI adapter behind forge-gemini-plugin: it
// runs Gemini CLI headless (checked against @google/gemini-cli 0.61.0: its
// --help and its bundled code, bundle/gemini.js and the chunks it loads) in
// a workspace and turns its stream-json events into the run's outcome and
// the model's last text into an optional commit subject and agent report.
// It stands on pkg/agent (private run directory, profile loader, bounded
// raw-before-parse event reading, completion table, structured answer,
// supervision); this package holds only what is Gemini CLI's. It never
// commits and never claims business success: the Worker validates the
// workspace, runs the checks and commits.
//
// # Invocation
//
// The executable is GEMINI_BIN, or "gemini" looked up in the PATH of the
// plugin's environment (only absolute PATH entries); the npm package's bin
// is bundle/gemini.js, a Node.js script (#!/usr/bin/env node), so node must
// be on that PATH. The argv is exactly (Args):
//
//	gemini --prompt "" --output-format stream-json [--model MODEL]
//
// and the prompt (agent.Prompt: the fixed Worker constraints around the
// task, plus, for a structured answer, the rule that the answer is the
// JSON object alone) goes to stdin. Each flag, and why:
//
//   - --prompt "": headless mode, one non-interactive run that exits when
//     done; the CLI appends the flag's text to stdin, so the prompt is
//     stdin alone (never an argv element another process could read).
//   - --output-format stream-json: one JSON event per line on stdout
//     (init, message, tool_use, tool_result, error, result).
//   - --model: the profile's, when set; otherwise the CLI's default.
//
// Nothing else: --yolo and --approval-mode would widen what runs without
// asking, --skip-trust would trust the repository, --sandbox would start a
// container, -e, --allowed-mcp-server-names and --policy name things the
// settings below switch off, --resume and --session-id continue sessions.
//
// # Settings
//
// Gemini CLI merges, in order, its schema's defaults, the system defaults
// file, the user's settings (HOME/.gemini/settings.json), the workspace's
// (.gemini/settings.json, only in a trusted folder) and the system
// settings (/etc/gemini-cli/settings.json, which override everything).
// The run's user settings file is Settings, written read-only into the
// private home; the system settings and system defaults paths point into a
// directory of the run directory that is never created (the CLI reads a
// missing file as empty), so no host-wide file is read either. (A system
// settings file the run wrote itself would be skipped: 0.61.0 refuses one
// whose directories are writable by others, as /tmp is.) Each member:
//
//   - general.enableAutoUpdate, enableAutoUpdateNotification false: no
//     update check or installation;
//   - general.checkpointing.enabled false: no shadow Git repository of the
//     workspace;
//   - privacy.usageStatisticsEnabled false: no Clearcut usage logging
//     (play.googleapis.com) and no installation id header on requests;
//   - telemetry.enabled false: no OpenTelemetry export;
//   - security.folderTrust.enabled false: the headless CLI would otherwise
//     refuse an untrusted folder outright (FatalUntrustedWorkspaceError),
//     and GEMINI_CLI_TRUST_WORKSPACE=false (below) keeps the folder
//     untrusted;
//   - security.auth.selectedType gemini-api-key: the API key from
//     GEMINI_API_KEY, never a Google sign-in, Vertex AI or Cloud Shell
//     credentials, keychain or ADC. (The CLI's "gateway" auth type, chosen
//     from GOOGLE_GEMINI_BASE_URL alone, is refused headless in 0.61.0:
//     "Invalid auth method selected.")
//   - tools.core Tools: the only tools registered and allowed (everything
//     else is denied by the same rule); tools.useRipgrep false: no ripgrep
//     download;
//   - advanced.ignoreLocalEnv true: no .env file of the workspace or its
//     parents is loaded (an untrusted folder would still load GEMINI_API_KEY,
//     GOOGLE_API_KEY and the Cloud project from one);
//   - admin.extensions, admin.mcp, admin.skills enabled false, skills.enabled
//     false, hooksConfig.enabled false: no extensions, MCP servers, skills
//     or hooks, whoever declares them;
//   - ide.enabled false: no IDE companion connection;
//   - model.disableLoopDetection true, skipNextSpeakerCheck true: no extra
//     model calls to judge the conversation.
//
// # Environment and private directories
//
// Each run gets a private 0700 run directory inside the plugin's private
// working directory (removed afterwards) holding home (HOME, with
// .gemini/settings.json; the CLI writes its project registry, chat
// transcript and logs there) and tmp (TMPDIR). The operator's ~/.gemini is
// never read; two lanes share no file. Gemini CLI's environment is the
// plugin's (already the Worker's allowlist and the gateway's variables)
// without every GEMINI_*, GOOGLE_*, CLOUDSDK_*, OTEL_*, NODE_*, SANDBOX*,
// DEBUG* and FORGE_GATEWAY_* variable, the proxies (HTTP_PROXY,
// HTTPS_PROXY, ALL_PROXY, NO_PROXY in any case), CLOUD_SHELL,
// SEATBELT_PROFILE and BUILD_SANDBOX (each steers 0.61.0: another key or
// endpoint, Vertex AI, a trusted workspace, a settings path, telemetry,
// code loaded into Node, a sandbox), plus (Env):
//
//   - HOME, TMPDIR: the private directories;
//   - GEMINI_CLI_SYSTEM_SETTINGS_PATH, GEMINI_CLI_SYSTEM_DEFAULTS_PATH: the
//     missing files above;
//   - GEMINI_CLI_TRUST_WORKSPACE=false: the workspace is untrusted, so its
//     .gemini/settings.json, .gemini/.env, .gemini/policies, project hooks,
//     skills and agents and its GEMINI.md files (and any context.fileName)
//     are never loaded: the repository's own agent configuration never
//     changes the run; in an untrusted folder the approval mode is
//     "default", in which headless Gemini CLI denies whatever the policy
//     does not allow, and tools.core allows only Tools;
//   - GEMINI_CLI_NO_RELAUNCH=true: the CLI runs in one process instead of
//     relaunching itself as a child (whose parent ignores SIGTERM);
//   - GOOGLE_GEMINI_BASE_URL: the gateway's path for the profile's
//     worker.json provider, or the only gemini-generate-content one
//     (agent.SelectGateway); without the gateway, or without a provider
//     of that kind, the run fails before Gemini CLI starts;
//   - GEMINI_API_KEY: the attempt's gateway credential (sent as
//     x-goog-api-key; the only key Gemini CLI ever sees, DECISIONS 19),
//     redacted from the raw tail.
//
// Host-wide policy files (/etc/gemini-cli/policies) are the one thing of
// the host the run still reads: 0.61.0 has no variable for that directory.
// They are the operator's, like the Worker's own configuration.
//
// # Events and outcome
//
// Stream.Classify reads each line (bounded, valid UTF-8, one object with
// unique top-level keys and a string type) into a kind of Rules, the
// closed completion table: init begins; the final result completes when
// its status is success and fails otherwise; nothing may follow it. Tool
// results with status error and error events (warnings) are diagnostics,
// counted and never forwarded. A failed result whose error is the API's
// 401 or 403 body stops the run as a misconfiguration (Gemini CLI does not
// retry those). Any other type, role, status or severity fails the run
// closed. Gemini CLI retries a 429 or 5xx and a stream reset or timed out
// on its own, silently; a stream the server closed mid-way ("terminated")
// ends in a failed result, which the Worker retries as plugin_failed.
// Streams captured from the real CLI are replayed in the tests
// (testdata/events).
//
// Gemini CLI 0.61.0 has no output schema: the structured answer is the
// model's text after its last tool call, trimmed, and it is kept only when
// it is exactly the wanted JSON object (agent.ParseFinal; a code fence or
// a sentence around it drops it, nothing is repaired).
//
// A run succeeds only when Gemini CLI exits 0 and the stream completed.
// Failures are *agent.Error values: the workspace is not a directory →
// invalid_request; Gemini CLI not found or not startable, an invalid
// profile, no gateway or no provider for it, or refused credentials →
// incompatible (the Worker's terminal plugin_incompatible); nonzero exit,
// timeout, output limit, a malformed or rule-breaking stream, a failed
// result or no result → execution_failed (retryable); the caller's context
// ending → cancelled. Gemini CLI runs in its own process group under the
// supervise subreaper, so a timeout (a hung API: the CLI waits for ever)
// or cancel leaves no process behind. Progress is fixed text: "gemini
// started", "gemini editing" (at init), "gemini finished".
package gemini
