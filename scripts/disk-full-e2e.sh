#!/usr/bin/env bash
# DISK-FULL-E2E: a full state file system is survived (DECISIONS 20).
#
# The Gate's state directory is a 32 MiB tmpfs (free_space_floor_bytes 4
# MiB) holding a 20 MiB reserve file (room for the results afterwards). A real Worker runs two lanes of a
# text plugin; two clients submit 60 KiB text jobs as fast as they can
# until both have seen 507 storage_full several times. Then:
#  - every answer was 201 or 507 storage_full: the Gate never stopped and
#    never refused a connection;
#  - /readyz answers 503 storage_full; job reads and the debug viewer
#    answer 200;
# The reserve is deleted; the Gate leaves the mode by itself (/readyz 200)
# and takes a submit again. Every acknowledged job then succeeds with no
# expired attempt (no running lease was burned). The tmpfs is
# then filled to the last byte and the Gate killed (SIGKILL) and started
# again: it starts (read-only, /readyz 503 storage_full, reads served,
# submits 507), and once the filler is deleted it leaves the mode and
# takes a submit. Finally the
# database passes integrity_check and holds every acknowledged job.
# Final line: DISK-FULL-E2E PASS.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
cd "$(dirname "$0")/.."

e2e_setup disk-full-e2e
[ "$(id -u)" -eq 0 ] || fail "needs root (it mounts a tmpfs; CI runs it as root)"
e2e_require python3
state=$tmp/state
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
  umount "$state" 2>/dev/null || umount -l "$state" 2>/dev/null || true
  e2e_cleanup
}
trap cleanup EXIT
e2e_build forge-gate forge-worker

FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_WORKER_TOKEN=worker-$(rand)
export FORGE_OWNER_TOKEN FORGE_WORKER_TOKEN

mkdir -m 0700 "$state"
mount -t tmpfs -o size=32m,mode=0700 forge-disk-full "$state" || fail "mount tmpfs"
head -c $((20 << 20)) /dev/zero >"$state/reserve"
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:0","database":"$state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"100ms","default_pool":"local","free_space_floor_bytes":4194304,
 "lifecycle":{"lease_ttl":"5s","retry_base":"200ms","max_attempts":3},
 "default_execution":{"plugin_id":"slow","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"1s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576},
 "workers":[{"id":"worker-1","pool":"local","token_env":"FORGE_WORKER_TOKEN","concurrency":2}],
 "repositories":[]}
EOF
e2e_start_gate "$tmp/gate.log" "Gate did not log its listening address"
cat >"$tmp/worker.json" <<EOF
{"version":1,"gate_url":"ws://$addr","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"500ms","concurrency":2,
 "repository_roots":[],"worktree_root":"$tmp/worktrees","runtime_root":"$tmp/runtime","repositories":[],
 "plugins":[{"id":"slow","argv":["$(pwd -P)/testdata/chaos/slow-plugin.py"]}],
 "environment_allowlist":["PATH"],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
EOF
e2e_start_worker

# api METHOD PATH [BODY]: prints "STATUS BODY" (a connection error is a
# failure of the whole script: the Gate must never stop).
cat >"$tmp/api.py" <<'PY'
import json, os, sys, urllib.error, urllib.request
def call(addr, method, path, body=None):
    req = urllib.request.Request("http://%s%s" % (addr, path), method=method, data=body,
                                 headers={"Authorization": "Bearer " + os.environ["FORGE_OWNER_TOKEN"],
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
PY
api() {
  PYTHONPATH=$tmp python3 - "$addr" "$@" <<'PY'
import sys
from api import call
s, b = call(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].encode() if len(sys.argv) > 4 else None)
print(s, b.decode())
PY
}

# client N: submits until it has seen 507 storage_full 20 times; writes
# the acknowledged ids to $tmp/acked-N and fails on any other answer.
client() {
  PYTHONPATH=$tmp python3 - "$addr" "$1" "$tmp/acked-$1" <<'PY'
import json, sys
from api import call
addr, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
pad = "x" * (60 << 10)
full = 0
with open(out, "w") as f:
    i = 0
    while full < 20:
        # Every 25th job runs 2 s, so leases are running when the mode starts.
        secs = "2" if i % 25 == 0 else "0"
        s, b = call(addr, "POST", "/v1/jobs", json.dumps({"input": "%s c%d-%d %s" % (secs, n, i, pad)}).encode())
        i += 1
        if s == 201:
            f.write(json.loads(b)["id"] + "\n")
            f.flush()
        elif s == 507 and json.loads(b)["error"]["code"] == "storage_full":
            full += 1
        else:
            sys.exit("client %d: submit answered %d %s" % (n, s, b[:200]))
print("client %d: %d acknowledged" % (n, i - full))
PY
}
client 1 >"$tmp/client-1.out" 2>&1 &
c1=$!
client 2 >"$tmp/client-2.out" 2>&1 &
c2=$!
wait "$c1" || fail "client 1"
wait "$c2" || fail "client 2"
cat "$tmp"/acked-* >"$tmp/acked"
[ -s "$tmp/acked" ] || fail "no job was acknowledged before the disk filled"
kill -0 "$gate_pid" 2>/dev/null || fail "the Gate stopped"

read -r code body < <(api GET /readyz)
if [ "$code" != 503 ] || [[ $body != *'"storage_full"'* ]]; then fail "/readyz in the mode: $code $body"; fi
first=$(head -1 "$tmp/acked")
read -r code _ < <(api GET "/v1/jobs/$first")
[ "$code" = 200 ] || fail "a read in the mode answered $code"
read -r code _ < <(api GET /v1/debug/jobs)
[ "$code" = 200 ] || fail "the debug viewer in the mode answered $code"
wait_log "$tmp/gate.log" 'e.get("msg") == "storage full: below the free-space floor"' >/dev/null || fail "no storage full log line"

rm "$state/reserve"
deadline=$((SECONDS + 20))
until [ "$(api GET /readyz | cut -d' ' -f1)" = 200 ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "the Gate did not leave storage_full after space came back"
  sleep 0.1
done
read -r code body < <(api POST /v1/jobs '{"input":"0 after the mode"}')
[ "$code" = 201 ] || fail "submit after the mode answered $code $body"
echo "$body" | field id >>"$tmp/acked"

# Every acknowledged job succeeds and no attempt expired: no lease was
# burned by the full disk (an attempt the plugin itself failed is retried
# and counted, not judged here).
PYTHONPATH=$tmp python3 - "$addr" "$tmp/acked" <<'PY' || fail "acknowledged jobs after the mode"
import json, sys, time
from api import call
addr, ids = sys.argv[1], open(sys.argv[2]).read().split()
deadline = time.time() + 40
pending = set(ids)
failed = {}
while pending and time.time() < deadline:
    for i in list(pending):
        s, b = call(addr, "GET", "/v1/jobs/%s/aggregate" % i)
        assert s == 200, (i, s)
        a = json.loads(b)
        assert a["job"]["status"] in ("pending", "leased", "retry_wait", "succeeded"), a["job"]
        if a["job"]["status"] != "succeeded":
            continue
        for x in a["attempts"]:
            assert x["status"] != "expired", ("a lease was burned", i, x)
            if x["status"] == "failed":
                failed[x["failure_code"]] = failed.get(x["failure_code"], 0) + 1
        pending.discard(i)
    time.sleep(0.2)
assert not pending, "%d acknowledged jobs did not succeed" % len(pending)
print("%d acknowledged jobs succeeded, no attempt expired; attempts the plugin failed: %s" % (len(ids), failed or "none"))
PY

stop Worker "$worker_pid"
# The disk fills to the last byte under the running Gate, which then
# crashes: its database and WAL fill the disk at the restart.
head -c $((64 << 20)) /dev/zero >"$state/filler" 2>/dev/null || true
kill -KILL "$gate_pid"
wait "$gate_pid" 2>/dev/null || true
pids=()
e2e_start_gate "$tmp/gate2.log" "the Gate did not start on a full disk"
deadline=$((SECONDS + 20))
until [ "$(api GET /readyz | cut -d' ' -f1)" = 503 ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "the restarted Gate never answered /readyz"
  sleep 0.1
done
read -r code body < <(api GET /readyz)
[[ $body == *'"storage_full"'* ]] || fail "/readyz after a start on a full disk: $code $body"
read -r code _ < <(api GET "/v1/jobs/$first")
[ "$code" = 200 ] || fail "a read after a start on a full disk answered $code"
read -r code _ < <(api POST /v1/jobs '{"input":"0 refused"}')
[ "$code" = 507 ] || fail "a submit on a full disk answered $code"
rm "$state/filler"
deadline=$((SECONDS + 20))
until [ "$(api GET /readyz | cut -d' ' -f1)" = 200 ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "the restarted Gate did not leave storage_full"
  sleep 0.1
done
read -r code _ < <(api POST /v1/jobs '{"input":"0 back"}')
[ "$code" = 201 ] || fail "submit after the restart answered $code"
stop Gate "$gate_pid"
pids=()

python3 - "$state/forge.db" "$tmp/acked" <<'PY' || fail "database check"
import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
ok = db.execute("PRAGMA integrity_check").fetchone()[0]
assert ok == "ok", ok
have = {r[0] for r in db.execute("SELECT id FROM jobs")}
missing = [i for i in open(sys.argv[2]).read().split() if i not in have]
assert not missing, ("acknowledged jobs lost", missing[:5])
print("integrity_check ok; %d jobs stored" % len(have))
PY
for f in "$tmp"/*.log; do
  if grep -q -e "$FORGE_OWNER_TOKEN" -e "$FORGE_WORKER_TOKEN" "$f"; then
    fail "$(basename "$f") contains a token"
  fi
done
echo "DISK-FULL-E2E PASS"
