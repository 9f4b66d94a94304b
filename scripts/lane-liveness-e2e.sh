#!/usr/bin/env bash
# LANE-LIVENESS-E2E: a refused result never strands a lane (issue 29).
#
#  1. A real forge-gate (lease_ttl 5s, retry_base 1s, a lease poll of 1h so
#     that only push dispatch can lease) and one raw wire lane (testdata/
#     rawlane badresult) that never says idle, as a Worker build that
#     ignores cancels. The TTL leaves room, on a loaded machine, for the
#     two CLI calls between the lease and the bad result (at 2 s a lease
#     once expired first, and the lane's reply came after job 2's lease).
#  2. Job 1 is leased to the lane; job 2 is submitted and queued behind it.
#  3. The lane fails job 1 with a well-formed failure code outside the
#     failure table: Gate answers reject invalid and records nothing.
#  4. Within one TTL (plus one recovery_interval) of that answer, job 1's
#     attempt expires and the lane is leased job 2, with no cancel first;
#     then job 1's retry (ordinal 2). Both succeed on the same lane.
# Everything lives in a private temp dir; a trap ends every process.
# Final line: LANE-LIVENESS-E2E PASS.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
pids=()
e2e_traps
fail() { e2e_fail lane-liveness-e2e "$@"; }

bin=$tmp/bin
mkdir -p "$bin"
e2e_build forge-gate forge
go build -o "$bin/rawlane" ./testdata/rawlane || fail "build rawlane"

FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_LANE_TOKEN=lane-$(rand)
export FORGE_OWNER_TOKEN FORGE_LANE_TOKEN

mkdir -m 0700 "$tmp/state"
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:0","database":"$tmp/state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"1h","default_pool":"local",
 "lifecycle":{"lease_ttl":"5s","retry_base":"1s","max_attempts":3},
 "default_execution":{"plugin_id":"reference","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"1s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576},
 "workers":[{"id":"rawlane","pool":"local","token_env":"FORGE_LANE_TOKEN","concurrency":1}],
 "repositories":[]}
EOF

# 1. Gate and the raw lane; the lane sends its bad result on a line of
# its stdin (a FIFO), once job 2 is queued.
e2e_start_gate "$tmp/gate.log" "Gate did not log its listening address"
mkfifo "$tmp/go"
"$bin/rawlane" -gate "ws://$addr" -worker rawlane -token-env FORGE_LANE_TOKEN badresult 2 <"$tmp/go" >"$tmp/lane.out" 2>"$tmp/lane.log" &
lane_pid=$!
pids+=("$lane_pid")
exec 3>"$tmp/go"
wait_log "$tmp/lane.out" 'e["event"] == "welcome"' >/dev/null || fail "lane not welcomed"

# 2. Job 1 leased, job 2 queued.
job1=$(printf '%s\n' '{"input":"first"}' | "$bin/forge" submit -file - | field id) || fail "forge submit 1"
lease1=$(wait_log "$tmp/lane.out" 'e["event"] == "lease"') || fail "lane got no lease"
[ "$(printf '%s' "$lease1" | field job_id)" = "$job1" ] || fail "lane leased another job"
job2=$(printf '%s\n' '{"input":"second"}' | "$bin/forge" submit -file - | field id) || fail "forge submit 2"
[ "$("$bin/forge" status "$job2" | field status)" = pending ] || fail "job 2 is not queued"

# 3. The bad result.
echo go >&3
exec 3>&-
wait_log "$tmp/lane.out" 'e["event"] == "bad_result"' >/dev/null || fail "bad result unanswered"

# 4. The lane lives on: job 2, then job 1's retry.
wait "$lane_pid" || fail "the lane was never leased again after the refused result (exit $?)"
pids=("$gate_pid")
"$bin/forge" wait -timeout 30s -poll 100ms "$job1" >"$tmp/job1.json" || fail "forge wait job 1"
"$bin/forge" wait -timeout 30s -poll 100ms "$job2" >"$tmp/job2.json" || fail "forge wait job 2"
python3 - "$tmp/lane.out" "$tmp/job1.json" "$tmp/job2.json" "$job1" "$job2" <<'PY' || fail "lane timeline does not match"
import json, sys
from datetime import datetime
def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00"))
lines = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
a1, a2 = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
job1, job2 = sys.argv[4], sys.argv[5]
events = [e["event"] for e in lines]
assert events == ["welcome", "lease", "bad_result", "lease", "result", "lease", "result"], events
assert "cancel" not in events, "the idle lane was sent a cancel"
bad = lines[2]
assert bad["reply"] == "reject" and bad["code"] == "invalid", bad
_, l1, _, l2, r2, l3, r3 = lines
assert l1["job_id"] == job1 and l1["ordinal"] == 1, l1
assert l2["job_id"] == job2 and l2["ordinal"] == 1, l2
assert l3["job_id"] == job1 and l3["ordinal"] == 2, l3
assert r2["reply"] == "ack" and r3["reply"] == "ack", (r2, r3)
# The queued job is leased within one lease TTL (5 s) of the refused
# result, plus one recovery_interval (200 ms) for the sweep that expires
# attempt 1 (on a stranded lane it is never leased at all).
delay = l2["t_ms"] - bad["t_ms"]
assert delay <= 5200, "job 2 leased %d ms after the refused result" % delay
# ... and not before attempt 1 expired: the store held it for the lane.
att1 = a1["attempts"][0]
assert att1["status"] == "expired" and att1.get("failure_code") in (None, "", "lease_expired"), att1
assert ts(a2["attempts"][0]["leased_at"]) >= ts(att1["deadline_at"]), (a2["attempts"][0], att1)
assert a1["job"]["status"] == "succeeded" and a1["job"]["result"] == "LIVE" and a1["job"]["attempt_count"] == 2, a1["job"]
assert a2["job"]["status"] == "succeeded" and a2["job"]["attempt_count"] == 1, a2["job"]
print("queued job leased %d ms after the refused result" % delay)
PY

stop Gate "$gate_pid"
pids=()
for f in "$tmp"/*.log; do
  if grep -q -e "$FORGE_OWNER_TOKEN" -e "$FORGE_LANE_TOKEN" "$f"; then
    fail "$(basename "$f") contains a token"
  fi
done
echo "LANE-LIVENESS-E2E PASS"
