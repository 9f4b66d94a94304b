#!/usr/bin/env bash
# Runs every fuzz target in the module for a bounded time each.
set -euo pipefail
t=${1:-10s}
cd "$(dirname "$0")/.."
for dir in $(go list -f '{{.Dir}}' ./...); do
  pkg=$(go list "$dir")
  for name in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "== $pkg $name ($t)"
    go test -run '^$' -fuzz "^${name}\$" -fuzztime "$t" "$pkg"
  done
done
