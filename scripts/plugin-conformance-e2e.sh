#!/usr/bin/env bash
# Plugin protocol v1 conformance, end to end. Builds forge-plugin-conformance
# and the reference plugin into a private temporary directory, then runs the
# whole suite against every shipped plugin: the reference plugin
# (cmd/forge-ref-plugin) and the dependency-free Python example
# (examples/forge-plugin-v1.py). Any FAIL line or nonzero suite exit fails
# the script. Last line on success: PLUGIN-CONFORMANCE PASS.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
suite_pid=""
cleanup() {
  if [ -n "$suite_pid" ]; then
    kill "$suite_pid" 2>/dev/null || true
    wait "$suite_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cd "$root"
go build -o "$work/forge-plugin-conformance" ./cmd/forge-plugin-conformance
go build -o "$work/forge-ref-plugin" ./cmd/forge-ref-plugin

# The plugins get only PATH (CODEX_BIN and CLAUDE_BIN when set, and the
# variables named by -env). System
# directories come first so python3 is the system interpreter, not a
# version-manager shim that needs a shell and ~100 ms per start.
export PATH="/usr/bin:/bin:$PATH"

# run_suite LABEL [SUITE FLAGS...] PLUGIN [ARGS...]
run_suite() {
  local label="$1"
  shift
  echo "== conformance: $label"
  "$work/forge-plugin-conformance" -timeout 10s "$@" >"$work/out.txt" 2>"$work/err.txt" &
  suite_pid=$!
  local rc=0
  wait "$suite_pid" || rc=$?
  suite_pid=""
  cat "$work/out.txt"
  if [ "$rc" -ne 0 ] || grep -q '^FAIL ' "$work/out.txt"; then
    head -c 2000 "$work/err.txt" >&2 || true
    echo "plugin conformance failed for $label (exit $rc)" >&2
    exit 1
  fi
  local passed
  passed="$(grep -c '^PASS ' "$work/out.txt" || true)"
  if [ "$passed" -lt 41 ]; then
    echo "plugin conformance for $label ran only $((passed - 1)) scenarios" >&2
    exit 1
  fi
}

run_suite "reference plugin (text)" "$work/forge-ref-plugin"
run_suite "Python example (text)" "$root/examples/forge-plugin-v1.py"

# --- Codex workspace plugin ---------------------------------------------------
# forge-codex-plugin runs the deterministic fake Codex (testdata/fake-codex,
# a dependency-free Python 3 script speaking the `codex exec` flags the
# plugin uses); the suite passes CODEX_BIN through to the plugin. A copy in
# "$work" keeps the run independent of the checkout's file modes.
go build -o "$work/forge-codex-plugin" ./cmd/forge-codex-plugin
cp "$root/testdata/fake-codex/codex" "$work/fake-codex"
chmod 0755 "$work/fake-codex"
# The agent plugins run without a Worker: the model gateway's variables
# (pkg/plugin) are given by hand, a credential-shaped value and a URL
# nothing listens on; the fakes check their shape and call no model.
export FORGE_GATEWAY_URL=http://127.0.0.1:9
FORGE_GATEWAY_TOKEN=fgw-$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
export FORGE_GATEWAY_TOKEN
gateway_env=(-env FORGE_GATEWAY_URL -env FORGE_GATEWAY_TOKEN -env FORGE_GATEWAY_PROVIDERS)
CODEX_BIN="$work/fake-codex" FORGE_GATEWAY_PROVIDERS=openai=openai-responses run_suite "Codex plugin (workspace_edit)" \
  "${gateway_env[@]}" -operation workspace_edit "$work/forge-codex-plugin"

# --- Claude Code workspace plugin ---------------------------------------------
# forge-claude-plugin runs the deterministic fake Claude Code
# (testdata/fake-claude, the `claude -p` flags the plugin uses), with the
# gateway's variables as above. scripts/claude-e2e.sh runs the same suite
# against the real Claude Code.
go build -o "$work/forge-claude-plugin" ./cmd/forge-claude-plugin
cp "$root/testdata/fake-claude/claude" "$work/fake-claude"
chmod 0755 "$work/fake-claude"
CLAUDE_BIN="$work/fake-claude" FORGE_GATEWAY_PROVIDERS=anthropic=anthropic-messages run_suite "Claude plugin (workspace_edit)" \
  "${gateway_env[@]}" -operation workspace_edit "$work/forge-claude-plugin"

# --- Gemini CLI workspace plugin ----------------------------------------------
# forge-gemini-plugin runs the deterministic fake Gemini CLI
# (testdata/fake-gemini-cli, the headless flags the plugin uses), with the
# gateway's variables as above (GEMINI_BIN passed by name).
go build -o "$work/forge-gemini-plugin" ./cmd/forge-gemini-plugin
cp "$root/testdata/fake-gemini-cli/gemini" "$work/fake-gemini"
chmod 0755 "$work/fake-gemini"
GEMINI_BIN="$work/fake-gemini" FORGE_GATEWAY_PROVIDERS=gemini=gemini-generate-content run_suite "Gemini plugin (workspace_edit)" \
  "${gateway_env[@]}" -env GEMINI_BIN -operation workspace_edit "$work/forge-gemini-plugin"
# ------------------------------------------------------------------------------

echo "PLUGIN-CONFORMANCE PASS"
