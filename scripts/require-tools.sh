#!/usr/bin/env bash
# Checks (and, as root with apt-get, installs) the Debian tools the tests use.
set -euo pipefail
need=()
command -v git >/dev/null || need+=(git)
command -v python3 >/dev/null || need+=(python3)
# scripts/codex-e2e.sh installs the pinned Codex CLI with npm and samples
# its network calls with strace.
command -v strace >/dev/null || need+=(strace)
command -v npm >/dev/null || need+=(npm)
# The debug viewer test drives a real headless browser.
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null ||
  [ -n "${FORGE_CHROMIUM:-}" ] || need+=(chromium)
# scripts/release-artifacts-e2e.sh checks the rendered Homebrew Formula.
command -v ruby >/dev/null || need+=(ruby)
# The offline-GitHub e2e scripts (scripts/lib/netns.sh) run in a private
# network and mount namespace with a CA bundle that trusts a test CA.
command -v unshare >/dev/null || need+=(util-linux)
command -v ip >/dev/null || need+=(iproute2)
command -v curl >/dev/null || need+=(curl)
command -v openssl >/dev/null || need+=(openssl) # the fake GitHub App's key
[ -f /etc/ssl/certs/ca-certificates.crt ] || need+=(ca-certificates)
# scripts/linux-installer-e2e.sh boots a real systemd with systemd-nspawn.
command -v systemd-nspawn >/dev/null || need+=(systemd-container)
# Litestream is not a Debian package: .ci/run installs it with go install.
if ! command -v litestream >/dev/null; then
  echo "make test needs litestream: go install github.com/benbjohnson/litestream/cmd/litestream@v0.5.18 (into a directory on PATH)" >&2
  exit 1
fi
if [ "${#need[@]}" -eq 0 ]; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
else
  echo "make test needs these Debian packages: ${need[*]} (sudo apt-get install -y ${need[*]})" >&2
  exit 1
fi
