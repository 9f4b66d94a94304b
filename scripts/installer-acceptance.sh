#!/usr/bin/env bash
# Privileged installer acceptance on a clean, disposable GitHub-hosted
# runner (ci.yml and release.yml run it as root before anything publishes):
#
#   sudo scripts/installer-acceptance.sh <asset-dir> <version> <commit> <sha256sums-sha256>
#
# <asset-dir> holds SHA256SUMS and the six Linux archives (optionally the
# SBOM). The script installs the real thing on the runner itself: the two
# real accounts, /opt/agent-forge, systemd enable/start, the authenticated
# Worker connection (forge doctor healthy), a text job, the
# validation-only same-version re-run (nothing changes) and a restart of
# both services (doctor healthy again). Final line: ACCEPTANCE PASS.
#
# It is a fixture, not part of the product: it refuses to run anywhere but
# a GitHub-hosted runner (RUNNER_ENVIRONMENT=github-hosted, GITHUB_ACTIONS
# and CI true), and only on a clean host (no installation path, unit,
# account or Gate port in use). GitHub's Ubuntu image provisions /opt as
# mode 0777; after every clean-host guard, and only then, it accepts /opt
# as root-owned 0755 or exactly that root-owned 0777 directory and
# normalises the latter to 0755. The installer itself stays fail-closed on
# writable privileged ancestors. It is not named *-e2e.sh: make test never
# runs it on a developer's machine.
set -euo pipefail
export LC_ALL=C
fail() { echo "installer-acceptance: FAIL: $*" >&2; exit 1; }
[ $# -eq 4 ] || { echo "usage: scripts/installer-acceptance.sh <asset-dir> <version> <commit> <sha256sums-sha256>" >&2; exit 2; }
assets=$1 version=$2 commit=$3 sums=$4

# --- guards ---------------------------------------------------------------------
[ "$(id -u)" = 0 ] || fail "must run as root"
[ "${GITHUB_ACTIONS:-}" = true ] && [ "${CI:-}" = true ] && [ "${RUNNER_ENVIRONMENT:-}" = github-hosted ] ||
  fail "runs only on a disposable GitHub-hosted runner (it installs Agent Forge on this host)"
[ "$(uname -s)" = Linux ] && [ -d /run/systemd/system ] || fail "needs Linux booted with systemd"
for p in /opt/agent-forge /etc/agent-forge /var/lib/agent-forge /opt/.agent-forge.lock \
  /etc/systemd/system/agent-forge-gate.service /etc/systemd/system/agent-forge-worker.service; do
  if [ -e "$p" ] || [ -L "$p" ]; then fail "not a clean host: $p exists"; fi
done
for a in agent-forge agent-forge-gate agent-forge-worker; do
  if getent passwd "$a" >/dev/null || getent group "$a" >/dev/null; then fail "not a clean host: account or group $a exists"; fi
done
if ss -Hltn 'sport = :18080' | grep -q .; then fail "not a clean host: something listens on port 18080"; fi
[[ $assets = /* ]] && [ -d "$assets" ] && [ ! -L "$assets" ] || fail "asset-dir must be an absolute directory"

# --- the documented /opt exception ---------------------------------------------
opt=$(stat -c '%u:%g %a %F' /opt)
case $opt in
  "0:0 755 directory") ;;
  "0:0 777 directory")
    echo "installer-acceptance: /opt is GitHub's documented root-owned 0777; normalising it to 0755"
    chmod 0755 /opt
    ;;
  *) fail "/opt is not a root-owned 0755 (or GitHub's exact 0777) directory: $opt" ;;
esac

# --- install --------------------------------------------------------------------
arch=$(uname -m)
case $arch in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) fail "unsupported architecture $arch" ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 0700 "$work"
tar -xzf "$assets/agent-forge-cli_${version}_linux_${arch}.tar.gz" -C "$work" forge
args=(install --version "$version" --commit "$commit" --asset-dir "$assets" --sha256sums-sha256 "$sums")
"$work/forge" "${args[@]}" --enable-now || fail "forge install --enable-now exit $?"
for a in agent-forge-gate agent-forge-worker; do id "$a" >/dev/null || fail "account $a missing"; done
for u in agent-forge-gate agent-forge-worker; do
  [ "$(systemctl is-enabled "$u")" = enabled ] || fail "$u is not enabled"
  [ "$(systemctl is-active "$u")" = active ] || fail "$u is not active"
done

# doctor_healthy: forge doctor is healthy within 30 s (it proves the Gate's
# release and the Worker's authenticated connection with the owner token).
doctor_healthy() {
  for _ in $(seq 1 150); do
    /opt/agent-forge/bin/forge doctor >"$work/doctor.out" 2>&1 && return 0
    sleep 0.2
  done
  cat "$work/doctor.out" >&2
  fail "forge doctor is not healthy $1"
}
doctor_healthy "after the install"
grep -qx "RESULT healthy" "$work/doctor.out" || fail "doctor output"
job() {
  # shellcheck disable=SC1091 # the installed env file
  (set -a && . /etc/agent-forge/gate.env && set +a &&
    printf '%s\n' '{"input":"acceptance"}' | FORGE_GATE_URL=http://127.0.0.1:18080 /opt/agent-forge/bin/forge submit -file - -wait -timeout 60s)
}
job >"$work/job.out" || fail "a text job on the installed services: $(cat "$work/job.out")"
grep -Eq '"result": ?"ACCEPTANCE"' "$work/job.out" || fail "the text job's result: $(cat "$work/job.out")"

# --- the same version again: validation only ------------------------------------
snapshot() {
  find /opt/agent-forge /etc/agent-forge /etc/systemd/system/agent-forge-gate.service /etc/systemd/system/agent-forge-worker.service \
    -printf '%p %y %m %U:%G %s %T@\n' | sort
  find /opt/agent-forge /etc/agent-forge -type f -print0 | sort -z | xargs -0 sha256sum
}
before=$(snapshot)
"$work/forge" "${args[@]}" --enable-now >"$work/rerun.out" 2>&1 || fail "same-version re-run exit $?: $(cat "$work/rerun.out")"
grep -q "nothing changed" "$work/rerun.out" || fail "same-version re-run: $(cat "$work/rerun.out")"
[ "$(snapshot)" = "$before" ] || fail "the same-version re-run changed files"

# --- service restart --------------------------------------------------------------
systemctl restart agent-forge-gate agent-forge-worker
doctor_healthy "after restarting both services"
job >"$work/job.out" || fail "a text job after the restart: $(cat "$work/job.out")"
echo "ACCEPTANCE PASS"
