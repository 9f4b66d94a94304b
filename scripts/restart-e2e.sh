#!/usr/bin/env bash
# RESTART-E2E: routine Worker restarts never burn queued work.
#
# 50 text jobs (max_attempts 2) flow through a slow plugin on one real
# Worker with two lanes, which is restarted with SIGTERM five times (as
# systemd does), each time while an attempt runs and jobs are queued.
# Before each restart the script waits until every job a previous restart
# interrupted has succeeded, so no job can honestly be interrupted twice.
# Afterwards:
#  - every job succeeded;
#  - every attempt the store recorded was started by the Worker (its log
#    has a "leased" line for that attempt id): no job lost an attempt to a
#    lease it never started; no attempt expired (nothing was left leased to
#    a gone connection), and every failed attempt is worker_shutdown;
#  - each Worker process exited 0.
# It prints how many attempts ended worker_shutdown and how many leases
# went back to the queue unstarted ("released" events).
# Final line: RESTART-E2E PASS.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
pids=()
e2e_traps
fail() { e2e_fail restart-e2e "$@"; }

jobs=50
restarts=5
bin=$tmp/bin
mkdir -p "$bin"
e2e_build forge-gate forge-worker forge

FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_WORKER_TOKEN=worker-$(rand)
export FORGE_OWNER_TOKEN FORGE_WORKER_TOKEN

mkdir -m 0700 "$tmp/state"
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:0","database":"$tmp/state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"5s","retry_base":"200ms","max_attempts":2},
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

# Each Worker process logs to its own file; all of them are checked.
start_worker() { # $1: run number
  e2e_cgroup worker # one cgroup for every run: the Worker takes it over again
  (in_cgroup "$cgroup_dir" "$bin/forge-worker" -config "$tmp/worker.json" 2>"$tmp/worker-$1.log") &
  worker_pid=$!
  pids+=("$worker_pid")
}
# The whole backlog is queued before the first Worker connects.
python3 - "$addr" "$jobs" >"$tmp/ids" <<'PY' || fail "submit"
import json, os, sys, urllib.request
for i in range(int(sys.argv[2])):
    req = urllib.request.Request("http://%s/v1/jobs" % sys.argv[1], method="POST",
                                 data=json.dumps({"input": "0.4 job %d" % i}).encode(),
                                 headers={"Authorization": "Bearer " + os.environ["FORGE_OWNER_TOKEN"],
                                          "Content-Type": "application/json"})
    print(json.load(urllib.request.urlopen(req, timeout=10))["id"])
PY
start_worker 0

# state: one line per job, "id status attempt_count failed_attempts".
poll() {
  python3 - "$tmp/ids" "$addr" <<'PY'
import json, os, sys, urllib.request
ids = open(sys.argv[1]).read().split()
token = os.environ["FORGE_OWNER_TOKEN"]
for i in ids:
    req = urllib.request.Request("http://%s/v1/jobs/%s/aggregate" % (sys.argv[2], i),
                                 headers={"Authorization": "Bearer " + token})
    a = json.load(urllib.request.urlopen(req, timeout=10))
    failed = sum(1 for x in a["attempts"] if x["status"] != "succeeded" and x["status"] != "leased")
    print(i, a["job"]["status"], a["job"]["attempt_count"], failed)
PY
}

# ready_to_restart: an attempt runs, jobs are queued, and every job an
# earlier restart interrupted has succeeded.
ready_to_restart() {
  poll | python3 -c '
import sys
rows = [l.split() for l in sys.stdin.read().splitlines()]
leased = any(r[1] == "leased" for r in rows)
queued = any(r[1] == "pending" for r in rows)
settled = all(r[1] == "succeeded" for r in rows if int(r[3]) > 0)
sys.exit(0 if leased and queued and settled else 1)'
}

for r in $(seq 1 "$restarts"); do
  deadline=$((SECONDS + 30))
  until ready_to_restart; do
    [ "$SECONDS" -lt "$deadline" ] || fail "restart $r: no moment with an attempt running, jobs queued and earlier victims done"
    sleep 0.1
  done
  stop "Worker (restart $r)" "$worker_pid"
  start_worker "$r"
done

mkdir "$tmp/agg"
while read -r id; do
  "$bin/forge" wait -timeout 60s -poll 100ms "$id" >"$tmp/agg/$id.json" || fail "forge wait $id (exit $?)"
done <"$tmp/ids"
stop Worker "$worker_pid"
stop Gate "$gate_pid"
pids=()

cat "$tmp"/worker-*.log >"$tmp/workers.all"
python3 - "$tmp/agg" "$tmp/workers.all" "$jobs" <<'PY' || fail "restart outcome"
import json, os, sys
aggs = [json.load(open(os.path.join(sys.argv[1], f))) for f in sorted(os.listdir(sys.argv[1]))]
started = set()
for line in open(sys.argv[2]).read().splitlines():
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("msg") == "leased" and e.get("attempt"):
        started.add(e["attempt"])
assert len(aggs) == int(sys.argv[3]), len(aggs)
shutdown = released = 0
for a in aggs:
    job = a["job"]
    assert job["status"] == "succeeded", job
    for x in a["attempts"]:
        assert x["id"] in started, ("an attempt the Worker never started", job["id"], x)
        assert x["status"] in ("succeeded", "failed"), ("attempt", job["id"], x)
        if x["status"] == "failed":
            assert x["failure_code"] == "worker_shutdown", x
            shutdown += 1
    released += sum(1 for e in a["events"] if e["type"] == "released")
assert shutdown >= 1, "no restart interrupted an attempt"
print("worker_shutdown attempts: %d; leases returned unstarted: %d; attempts: %d" %
      (shutdown, released, sum(len(a["attempts"]) for a in aggs)))
PY
for f in "$tmp"/*.log; do
  if grep -q -e "$FORGE_OWNER_TOKEN" -e "$FORGE_WORKER_TOKEN" "$f"; then
    fail "$(basename "$f") contains a token"
  fi
done
echo "RESTART-E2E PASS"
