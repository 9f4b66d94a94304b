#!/usr/bin/env bash
# E2E: the reference transport proof. Builds Gate, Worker, the reference
# plugin and the forge CLI into a private temp dir, starts Gate on an
# OS-chosen loopback port with a file database and a Worker (2 lanes, the
# plugin pinned by sha256), submits {"input":"hello agent forge"}, waits,
# and checks the result (the plugin ran in the Worker's default Landlock
# sandbox), the attempt, the ordered events, that the Worker
# lanes show disconnected after the Worker stops, that GET /metrics shows
# the run, and that no token reached a log. Final line: E2E PASS.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
pids=()
e2e_traps
fail() { e2e_fail e2e "$@"; }

bin=$tmp/bin
mkdir -p "$bin"
e2e_build forge-gate forge-worker forge-ref-plugin forge

FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_WORKER_TOKEN=worker-$(rand)
export FORGE_OWNER_TOKEN FORGE_WORKER_TOKEN

mkdir -m 0700 "$tmp/state"
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:0","database":"$tmp/state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"1s","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"30s","retry_base":"1s","max_attempts":3},
 "default_execution":{"plugin_id":"reference","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"1s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576},
 "workers":[{"id":"worker-1","pool":"local","token_env":"FORGE_WORKER_TOKEN","concurrency":2}],
 "repositories":[]}
EOF

e2e_start_gate "$tmp/gate.log" "Gate did not log its listening address"

plugin_sha=$(sha256sum "$bin/forge-ref-plugin" | cut -d' ' -f1)
cat >"$tmp/worker.json" <<EOF
{"version":1,"gate_url":"ws://$addr","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"1s","concurrency":2,
 "repository_roots":[],"worktree_root":"$tmp/worktrees","runtime_root":"$tmp/runtime","repositories":[],
 "plugins":[{"id":"reference","argv":["$bin/forge-ref-plugin"],"sha256":"$plugin_sha"}],
 "environment_allowlist":["PATH"],"check_environment_allowlist":[],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
EOF
e2e_start_worker
# The default sandbox: the Worker confines its plugins with Landlock.
wait_log "$tmp/worker.log" "e.get('msg') == 'sandbox' and e.get('sandbox') == 'landlock' and e.get('landlock_abi', 0) >= 1" >/dev/null ||
  fail "the Worker did not log its Landlock sandbox"
for lane in worker-1 'worker-1#1'; do
  wait_log "$tmp/gate.log" "e.get('msg') == 'lane connected' and e.get('lane') == '$lane'" >/dev/null ||
    fail "lane $lane did not connect"
done

job=$(printf '%s\n' '{"input":"hello agent forge"}' | "$bin/forge" submit -file -) || fail "forge submit"
job_id=$(printf '%s' "$job" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
"$bin/forge" wait -timeout 60s -poll 100ms "$job_id" >"$tmp/aggregate.json" || fail "forge wait (exit $?)"

python3 - "$tmp/aggregate.json" <<'PY' || fail "aggregate does not match"
import json, sys
a = json.load(open(sys.argv[1]))
job, attempts, events = a["job"], a["attempts"], a["events"]
assert job["kind"] == "text" and job["status"] == "succeeded", job
assert job["result"] == "HELLO AGENT FORGE", "wrong result"
assert job["attempt_count"] == 1, job
assert len(attempts) == 1, attempts
at = attempts[0]
assert at["ordinal"] == 1 and at["status"] == "succeeded", at
assert at["worker_id"] in ("worker-1", "worker-1#1"), at
assert at["leased_at"] <= at["completed_at"], at
types = [e["type"] for e in events]
assert types == ["submitted", "leased", "succeeded"], types
seqs = [e["seq"] for e in events]
assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), seqs
ats = [e["at"] for e in events]
assert ats == sorted(ats), ats
assert events[1].get("attempt") == 1, events[1]
PY

# The Gate's metrics (docs/api.md, Metrics): the job, its attempt and the
# two lanes, in the Prometheus text format, with the owner token only.
python3 - "$addr" <<'PY' || fail "GET /metrics does not show the run"
import os, sys, urllib.request, urllib.error
url = "http://%s/metrics" % sys.argv[1]
try:
    urllib.request.urlopen(url, timeout=10)
    sys.exit("scraped without a token")
except urllib.error.HTTPError as e:
    assert e.code == 401, e.code
req = urllib.request.Request(url, headers={"Authorization": "Bearer " + os.environ["FORGE_OWNER_TOKEN"]})
with urllib.request.urlopen(req, timeout=10) as r:
    assert r.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8", r.headers["Content-Type"]
    lines = set(r.read().decode().splitlines())
for want in ('forge_jobs_submitted_total 1', 'forge_jobs_finished_total{status="succeeded"} 1',
             'forge_attempts_finished_total{outcome="succeeded"} 1', 'forge_lanes_connected{pool="local"} 2',
             'forge_queue_depth{pool="local"} 0', 'forge_storage_full 0', 'forge_submit_to_lease_seconds_count 1'):
    assert want in lines, want
PY

# Stop the Worker: SIGTERM is a clean exit 0, and both lanes go offline.
kill -TERM "$worker_pid"
set +e
wait "$worker_pid"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "Worker exit status $rc after SIGTERM"
# Prefer the owner debug route; poll it briefly (Gate records the
# disconnect when it sees the socket close).
code=$(python3 - "$addr" <<'PY'
import json, os, sys, time, urllib.request, urllib.error
req = urllib.request.Request("http://%s/v1/debug/workers" % sys.argv[1],
                             headers={"Authorization": "Bearer " + os.environ["FORGE_OWNER_TOKEN"]})
deadline = time.time() + 30
while True:
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            lanes = {l["lane"]: l for l in json.load(r)["lanes"]}
    except urllib.error.HTTPError as e:
        print(e.code)
        sys.exit(0)
    if all(n in lanes and lanes[n]["connected"] is False for n in ("worker-1", "worker-1#1")):
        print(200)
        sys.exit(0)
    if time.time() > deadline:
        print("still-connected")
        sys.exit(0)
    time.sleep(0.05)
PY
)
if [ "$code" = 200 ]; then
  proof="GET /v1/debug/workers"
elif [ "$code" = 404 ]; then
  # No debug route in this Gate: its lane log is the record.
  for lane in worker-1 'worker-1#1'; do
    wait_log "$tmp/gate.log" "e.get('msg') == 'lane disconnected' and e.get('lane') == '$lane'" >/dev/null ||
      fail "lane $lane not disconnected"
  done
  proof="Gate lane log"
else
  fail "lanes still connected per /v1/debug/workers ($code)"
fi

kill -TERM "$gate_pid"
set +e
wait "$gate_pid"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "Gate exit status $rc after SIGTERM"
pids=()

for f in "$tmp"/*.log; do
  if grep -q -e "$FORGE_OWNER_TOKEN" -e "$FORGE_WORKER_TOKEN" -e "hello agent forge" -e "HELLO AGENT FORGE" "$f"; then
    fail "$(basename "$f") contains a token or task text"
  fi
done
[ "$(count_in "$tmp/worker.log" 'e.get("msg") == "reported"')" = 1 ] || fail "Worker did not log exactly one report"
echo "e2e: job $job_id succeeded; lanes offline per $proof"
echo "E2E PASS"
