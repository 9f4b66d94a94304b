#!/usr/bin/env bash
# E2E: `forge install` and `forge doctor` under a real systemd (root only).
#
# Builds two real releases with scripts/build-release.sh from a private
# clone (v0.1.0 at HEAD, v0.2.0 at an empty commit on top: the same tree,
# newer version), selects the six Linux archives and a Linux-only
# SHA256SUMS for each (what the tag pipeline publishes), then boots systemd
# as PID 1 with `systemd-nspawn -D / --volatile=yes -b` on a private
# network, with /opt, /etc/systemd/system and /var/lib bound from a temp
# dir and /etc as an overlay whose upper layer is a temp dir (the host's
# files are never written). Inside it, over nsenter:
#   install v0.1.0 --enable-now (account, units enabled and active, Gate
#   version proof, Worker connected, a text job succeeds); the same-version
#   re-run is byte-identical; the units' `systemd-analyze security` exposure
#   is <= 2.0 (printed) and `systemd-analyze verify` has empty stderr;
#   forge doctor is healthy and read-only, and unhealthy (exit 2) for a
#   wrong mode, a changed binary, a stopped Gate and a stopped Worker;
#   refusals (tampered SHA256SUMS, an extra archive in SHA256SUMS or in the
#   directory, a malformed flag, a concurrent upgrade, upgrade without
#   --enable-now) change nothing; with the Worker stopped a
#   job is queued; an upgrade whose Gate never becomes ready (a drop-in)
#   rolls back exactly with v0.1.0 serving again; the real upgrade keeps the
#   database, secrets and the queued job (which then succeeds); a downgrade
#   is refused; doctor is healthy on v0.2.0. Final line: E2E PASS.
#
# Where systemd-nspawn cannot run, the script says so and fails.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
cd "$(dirname "$0")/.."
repo_root=$(pwd -P)

fail() {
  echo "linux-installer-e2e: FAIL: $*" >&2
  if [ -n "${leader:-}" ]; then
    nsenter -t "$leader" -a journalctl --no-pager -n 40 -u agent-forge-gate -u agent-forge-worker >&2 2>/dev/null || true
  fi
  e2e_dump_logs 30 "$tmp"/*.log
  exit 1
}

[ "$(id -u)" = 0 ] || { echo "linux-installer-e2e: FAIL: must run as root (it boots systemd in a container)" >&2; exit 1; }
for tool in systemd-nspawn nsenter git go sha256sum tar python3 flock; do
  command -v "$tool" >/dev/null ||
    { echo "linux-installer-e2e: FAIL: $tool is missing (systemd-nspawn: Debian package systemd-container); this proof needs a real systemd" >&2; exit 1; }
done

tmp=$(mktemp -d)
leader='' nspawn_pid=''
cleanup() {
  # Killing the container's PID 1 ends every process in its PID namespace.
  if [ -n "$leader" ]; then kill -KILL "$leader" 2>/dev/null || true; fi
  if [ -n "$nspawn_pid" ]; then wait "$nspawn_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- two real releases ----------------------------------------------------
git clone -q --no-hardlinks "$repo_root" "$tmp/src" || fail "clone"
c1=$(git -C "$tmp/src" rev-parse HEAD)
git -C "$tmp/src" -c user.name=e2e -c user.email=e2e@invalid commit -q --allow-empty -m "next release" || fail "second commit"
c2=$(git -C "$tmp/src" rev-parse HEAD)
git -C "$tmp/src" checkout -q "$c1"
"$tmp/src/scripts/build-release.sh" v0.1.0 "$c1" "$tmp/rel1" >"$tmp/build1.log" 2>&1 || fail "build v0.1.0"
git -C "$tmp/src" checkout -q "$c2"
"$tmp/src/scripts/build-release.sh" v0.2.0 "$c2" "$tmp/rel2" >"$tmp/build2.log" 2>&1 || fail "build v0.2.0"

arch=$(go env GOARCH)
share=$tmp/share
mkdir -p "$share"
# linux_assets VERSION RELEASE_DIR DEST: the six Linux archives and their
# SHA256SUMS.
linux_assets() {
  mkdir "$3"
  (cd "$2" && cp -- agent-forge-*_"$1"_linux_*.tar.gz "$3/")
  (cd "$3" && sha256sum -- *.tar.gz >SHA256SUMS)
  tar -xzf "$3/agent-forge-cli_$1_linux_${arch}.tar.gz" -C "$share" forge
  mv "$share/forge" "$share/forge-$1"
}
linux_assets v0.1.0 "$tmp/rel1" "$share/a1"
linux_assets v0.2.0 "$tmp/rel2" "$share/a2"
sum1=$(sha256sum "$share/a1/SHA256SUMS" | cut -d' ' -f1)
sum2=$(sha256sum "$share/a2/SHA256SUMS" | cut -d' ' -f1)
# Refusal inputs: a tampered SHA256SUMS (trusted digest unchanged) and the
# builder's eight-entry SHA256SUMS (with its own digest).
cp -r "$share/a2" "$share/tampered"
python3 - "$share/tampered/SHA256SUMS" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[0] = ord("1") if b[0] == ord("0") else ord("0")  # one digest digit differs
open(p, "wb").write(bytes(b))
PY
cmp -s "$share/a2/SHA256SUMS" "$share/tampered/SHA256SUMS" && fail "tampering changed nothing"
mkdir "$share/extra"
cp "$tmp/rel2"/* "$share/extra/"
sum_extra=$(sha256sum "$share/extra/SHA256SUMS" | cut -d' ' -f1)
# The Linux-only set with a seventh file: a darwin archive beside it.
cp -r "$share/a2" "$share/seventh"
cp "$tmp/rel2/agent-forge-worker_v0.2.0_darwin_${arch}.tar.gz" "$share/seventh/"
chmod -R a+rX "$share"

# --- boot systemd -----------------------------------------------------------
ns=$tmp/ns
mkdir -p "$ns/etc-upper" "$ns/opt" "$ns/units" "$ns/var-lib"
chmod 0755 "$ns" "$ns/opt" "$ns/units" "$ns/var-lib"
# --register=no and --keep-unit: the host has no systemd (no machined, no
# bus); --volatile=yes keeps only /usr from the host, so /etc comes from an
# overlay of the host's /etc with a private upper layer. nspawn's own
# seccomp filter refuses Landlock unless told otherwise: the container must
# not hide what the Worker unit's filter allows.
systemd-nspawn -D / --volatile=yes -b --private-network --register=no --keep-unit \
  --system-call-filter="landlock_create_ruleset landlock_add_rule landlock_restrict_self" \
  --machine="forge-e2e-$$" --overlay="/etc:$ns/etc-upper:/etc" \
  --bind="$ns/opt:/opt" --bind="$ns/units:/etc/systemd/system" --bind="$ns/var-lib:/var/lib" \
  --bind-ro="$share:/mnt/share" </dev/null >"$tmp/nspawn.log" 2>&1 &
nspawn_pid=$!
for _ in $(seq 1 100); do
  leader=$(ps -o pid=,ppid=,comm= -e | awk -v p="$nspawn_pid" '$2 == p && $3 == "systemd" {print $1}')
  [ -n "$leader" ] && break
  kill -0 "$nspawn_pid" 2>/dev/null || break
  sleep 0.2
done
if [ -z "$leader" ]; then
  cat "$tmp/nspawn.log" >&2
  echo "linux-installer-e2e: FAIL: systemd-nspawn could not boot systemd here (see its output above)" >&2
  exit 1
fi
c() { nsenter -t "$leader" -a "$@"; }
state=''
for _ in $(seq 1 150); do
  state=$(c systemctl is-system-running 2>/dev/null || true)
  case $state in running | degraded) break ;; esac
  sleep 0.2
done
case $state in running | degraded) ;; *) fail "container systemd did not finish booting (${state:-no answer})" ;; esac

# --- helpers running inside the container -----------------------------------
forge1=/mnt/share/forge-v0.1.0
forge2=/mnt/share/forge-v0.2.0
# fi_run LOG FORGE ARGS...: run an installer, output to $tmp/LOG, print its exit code.
fi_run() {
  local log=$1
  shift
  set +e
  c "$@" >"$tmp/$log" 2>&1
  local rc=$?
  set -e
  echo "$rc"
}
install_args() { # VERSION COMMIT DIR SUM
  echo install --version "$1" --commit "$2" --asset-dir "$3" --sha256sums-sha256 "$4"
}
# snapshot: digest of every installed file (content, mode, owner, mtime).
snapshot() {
  c sh -c 'find /opt/agent-forge /etc/agent-forge /etc/systemd/system/agent-forge-gate.service /etc/systemd/system/agent-forge-worker.service \
    -printf "%p %y %m %U:%G %s %T@\n" | sort; find /opt/agent-forge /etc/agent-forge -type f -print0 | sort -z | xargs -0 sha256sum'
}
# owner_get PATH: GET an owner route, token read inside the container. Read
# its whole answer before matching (grep -q in a pipe may close it early).
owner_get() {
  c python3 - "$1" <<'PY'
import sys, urllib.request
tok = [l.split("=", 1)[1].strip() for l in open("/etc/agent-forge/gate.env") if l.startswith("FORGE_OWNER_TOKEN=")][0]
req = urllib.request.Request("http://127.0.0.1:18080" + sys.argv[1], headers={"Authorization": "Bearer " + tok})
print(urllib.request.urlopen(req, timeout=5).read().decode())
PY
}
# wait_gate: until the Gate answers its owner version route (10 s).
wait_gate() {
  for _ in $(seq 1 50); do owner_get /v1/version >/dev/null 2>&1 && return 0; sleep 0.2; done
  fail "the Gate did not come back"
}
# forge_job ARGS...: run the installed forge CLI with the owner token.
forge_job() {
  c sh -c 'set -a; . /etc/agent-forge/gate.env; set +a; FORGE_GATE_URL=http://127.0.0.1:18080 exec /opt/agent-forge/bin/forge "$@"' forge "$@"
}
doctor() { # EXPECTED_EXIT LOG
  local rc
  rc=$(fi_run "$2" /opt/agent-forge/bin/forge doctor)
  [ "$rc" = "$1" ] || fail "forge doctor exit $rc, want $1: $(cat "$tmp/$2")"
}
# expect RC LOG PATTERN WHAT: the last run exited RC and its output has PATTERN.
expect() {
  [ "$rc" = "$1" ] || fail "$4: exit $rc, want $1: $(cat "$tmp/$2")"
  grep -q -- "$3" "$tmp/$2" || fail "$4: output lacks '$3': $(cat "$tmp/$2")"
}
doctor_has() { grep -qx "$1" "$tmp/$2" || fail "doctor output lacks '$1': $(cat "$tmp/$2")"; }

# shellcheck disable=SC2046 # install_args is split on purpose
# --- A: install v0.1.0 --enable-now ---------------------------------------------
rc=$(fi_run install1.log "$forge1" $(install_args v0.1.0 "$c1" /mnt/share/a1 "$sum1") --enable-now)
[ "$rc" = 0 ] || fail "install v0.1.0 exit $rc: $(cat "$tmp/install1.log")"
sed 's/^/  /' "$tmp/install1.log"
c id agent-forge >/dev/null || fail "agent-forge account missing"
for u in agent-forge-gate agent-forge-worker; do
  [ "$(c systemctl is-active "$u")" = active ] || fail "$u not active"
  [ "$(c systemctl is-enabled "$u")" = enabled ] || fail "$u not enabled"
done
grep -q "\"version\":\"v0.1.0\",\"commit\":\"$c1\"" <<<"$(owner_get /v1/version)" || fail "Gate does not report v0.1.0"
job1=$(printf '%s\n' '{"input":"installed forge"}' | forge_job submit -file - -wait -timeout 60s | field job | python3 -c 'import ast,sys; j=ast.literal_eval(sys.stdin.read()); assert j["status"]=="succeeded" and j["result"]=="INSTALLED FORGE", j; print(j["id"])') ||
  fail "text job on the installed services"

# --- B: same version again: validation only -------------------------------------
before=$(snapshot)
# shellcheck disable=SC2046
rc=$(fi_run rerun.log "$forge1" $(install_args v0.1.0 "$c1" /mnt/share/a1 "$sum1") --enable-now)
expect 0 rerun.log "nothing changed" "same-version re-run exit"
[ "$(snapshot)" = "$before" ] || fail "same-version re-run changed files"

# --- C: hardening figures ---------------------------------------------------------
for u in agent-forge-gate agent-forge-worker; do
  c systemd-analyze security --offline=yes "/etc/systemd/system/$u.service" >"$tmp/security-$u.out" 2>&1 || true
  exposure=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' "$tmp/security-$u.out")
  [ -n "$exposure" ] || fail "no exposure figure for $u"
  echo "linux-installer-e2e: $u.service exposure $exposure (systemd-analyze security --offline=yes)"
  python3 -c "import sys; sys.exit(0 if float('$exposure') <= 2.0 else 1)" || fail "$u exposure $exposure > 2.0"
  c systemd-analyze verify "/etc/systemd/system/$u.service" >"$tmp/verify-$u.log" 2>"$tmp/verify-$u.err" || fail "systemd-analyze verify $u failed"
  [ ! -s "$tmp/verify-$u.err" ] || fail "systemd-analyze verify $u wrote to stderr: $(cat "$tmp/verify-$u.err")"
done

# --- D: doctor healthy, read-only, then each unhealthy case -------------------------
before=$(snapshot)
doctor 0 doctor1.log
doctor_has "RESULT healthy" doctor1.log
[ "$(grep -c '^PASS ' "$tmp/doctor1.log")" = 10 ] || fail "doctor did not pass 10 checks"
sed 's/^/  /' "$tmp/doctor1.log"
[ "$(snapshot)" = "$before" ] || fail "forge doctor changed files"
tok_sha=$(c sha256sum /etc/agent-forge/gate.env | cut -d' ' -f1)
grep -q "$(c sed -n 's/^FORGE_OWNER_TOKEN=//p' /etc/agent-forge/gate.env)" "$tmp/doctor1.log" && fail "doctor printed the owner token"

c chmod 0775 /opt/agent-forge/bin/forge-gate
doctor 2 doctor-mode.log
doctor_has "FAIL immutable-files" doctor-mode.log
c chmod 0755 /opt/agent-forge/bin/forge-gate

c cp -p /opt/agent-forge/bin/forge-ref-plugin /root/ref.bak
c sh -c 'printf x >>/opt/agent-forge/bin/forge-ref-plugin'
doctor 2 doctor-binary.log
doctor_has "FAIL immutable-files" doctor-binary.log
c sh -c 'cat /root/ref.bak >/opt/agent-forge/bin/forge-ref-plugin'

c systemctl stop agent-forge-gate
doctor 2 doctor-gate.log
doctor_has "FAIL gate-unit" doctor-gate.log
doctor_has "FAIL gate-release" doctor-gate.log
c systemctl start agent-forge-gate
wait_gate

c systemctl stop agent-forge-worker
doctor 2 doctor-worker.log
doctor_has "FAIL worker-unit" doctor-worker.log
doctor_has "FAIL worker-connected" doctor-worker.log
doctor_has "PASS gate-release" doctor-worker.log
c systemctl start agent-forge-worker
for _ in $(seq 1 50); do
  c /opt/agent-forge/bin/forge doctor >"$tmp/doctor-back.log" 2>&1 && break
  sleep 0.2
done
doctor 0 doctor-back.log

# --- E: refusals change nothing ---------------------------------------------------
before=$(snapshot)
# shellcheck disable=SC2046
rc=$(fi_run tampered.log "$forge2" $(install_args v0.2.0 "$c2" /mnt/share/tampered "$sum2") --upgrade --enable-now)
expect 2 tampered.log "trust:" "tampered SHA256SUMS: exit"
# shellcheck disable=SC2046
rc=$(fi_run extra.log "$forge2" $(install_args v0.2.0 "$c2" /mnt/share/extra "$sum_extra") --upgrade --enable-now)
expect 2 extra.log "manifest:" "extra archive: exit"
# shellcheck disable=SC2046
rc=$(fi_run seventh.log "$forge2" $(install_args v0.2.0 "$c2" /mnt/share/seventh "$sum2") --upgrade --enable-now)
expect 2 seventh.log "manifest:" "a seventh file in the asset directory: exit"
# shellcheck disable=SC2046
rc=$(fi_run badflag.log "$forge2" $(install_args v0.2 "$c2" /mnt/share/a2 "$sum2") --upgrade --enable-now)
expect 1 badflag.log "arguments:" "malformed --version: exit"
# shellcheck disable=SC2046
rc=$(fi_run noenable.log "$forge2" $(install_args v0.2.0 "$c2" /mnt/share/a2 "$sum2") --upgrade)
[ "$rc" = 2 ] || fail "upgrade without --enable-now: exit $rc $(cat "$tmp/noenable.log")"
# A second installer holds the lock (flock -o: only the flock process holds it).
c sh -c 'echo $$ >/run/e2e-lock-holder.pid; exec flock -o /opt/.agent-forge.lock sleep 120' &
holder=$!
for _ in $(seq 1 50); do c flock -n /opt/.agent-forge.lock true 2>/dev/null || break; sleep 0.1; done
# shellcheck disable=SC2046
rc=$(fi_run locked.log "$forge2" $(install_args v0.2.0 "$c2" /mnt/share/a2 "$sum2") --upgrade --enable-now)
# shellcheck disable=SC2016 # expanded inside the container
c sh -c 'kill "$(cat /run/e2e-lock-holder.pid)"' || true
wait "$holder" 2>/dev/null || true # it ends by SIGTERM
expect 2 locked.log "lock:" "concurrent upgrade: exit"
[ "$(snapshot)" = "$before" ] || fail "a refusal changed files"

# --- F+G: a queued job; an upgrade whose Gate never becomes ready -----------------------
c systemctl stop agent-forge-worker
job2=$(printf '%s\n' '{"input":"queued across upgrade"}' | forge_job submit -file - | field id) || fail "submit queued job"
c mkdir -p /etc/systemd/system/agent-forge-gate.service.d
c sh -c 'cat >/etc/systemd/system/agent-forge-gate.service.d/e2e-not-ready.conf' <<'EOF'
[Service]
ExecStart=
ExecStart=/bin/sh -c 'case "$$(/opt/agent-forge/bin/forge-gate --version)" in *" v0.2.0 "*) exec sleep 600;; esac; exec /opt/agent-forge/bin/forge-gate -config /etc/agent-forge/gate.json'
EOF
c systemctl daemon-reload
c systemctl restart agent-forge-gate
wait_gate
before=$(snapshot)
# shellcheck disable=SC2046
rc=$(fi_run notready.log "$forge2" $(install_args v0.2.0 "$c2" /mnt/share/a2 "$sum2") --upgrade --enable-now)
expect 2 notready.log "readiness:" "not-ready upgrade: exit"
[ "$(snapshot)" = "$before" ] || fail "the rolled-back upgrade did not restore the files exactly"
sed 's/^/  /' "$tmp/notready.log"
grep -q "\"version\":\"v0.1.0\"" <<<"$(owner_get /v1/version)" || fail "v0.1.0 is not serving after the rollback"
c rm -r /etc/systemd/system/agent-forge-gate.service.d
c systemctl daemon-reload

# --- H: the real upgrade ---------------------------------------------------------------
conf_before=$(c sha256sum /etc/agent-forge/gate.json /etc/agent-forge/worker.json /etc/agent-forge/worker.env)
# shellcheck disable=SC2046
rc=$(fi_run upgrade.log "$forge2" $(install_args v0.2.0 "$c2" /mnt/share/a2 "$sum2") --upgrade --enable-now)
[ "$rc" = 0 ] || fail "upgrade exit $rc: $(cat "$tmp/upgrade.log")"
sed 's/^/  /' "$tmp/upgrade.log"
grep -q "\"version\":\"v0.2.0\",\"commit\":\"$c2\"" <<<"$(owner_get /v1/version)" || fail "Gate does not report v0.2.0"
[ "$(c sha256sum /etc/agent-forge/gate.env | cut -d' ' -f1)" = "$tok_sha" ] || fail "the upgrade rotated secrets"
[ "$(c sha256sum /etc/agent-forge/gate.json /etc/agent-forge/worker.json /etc/agent-forge/worker.env)" = "$conf_before" ] || fail "the upgrade changed configuration"
forge_job wait -timeout 60s "$job2" >"$tmp/job2.out" || fail "queued job did not succeed after the upgrade"
grep -q '"result": "QUEUED ACROSS UPGRADE"' "$tmp/job2.out" || fail "queued job result"
grep -q '"status": "succeeded"' <<<"$(forge_job status "$job1")" || fail "the database lost the first job"

# --- I: downgrade refused; J: doctor healthy on v0.2.0 -------------------------------------
before=$(snapshot)
# shellcheck disable=SC2046
rc=$(fi_run downgrade.log "$forge1" $(install_args v0.1.0 "$c1" /mnt/share/a1 "$sum1") --upgrade --enable-now)
expect 2 downgrade.log "downgrade" "downgrade: exit"
[ "$(snapshot)" = "$before" ] || fail "the refused downgrade changed files"
doctor 0 doctor-final.log
doctor_has "RESULT healthy" doctor-final.log

echo "E2E PASS"
