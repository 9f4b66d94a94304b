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
#   SIGINT during the readiness wait of a fresh install (a Gate that never
#   becomes ready) ends with exit 2 and nothing left (files, units, accounts);
#   install v0.1.0 --enable-now (the two accounts, units enabled and active, Gate
#   version proof, Worker connected, a text job succeeds); each account
#   cannot read the other's state, configuration or secrets; the Worker
#   unit's seccomp filter lets Landlock and the seccomp filter of Codex's
#   command sandbox through (ABI >= 1 and 0 under the unit, EPERM without
#   the allow line); the same-version
#   re-run is byte-identical; the units' `systemd-analyze security` exposure
#   is <= 2.0 (printed) and `systemd-analyze verify` has empty stderr;
#   forge doctor is healthy (every agent plugin of the release installed
#   and answering its version) and read-only, and unhealthy (exit 2) for a
#   wrong mode, a changed binary, a tampered bin/forge (which never runs),
#   /var/lib/agent-forge at 0777, a stopped Gate and a stopped Worker,
#   passes the Worker's providers drop-in as docs/install.md gives it and
#   fails it with one more line (worker-unit);
#   refusals (tampered SHA256SUMS, an extra archive in SHA256SUMS or in the
#   directory, a malformed flag, a concurrent upgrade, upgrade without
#   --enable-now) change nothing; with the Worker stopped a
#   job is queued; doctor names a Gate drop-in (FAIL gate-unit); an
#   upgrade whose Gate never becomes ready (that drop-in) rolls back exactly with v0.1.0 serving again, and so does one
#   interrupted by SIGINT during that wait (exit 2); the real upgrade, with
#   an impostor (another account) bound to the Gate port in the window
#   after the old Gate stops, never sends the impostor a byte, ends with
#   the real v0.2.0 Gate and keeps the database, secrets and the queued job
#   (which then succeeds); a downgrade is refused; doctor is healthy on
#   v0.2.0; the hostile agent (testdata/hostile-agent, counted by
#   scripts/hostile-agent-e2e.sh) runs as the installed Worker's plugin and
#   scoped check in a text and a coding job and reaches nothing (printed:
#   tried=N reached=0), and with "sandbox": "none" reaches something (the
#   count can fail under the units too); finally everything is removed by hand, /opt made GitHub's 0777,
#   and scripts/installer-acceptance.sh (the CI acceptance fixture) must
#   refuse outside a GitHub runner, then normalise /opt and pass.
#   Final line: E2E PASS.
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
cp scripts/installer-acceptance.sh "$share/"
# The hostile agent (scripts/hostile-agent-e2e.sh) and its counter.
CGO_ENABLED=0 go build -o "$share/hostile-agent" ./testdata/hostile-agent >"$tmp/hostile-build.log" 2>&1 || fail "build testdata/hostile-agent"
mkdir -p "$share/scripts/lib"
cp scripts/hostile-agent-e2e.sh "$share/scripts/"
cp scripts/lib/*.sh "$share/scripts/lib/"
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
  --system-call-filter="landlock_create_ruleset landlock_add_rule landlock_restrict_self seccomp pidfd_getfd" \
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
# as ACCOUNT CMD...: run CMD inside the container as ACCOUNT (no other groups).
as() {
  local u=$1
  shift
  c setpriv --reuid="$u" --regid="$u" --clear-groups "$@"
}
# bg_install LOG FORGE ARGS...: start an installer in the background; its
# container pid goes to /run/e2e-installer.pid, the host job's to $bg.
bg_install() {
  local log=$1
  shift
  c rm -f /run/e2e-installer.pid
  c sh -c 'echo $$ >/run/e2e-installer.pid; exec "$@"' sh "$@" >"$tmp/$log" 2>&1 &
  bg=$!
}
# interrupt_when CONDITION...: once CONDITION holds in the container (the
# installer is in its readiness wait), SIGINT the installer; rc is its exit.
interrupt_when() {
  local i
  for i in $(seq 1 150); do
    c sh -c "$1" >/dev/null 2>&1 && break
    kill -0 "$bg" 2>/dev/null || break
    sleep 0.2
  done
  [ "$i" -lt 150 ] || fail "the installer never reached its readiness wait"
  sleep 1
  # shellcheck disable=SC2016 # expanded inside the container
  c sh -c 'kill -INT "$(cat /run/e2e-installer.pid)"'
  set +e
  wait "$bg"
  rc=$?
  set -e
}
# machine: what a fresh install may leave behind (paths, accounts, units).
machine() {
  c sh -c 'ls -A /opt /etc/systemd/system /var/lib; ls -d /etc/agent-forge 2>&1; getent passwd agent-forge-gate agent-forge-worker
    systemctl is-active agent-forge-gate agent-forge-worker; systemctl is-enabled agent-forge-gate agent-forge-worker 2>&1; true'
}

# shellcheck disable=SC2046 # install_args is split on purpose
# --- 0: SIGINT during the readiness wait of a fresh install ----------------------
c mkdir -p /etc/systemd/system/agent-forge-gate.service.d
c sh -c 'cat >/etc/systemd/system/agent-forge-gate.service.d/e2e-never-ready.conf' <<'EOF2'
[Service]
ExecStart=
ExecStart=/bin/sleep 600
EOF2
c systemctl daemon-reload
empty=$(machine)
# shellcheck disable=SC2046
bg_install sigint-fresh.log "$forge1" $(install_args v0.1.0 "$c1" /mnt/share/a1 "$sum1") --enable-now
interrupt_when 'systemctl is-active agent-forge-gate'
expect 2 sigint-fresh.log "readiness: interrupted" "SIGINT during a fresh install's readiness wait: exit"
sed 's/^/  /' "$tmp/sigint-fresh.log"
[ "$(machine)" = "$empty" ] || fail "the interrupted fresh install left something: $(machine)"
c rm -r /etc/systemd/system/agent-forge-gate.service.d
c systemctl daemon-reload

# --- A: install v0.1.0 --enable-now ---------------------------------------------
# shellcheck disable=SC2046
rc=$(fi_run install1.log "$forge1" $(install_args v0.1.0 "$c1" /mnt/share/a1 "$sum1") --enable-now)
[ "$rc" = 0 ] || fail "install v0.1.0 exit $rc: $(cat "$tmp/install1.log")"
sed 's/^/  /' "$tmp/install1.log"
c id agent-forge-gate >/dev/null || fail "agent-forge-gate account missing"
c id agent-forge-worker >/dev/null || fail "agent-forge-worker account missing"
for u in agent-forge-gate agent-forge-worker; do
  [ "$(c systemctl is-active "$u")" = active ] || fail "$u not active"
  [ "$(c systemctl is-enabled "$u")" = enabled ] || fail "$u not enabled"
done
grep -q "\"version\":\"v0.1.0\",\"commit\":\"$c1\"" <<<"$(owner_get /v1/version)" || fail "Gate does not report v0.1.0"
job1=$(printf '%s\n' '{"input":"installed forge"}' | forge_job submit -file - -wait -timeout 60s | field job | python3 -c 'import ast,sys; j=ast.literal_eval(sys.stdin.read()); assert j["status"]=="succeeded" and j["result"]=="INSTALLED FORGE", j; print(j["id"])') ||
  fail "text job on the installed services"

# --- A2: the accounts cannot read each other's files ------------------------------
for p in /etc/agent-forge/gate.env /etc/agent-forge/gate.json /var/lib/agent-forge/gate/forge.db /etc/agent-forge/worker.env; do
  as agent-forge-worker cat "$p" >/dev/null 2>&1 && fail "the Worker account reads $p"
done
as agent-forge-worker ls /var/lib/agent-forge/gate >/dev/null 2>&1 && fail "the Worker account lists the Gate's state"
for p in /etc/agent-forge/worker.env /etc/agent-forge/worker.json /etc/agent-forge/gate.env; do
  as agent-forge-gate cat "$p" >/dev/null 2>&1 && fail "the Gate account reads $p"
done
as agent-forge-gate ls /var/lib/agent-forge/worker >/dev/null 2>&1 && fail "the Gate account lists the Worker's state"
as agent-forge-worker cat /etc/agent-forge/worker.json >/dev/null || fail "the Worker account cannot read its own config"
as agent-forge-gate cat /etc/agent-forge/gate.json >/dev/null || fail "the Gate account cannot read its own config"
echo "linux-installer-e2e: the Gate and Worker accounts cannot read each other's state, configuration or secrets"

# --- A3: Landlock and Codex's seccomp pass the Worker unit's seccomp filter ------
# landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) is 444 on
# amd64 and arm64; it answers the ABI version, or EPERM from the filter.
# seccomp(SECCOMP_SET_MODE_FILTER, 0, one "allow" instruction), 317 on amd64
# and 277 on arm64, is what Codex's sandbox helper does for each command it
# runs (docs/codex.md): 0, or EPERM from the filter.
probe="import ctypes,sys,platform;l=ctypes.CDLL(None,use_errno=True);n=l.syscall(444,None,0,1);print('landlock',n,ctypes.get_errno());l.prctl(38,1,0,0,0);f=(ctypes.c_uint64*1)(0x7fff000000000006);p=(ctypes.c_uint64*2)(1,ctypes.addressof(f));r=l.syscall({'x86_64':317,'aarch64':277}[platform.machine()],1,0,p);print('seccomp',r,ctypes.get_errno());sys.exit(0 if n>=1 and r==0 else 3)"
filter=$(c systemctl show -p SystemCallFilter agent-forge-worker)
grep -q landlock_create_ruleset <<<"$filter" || fail "the Worker unit's filter lacks the Landlock calls"
grep -qw seccomp <<<"$filter" || fail "the Worker unit's filter lacks seccomp"
grep -qw pidfd_getfd <<<"$filter" || fail "the Worker unit's filter lacks pidfd_getfd (the guard's UNIX connects)"
c mkdir -p /etc/systemd/system/agent-forge-worker.service.d
printf '[Service]\nExecStartPre=/usr/bin/python3 -c "%s"\n' "$probe" | c sh -c 'cat >/etc/systemd/system/agent-forge-worker.service.d/e2e-landlock.conf'
c systemctl daemon-reload
c systemctl restart agent-forge-worker || fail "Landlock is refused under the Worker unit: $(c journalctl --no-pager -n 5 -u agent-forge-worker)"
c journalctl --no-pager -u agent-forge-worker >"$tmp/worker-journal.log"
grep -q 'landlock [1-9]' "$tmp/worker-journal.log" || fail "the Landlock probe did not run under the Worker unit"
grep -q 'seccomp 0 ' "$tmp/worker-journal.log" || fail "a seccomp filter is refused under the Worker unit"
c rm -r /etc/systemd/system/agent-forge-worker.service.d
c systemctl daemon-reload
c systemctl restart agent-forge-worker
# The control: systemd's @system-service alone refuses it (why the unit names them).
set +e
c systemd-run --quiet --wait --pipe -p NoNewPrivileges=yes -p SystemCallFilter=@system-service -p SystemCallErrorNumber=EPERM \
  /usr/bin/python3 -c "$probe" >"$tmp/landlock-control.log" 2>&1
rc=$?
set -e
{ [ "$rc" = 3 ] && grep -q 'landlock -1 1$' "$tmp/landlock-control.log" && grep -q 'seccomp -1 1$' "$tmp/landlock-control.log"; } ||
  fail "control: @system-service alone did not refuse Landlock and seccomp (exit $rc: $(cat "$tmp/landlock-control.log"))"
echo "linux-installer-e2e: Landlock and seccomp pass the Worker unit's filter (@system-service alone: EPERM)"

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
# Fifteen checks (worker-containment among them), and one per agent
# plugin of the release (installed, its digest, then its --version).
mapfile -t agent_plugins <"$repo_root/pkg/install/agent-plugins.txt"
[ "$(grep -c '^PASS ' "$tmp/doctor1.log")" = $((15 + ${#agent_plugins[@]})) ] ||
  fail "doctor did not pass $((15 + ${#agent_plugins[@]})) checks"
for p in "${agent_plugins[@]}"; do doctor_has "PASS ${p#forge-}" doctor1.log; done
sed 's/^/  /' "$tmp/doctor1.log"
[ "$(snapshot)" = "$before" ] || fail "forge doctor changed files"
tok_sha=$(c sha256sum /etc/agent-forge/gate.env | cut -d' ' -f1)
grep -q "$(c sed -n 's/^FORGE_OWNER_TOKEN=//p' /etc/agent-forge/gate.env)" "$tmp/doctor1.log" && fail "doctor printed the owner token"

# The Worker's providers drop-in exactly as docs/install.md gives it
# passes under the real systemd (its DropInPaths is that one path); one
# more line in it fails worker-unit.
c mkdir -m 0755 /etc/systemd/system/agent-forge-worker.service.d
printf '[Service]\nIPAddressDeny=\nMemoryDenyWriteExecute=no\n' |
  c sh -c 'umask 022; cat >/etc/systemd/system/agent-forge-worker.service.d/providers.conf'
c systemctl daemon-reload
doctor 0 doctor-providers.log
doctor_has "PASS worker-unit" doctor-providers.log
c sh -c 'echo ProtectHome=no >>/etc/systemd/system/agent-forge-worker.service.d/providers.conf'
c systemctl daemon-reload
doctor 2 doctor-providers-more.log
doctor_has "FAIL worker-unit" doctor-providers-more.log
c rm -r /etc/systemd/system/agent-forge-worker.service.d
c systemctl daemon-reload

c chmod 0775 /opt/agent-forge/bin/forge-gate
doctor 2 doctor-mode.log
doctor_has "FAIL immutable-files" doctor-mode.log
c chmod 0755 /opt/agent-forge/bin/forge-gate

c cp -p /opt/agent-forge/bin/forge-ref-plugin /root/ref.bak
c sh -c 'printf x >>/opt/agent-forge/bin/forge-ref-plugin'
doctor 2 doctor-binary.log
doctor_has "FAIL immutable-files" doctor-binary.log
c sh -c 'cat /root/ref.bak >/opt/agent-forge/bin/forge-ref-plugin'

# A tampered bin/forge: doctor (the release's own forge from the share)
# reports it and never executes it.
c cp -p /opt/agent-forge/bin/forge /root/forge.bak
c sh -c 'printf "#!/bin/sh\ntouch /root/forge-ran\necho forge\n" >/opt/agent-forge/bin/forge'
rc=$(fi_run doctor-forge.log "$forge1" doctor)
[ "$rc" = 2 ] || fail "doctor with a tampered bin/forge: exit $rc: $(cat "$tmp/doctor-forge.log")"
doctor_has "FAIL cli-identity" doctor-forge.log
doctor_has "FAIL immutable-files" doctor-forge.log
c test -e /root/forge-ran && fail "doctor executed the tampered bin/forge"
c sh -c 'cat /root/forge.bak >/opt/agent-forge/bin/forge'

c chmod 0777 /var/lib/agent-forge
doctor 2 doctor-stateroot.log
doctor_has "FAIL ancestors" doctor-stateroot.log
c chmod 0755 /var/lib/agent-forge

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
doctor 2 doctor-dropin.log
doctor_has "FAIL gate-unit" doctor-dropin.log
grep -q "has drop-ins: /etc/systemd/system/agent-forge-gate.service.d/e2e-not-ready.conf" "$tmp/doctor-dropin.log" ||
  fail "doctor does not name the drop-in: $(cat "$tmp/doctor-dropin.log")"
before=$(snapshot)
# shellcheck disable=SC2046
rc=$(fi_run notready.log "$forge2" $(install_args v0.2.0 "$c2" /mnt/share/a2 "$sum2") --upgrade --enable-now)
expect 2 notready.log "readiness:" "not-ready upgrade: exit"
[ "$(snapshot)" = "$before" ] || fail "the rolled-back upgrade did not restore the files exactly"
sed 's/^/  /' "$tmp/notready.log"
grep -q "\"version\":\"v0.1.0\"" <<<"$(owner_get /v1/version)" || fail "v0.1.0 is not serving after the rollback"
# The same upgrade interrupted by SIGINT during that wait.
# shellcheck disable=SC2046
bg_install sigint-upgrade.log "$forge2" $(install_args v0.2.0 "$c2" /mnt/share/a2 "$sum2") --upgrade --enable-now
interrupt_when 'grep -q "\"version\": \"v0.2.0\"" /opt/agent-forge/receipt.json && systemctl is-active agent-forge-gate'
expect 2 sigint-upgrade.log "readiness: interrupted" "SIGINT during an upgrade's readiness wait: exit"
sed 's/^/  /' "$tmp/sigint-upgrade.log"
[ "$(snapshot)" = "$before" ] || fail "the interrupted upgrade did not restore the files exactly"
grep -q "\"version\":\"v0.1.0\"" <<<"$(owner_get /v1/version)" || fail "v0.1.0 is not serving after the interrupted upgrade"
c rm -r /etc/systemd/system/agent-forge-gate.service.d
c systemctl daemon-reload

# --- H: the real upgrade, with an impostor on the Gate port -----------------------------
# The new Gate starts 3 s late (a drop-in), so the impostor (nobody), which
# binds 127.0.0.1:18080 as soon as the old Gate lets go, is what the
# installer reaches first; the real Gate binds after the impostor leaves.
c mkdir -p /etc/systemd/system/agent-forge-gate.service.d
c sh -c 'cat >/etc/systemd/system/agent-forge-gate.service.d/e2e-late.conf' <<'EOF2'
[Service]
ExecStartPre=/bin/sh -c 'case "$$(/opt/agent-forge/bin/forge-gate --version)" in *" v0.2.0 "*) exec sleep 3;; esac'
EOF2
c systemctl daemon-reload
c setpriv --reuid=nobody --regid=nogroup --clear-groups python3 -u - >"$tmp/impostor.log" 2>&1 <<'PY' &
import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
end = time.time() + 120
while True:
    try:
        s.bind(("127.0.0.1", 18080))
        break
    except OSError:
        if time.time() > end:
            raise SystemExit("never bound")
        time.sleep(0.01)
s.listen(8)
print("bound", flush=True)
s.settimeout(30)
while True:
    conn, _ = s.accept()
    conn.settimeout(5)
    try:
        data = conn.recv(65536)
    except OSError:
        data = b""
    print("connection", len(data), "auth" if b"authorization" in data.lower() else "noauth", flush=True)
    if not data:
        break  # the installer refused to talk: leave the port to the Gate
    conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 56\r\n\r\n{"version":"v0.2.0","commit":"x","schema_version":1}  ')
    conn.close()
PY
impostor=$!
conf_before=$(c sha256sum /etc/agent-forge/gate.json /etc/agent-forge/worker.json /etc/agent-forge/worker.env)
# shellcheck disable=SC2046
rc=$(fi_run upgrade.log "$forge2" $(install_args v0.2.0 "$c2" /mnt/share/a2 "$sum2") --upgrade --enable-now)
wait "$impostor" || fail "the impostor failed: $(cat "$tmp/impostor.log")"
[ "$rc" = 0 ] || fail "upgrade exit $rc: $(cat "$tmp/upgrade.log")"
sed 's/^/  /' "$tmp/upgrade.log"
grep -qx bound "$tmp/impostor.log" || fail "the impostor never held the port: $(cat "$tmp/impostor.log")"
grep -q '^connection 0 noauth$' "$tmp/impostor.log" || fail "the installer never reached the impostor: $(cat "$tmp/impostor.log")"
if grep -q '^connection [1-9]' "$tmp/impostor.log"; then fail "the installer sent the impostor bytes: $(cat "$tmp/impostor.log")"; fi
echo "linux-installer-e2e: the impostor on the Gate port got: $(grep -c '^connection' "$tmp/impostor.log") connection(s), 0 bytes"
c rm -r /etc/systemd/system/agent-forge-gate.service.d
c systemctl daemon-reload
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

# --- L: the hostile agent under the installed units --------------------------------
# testdata/hostile-agent (scripts/hostile-agent-e2e.sh counts its report)
# as the Worker's plugin and as a scoped check, under the installed units
# and their two accounts, the default Landlock sandbox: every try it makes
# at /proc, ptrace, signals, the Gate's state, env files, a stand-in App
# key, the Worker's config, other attempts, writes outside its workspace,
# links and the Gate's API must reach nothing.
c install -d -m 0755 /opt/forge-e2e
c install -m 0755 /mnt/share/hostile-agent /opt/forge-e2e/hostile-agent
# 0711: the agent (the Worker's account) connects to the collector's
# UNIX socket in it by name; it can list nothing there.
c install -d -m 0711 /run/hostile
key_marker=APP-KEY-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
c install -d -m 0700 -o agent-forge-gate -g agent-forge-gate /etc/agent-forge/gate-keys
printf -- '-----BEGIN RSA PRIVATE KEY-----\n%s\n-----END RSA PRIVATE KEY-----\n' "$key_marker" |
  c sh -c 'umask 077; cat >/etc/agent-forge/gate-keys/github-app.pem; chown agent-forge-gate: /etc/agent-forge/gate-keys/github-app.pem'
repo=/var/lib/agent-forge/worker/repositories/demo
as agent-forge-worker env HOME=/nonexistent GIT_CONFIG_GLOBAL=/dev/null sh -c "git init -q -b main $repo && printf 'demo\n' >$repo/README.md &&
  git -C $repo add -A && git -C $repo -c user.name=Seed -c user.email=seed@example.invalid commit -q -m base" || fail "seed repository"
base=$(as agent-forge-worker env GIT_CONFIG_GLOBAL=/dev/null git -C "$repo" rev-parse HEAD)
# Its socket of the Worker's own account stands in for that account's
# user manager (the guard refuses it: net-unix-own-account).
worker_uid=$(c id -u agent-forge-worker) || fail "the Worker's account has no uid"
# shellcheck disable=SC2016 # expanded inside the container
c env HOSTILE_OWN_UID="$worker_uid" sh -c 'echo $$ >/run/hostile/collector.pid; exec /mnt/share/scripts/hostile-agent-e2e.sh collect /run/hostile/addr /run/hostile/report.jsonl' \
  >"$tmp/collector.log" 2>&1 &
collector=$!
for _ in $(seq 1 100); do c test -s /run/hostile/addr && break; sleep 0.1; done
report_addr=$(c cat /run/hostile/addr) || fail "the hostile collector did not start: $(cat "$tmp/collector.log")"
reads=/var/lib/agent-forge:/var/lib/agent-forge/gate:/var/lib/agent-forge/gate/forge.db:/var/lib/agent-forge/gate/forge.db-wal
reads=$reads:/var/lib/agent-forge/gate/forge.db-shm:/etc/agent-forge/gate-keys:/etc/agent-forge/gate-keys/github-app.pem
reads=$reads:/etc/agent-forge/gate.env:/etc/agent-forge/worker.env:/etc/agent-forge/gate.json:/etc/agent-forge/worker.json
reads=$reads:/var/lib/agent-forge/worker:/var/lib/agent-forge/worker/runtime:/var/lib/agent-forge/worker/worktrees
reads=$reads:/var/lib/agent-forge/worker/repositories:/opt/agent-forge/receipt.json
writes=/var/lib/agent-forge:/var/lib/agent-forge/gate:/var/lib/agent-forge/worker:/var/lib/agent-forge/worker/runtime
writes=$writes:/var/lib/agent-forge/worker/worktrees:/var/lib/agent-forge/worker/repositories:$repo:$repo/.git
writes=$writes:$repo/.git/refs/heads:$repo/.git/hooks:/etc/agent-forge:/opt/agent-forge/bin
c mkdir -p /etc/systemd/system/agent-forge-worker.service.d
printf '[Service]\nEnvironment=HOSTILE_REPORT=%s HOSTILE_GATE=127.0.0.1:18080 HOSTILE_READ=%s HOSTILE_WRITE=%s\n' "$report_addr" "$reads" "$writes" |
  c sh -c 'cat >/etc/systemd/system/agent-forge-worker.service.d/e2e-hostile.conf'
# The operator's side: the agent as the Worker's plugin and the repository's
# policy (plugin, check and environment), in the mutable configuration.
c python3 - "$base" <<'PY' || fail "configure the hostile agent"
import json
envs = ["PATH", "HOSTILE_REPORT", "HOSTILE_READ", "HOSTILE_WRITE", "HOSTILE_GATE"]
g = json.load(open("/etc/agent-forge/gate.json"))
policy = dict(g["default_execution"], plugin_id="hostile", environment=envs, plugin_timeout="2m", check_timeout="2m")
g["default_execution"] = policy
g["repositories"] = [{"id": "demo", "default_branch": "main", "worker_pool": "local", "execution": policy}]
w = json.load(open("/etc/agent-forge/worker.json"))
w["plugins"].append({"id": "hostile", "argv": ["/opt/forge-e2e/hostile-agent"]})
w["environment_allowlist"] = envs
w["check_environment_allowlist"] = envs
w["repositories"] = [{"id": "demo", "path": "/var/lib/agent-forge/worker/repositories/demo"}]
for p, d in (("/etc/agent-forge/gate.json", g), ("/etc/agent-forge/worker.json", w)):
    # Rewrite in place: owner, group and mode stay the installer's.
    with open(p, "r+") as f:
        f.truncate(0)
        json.dump(d, f)
PY
c systemctl daemon-reload
c systemctl restart agent-forge-gate
wait_gate
c systemctl restart agent-forge-worker
for _ in $(seq 1 100); do owner_get '/v1/debug/workers?limit=10' 2>/dev/null | grep -q '"connected":true' && break; sleep 0.2; done
# hostile_jobs NAME: a text job and a coding job whose check is the agent;
# the collector's report goes to $tmp/hostile-NAME.jsonl.
hostile_jobs() {
  local text coding
  c sh -c ': >/run/hostile/report.jsonl'
  text=$(printf '%s\n' '{"input":"hostile"}' | forge_job submit -file - | field id) || fail "$1: submit the hostile text job"
  coding=$(c python3 -c 'import json,sys; print(json.dumps({"repository_id":"demo","base_sha":sys.argv[1],"instruction":"be hostile","tests":[["/opt/forge-e2e/hostile-agent","check"]]}))' "$base" |
    forge_job submit -file - | field id) || fail "$1: submit the hostile coding job"
  forge_job wait -timeout 120s "$text" >"$tmp/hostile-$1-text.json" || fail "$1: the hostile text job did not succeed: $(cat "$tmp/hostile-$1-text.json")"
  forge_job wait -timeout 120s "$coding" >"$tmp/hostile-$1-coding.json" || fail "$1: the hostile coding job did not succeed: $(cat "$tmp/hostile-$1-coding.json")"
  sleep 0.5 # the collector writes a report once its connection closes
  c cat /run/hostile/report.jsonl >"$tmp/hostile-$1.jsonl"
}
hostile_jobs sandboxed
c journalctl --no-pager -u agent-forge-worker >"$tmp/worker-journal.log"
grep -q '"msg":"sandbox","sandbox":"landlock"' "$tmp/worker-journal.log" || fail "the installed Worker did not log its Landlock sandbox"
owner=$(c sed -n 's/^FORGE_OWNER_TOKEN=//p' /etc/agent-forge/gate.env)
worker_token=$(c sed -n 's/^FORGE_WORKER_TOKEN=//p' /etc/agent-forge/worker.env)
echo "linux-installer-e2e: the hostile agent under the installed units (two accounts, Landlock):"
scripts/hostile-agent-e2e.sh count "$tmp/hostile-sandboxed.jsonl" "$owner" "$worker_token" "$key_marker" >"$tmp/hostile-count.out" || {
  cat "$tmp/hostile-count.out"
  fail "the hostile agent reached something under the installed units"
}
cat "$tmp/hostile-count.out"
python3 - "$tmp/hostile-sandboxed.jsonl" <<'PY' || fail "the plugin and the check did not both report; the collector said: $(tail -n 5 "$tmp/collector.log")"
import json, sys
who = {json.loads(l)["who"] for l in open(sys.argv[1]) if l.strip()}
assert who == {"plugin", "check"}, who
PY
tried=$(sed -n 's/^tried=\([0-9]*\) .*/\1/p' "$tmp/hostile-count.out")
[ "${tried:-0}" -ge 50 ] || fail "only ${tried:-0} hostile tries"
for kind in read list write symlink hardlink gate-no-token net-unix-own-account; do
  grep -q "^  $kind " "$tmp/hostile-count.out" || fail "no hostile $kind try under the installed units"
done
if ! grep -Eq '^  (proc-environ|proc-mem|ptrace|signal) ' "$tmp/hostile-count.out"; then
  echo "linux-installer-e2e: no process target: the units' ProtectProc=invisible and ProcSubset=pid show the agent only its own tree"
fi
# The same under the units with "sandbox": "none": the count can fail here too.
c python3 - <<'PY' || fail "set sandbox none"
import json
p = "/etc/agent-forge/worker.json"
w = json.load(open(p))
w["sandbox"] = "none"
with open(p, "r+") as f:
    f.truncate(0)
    json.dump(w, f)
PY
c systemctl restart agent-forge-worker
for _ in $(seq 1 100); do owner_get '/v1/debug/workers?limit=10' 2>/dev/null | grep -q '"connected":true' && break; sleep 0.2; done
hostile_jobs none
echo "linux-installer-e2e: the same under the installed units with \"sandbox\": \"none\" (the count can fail):"
if scripts/hostile-agent-e2e.sh count "$tmp/hostile-none.jsonl" "$owner" "$worker_token" "$key_marker" >"$tmp/hostile-none.out"; then
  cat "$tmp/hostile-none.out"
  fail "unconfined under the units, the hostile agent reached nothing: the count cannot fail"
fi
cat "$tmp/hostile-none.out"
# shellcheck disable=SC2016 # expanded inside the container
c sh -c 'kill "$(cat /run/hostile/collector.pid)"' || true
wait "$collector" 2>/dev/null || true
c rm -r /etc/systemd/system/agent-forge-worker.service.d
c systemctl daemon-reload

# --- K: the CI acceptance fixture on a cleaned host with GitHub's /opt 0777 ---------
# scripts/installer-acceptance.sh is what ci.yml and release.yml run on a
# disposable runner; here the container plays that runner: everything is
# removed by hand, /opt is made GitHub's documented 0777, and the fixture
# must normalise it, install v0.2.0 and pass.
c systemctl disable --now --quiet agent-forge-worker agent-forge-gate
c rm -rf /opt/agent-forge /opt/.agent-forge.lock /etc/agent-forge /var/lib/agent-forge \
  /etc/systemd/system/agent-forge-gate.service /etc/systemd/system/agent-forge-worker.service
c userdel agent-forge-worker
c userdel agent-forge-gate
c systemctl daemon-reload
c chmod 0777 /opt
# (nsenter passes this script's environment on: under GitHub Actions it
# says "runner", so the refusal case clears it.)
rc=$(fi_run acceptance-guard.log env -u GITHUB_ACTIONS -u RUNNER_ENVIRONMENT -u CI \
  /mnt/share/installer-acceptance.sh /mnt/share/a2 v0.2.0 "$c2" "$sum2")
expect 1 acceptance-guard.log "GitHub-hosted runner" "the acceptance fixture outside a GitHub runner: exit"
rc=$(fi_run acceptance.log env GITHUB_ACTIONS=true CI=true RUNNER_ENVIRONMENT=github-hosted \
  /mnt/share/installer-acceptance.sh /mnt/share/a2 v0.2.0 "$c2" "$sum2")
expect 0 acceptance.log "ACCEPTANCE PASS" "the acceptance fixture: exit"
grep -q "normalising it to 0755" "$tmp/acceptance.log" || fail "the fixture did not normalise /opt: $(cat "$tmp/acceptance.log")"
[ "$(c stat -c %a /opt)" = 755 ] || fail "/opt is not 0755 after the fixture"
echo "linux-installer-e2e: scripts/installer-acceptance.sh passed on the cleaned container (/opt 0777 normalised)"

echo "E2E PASS"
