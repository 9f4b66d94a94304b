#!/usr/bin/env bash
# demo-e2e: `make demo` is the README's first promise to a newcomer, so it
# runs in `make test` too: scripts/demo.sh (Gate, Worker with the sandbox
# on, a text job and a coding job through forge-codex-plugin and the
# deterministic fake Codex) must exit 0 with the text result and a
# candidate commit. Needs bin/ (make build).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! env -u CODEX_BIN bash scripts/demo.sh >"$out" 2>&1; then
  tail -n 40 "$out" >&2
  echo "demo-e2e: scripts/demo.sh failed" >&2
  exit 1
fi
grep -qx 'demo: result: HELLO AGENT FORGE' "$out" || { echo "demo-e2e: no text result" >&2; exit 1; }
grep -Eq '^demo: candidate [0-9a-f]{40} on refs/agent-forge/candidates/' "$out" || { echo "demo-e2e: no candidate" >&2; exit 1; }
grep -qx 'demo: Gate and Worker stopped cleanly' "$out" || { echo "demo-e2e: unclean stop" >&2; exit 1; }
echo "DEMO-E2E PASS"
