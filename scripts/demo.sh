#!/usr/bin/env bash
# Temporary `make demo` (until the Gate exists): one plugin session. The
# reference plugin (bin/forge-ref-plugin, from `make build`) upper-cases
# text through the real Worker-side host runner (pkg/plugin/host), under
# the Linux child-subreaper wrapper, and every frame exchanged is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x bin/forge-ref-plugin ]; then
  echo "demo: bin/forge-ref-plugin is missing; run 'make build' first" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/forge-host-demo" ./pkg/plugin/host/testdata/demo
"$tmp/forge-host-demo" -plugin bin/forge-ref-plugin -input "${DEMO_INPUT:-hello from agent forge}"
echo "DEMO PASS"
