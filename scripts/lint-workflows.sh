#!/usr/bin/env bash
# Lints every GitHub Actions workflow with actionlint at a pinned version.
# actionlint is run with `go run module@version`, so it is fetched through the
# Go module proxy (checksum-verified) and never enters go.mod. When shellcheck
# is on PATH, actionlint also checks every `run:` script with it.
set -euo pipefail
cd "$(dirname -- "${BASH_SOURCE[0]}")/.."
actionlint=github.com/rhysd/actionlint/cmd/actionlint@v1.7.12
shopt -s nullglob
workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
[ "${#workflows[@]}" -gt 0 ] || { echo "lint-workflows: no workflows found" >&2; exit 1; }
# GOFLAGS is cleared so a caller's module flags cannot redirect the tool build.
GOFLAGS='' go run "$actionlint" -no-color "${workflows[@]}"
echo "lint-workflows: ${#workflows[@]} workflows OK"
