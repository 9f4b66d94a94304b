#!/usr/bin/env bash
# RECOVERY-E2E: restart, expiry, retry and late-result recovery.
#
#  1. Gate starts (lease_ttl 2s, retry_base 1s) with a file database; a raw
#     wire client ("abandoner") takes the lease of attempt 1 and goes silent.
#  2. While a client keeps submitting jobs, `forge backup` copies the
#     database (attempt 1 leased in it); `forge restore` onto the live
#     state is refused (a Gate holds it). Gate is SIGKILLed and restarted
#     on the same database, then SIGKILLed again and the host "lost": the
#     state directory is moved away, `forge restore` puts the backup in a
#     fresh one (a new fencing epoch), and a Gate starts on it with every
#     job acknowledged before the backup began.
#  3. A real Worker connects at once; attempt 1 expires at its deadline and
#     the Worker gets attempt 2 no earlier than the 1s backoff allows, and
#     completes it with the reference plugin.
#  4. A late result and late evidence for attempt 1 (a replayed pre-loss
#     result) are rejected and change nothing.
#  5. The aggregate shows attempt 1 expired, attempt 2 succeeded, and the
#     expected timeline; the events after the restore are numbered above
#     the restore's event floor.
# Everything lives in a private temp dir; a trap ends every process.
# Final line: RECOVERY-E2E PASS.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
pids=()
e2e_traps
fail() { e2e_fail recovery-e2e "$@"; }

bin=$tmp/bin
mkdir -p "$bin"
e2e_build forge-gate forge-worker forge-ref-plugin forge
go build -o "$bin/rawlane" ./testdata/rawlane || fail "build rawlane"

FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_WORKER_TOKEN=worker-$(rand)
FORGE_ABANDON_TOKEN=abandon-$(rand)
export FORGE_OWNER_TOKEN FORGE_WORKER_TOKEN FORGE_ABANDON_TOKEN

mkdir -m 0700 "$tmp/state"
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:0","database":"$tmp/state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"2s","retry_base":"1s","max_attempts":3},
 "default_execution":{"plugin_id":"reference","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"1s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576},
 "workers":[{"id":"abandoner","pool":"local","token_env":"FORGE_ABANDON_TOKEN","concurrency":1},
            {"id":"worker-1","pool":"local","token_env":"FORGE_WORKER_TOKEN","concurrency":1}],
 "repositories":[]}
EOF

start_gate() { # $1: log name; sets gate_pid and addr
  e2e_start_gate "$tmp/$1.log" "Gate did not log its listening address"
}

# 1. First Gate; the abandoner takes attempt 1.
start_gate gate1
"$bin/rawlane" -gate "ws://$addr" -worker abandoner -token-env FORGE_ABANDON_TOKEN abandon >"$tmp/abandon.out" 2>"$tmp/abandon.log" &
pids+=("$!")
wait_log "$tmp/abandon.out" 'e["event"] == "welcome"' >/dev/null || fail "abandoner not welcomed"
job_id=$(printf '%s\n' '{"input":"hello recovery"}' | "$bin/forge" submit -file - | field id) || fail "forge submit"
lease=$(wait_log "$tmp/abandon.out" 'e["event"] == "lease"') || fail "abandoner got no lease"
[ "$(printf '%s' "$lease" | field job_id)" = "$job_id" ] || fail "abandoner leased another job"
attempt1=$(printf '%s' "$lease" | field attempt_id)

# 2. A backup while a client keeps writing, a crash and restart, then the
#    loss of the state and a restore.
: >"$tmp/acked"
( while :; do printf '%s\n' '{"input":"load"}' | "$bin/forge" submit -file - | field id >>"$tmp/acked" || exit 1; done ) &
load_pid=$!
pids+=("$load_pid")
until [ "$(wc -l <"$tmp/acked")" -ge 3 ]; do sleep 0.05; done
cp "$tmp/acked" "$tmp/acked-before-backup"
"$bin/forge" backup -db "$tmp/state/forge.db" "$tmp/backup.db" >"$tmp/backup.out" 2>"$tmp/backup.log" || fail "forge backup (exit $?)"
grep -q '^forge backup: wrote [0-9]* bytes (integrity ok, schema version [0-9]*, fencing epoch 0)$' "$tmp/backup.out" || fail "forge backup output"
after_backup=$(wc -l <"$tmp/acked")
until [ "$(wc -l <"$tmp/acked")" -ge $((after_backup + 2)) ]; do sleep 0.05; done
kill "$load_pid" 2>/dev/null; wait "$load_pid" 2>/dev/null || true
tail -n +$((after_backup + 2)) "$tmp/acked" >"$tmp/acked-after-backup"
[ "$(stat -c %a "$tmp/backup.db")" = 600 ] || fail "the backup is not mode 0600"
set +e
"$bin/forge" restore -db "$tmp/state/forge.db" "$tmp/backup.db" >/dev/null 2>"$tmp/restore-live.log"
rc=$?
set -e
if [ "$rc" != 2 ] || ! grep -q "a Gate is running" "$tmp/restore-live.log"; then
  fail "restore onto a running Gate's state was not refused (exit $rc)"
fi

{ kill -KILL "$gate_pid" && wait "$gate_pid"; } 2>/dev/null || true
start_gate gate2
wait_log "$tmp/gate2.log" 'e.get("msg") == "recovered"' >/dev/null || fail "restarted Gate did not recover"
{ kill -KILL "$gate_pid" && wait "$gate_pid"; } 2>/dev/null || true
mv "$tmp/state" "$tmp/state.lost"
mkdir -m 0700 "$tmp/state"
"$bin/forge" restore -db "$tmp/state/forge.db" "$tmp/backup.db" >"$tmp/restore.out" 2>"$tmp/restore.log" || fail "forge restore (exit $?)"
floor=$(sed -n 's/^forge restore: restored [0-9]* bytes (schema version [0-9]*, fencing epoch 1, events numbered from \([0-9]*\))$/\1/p' "$tmp/restore.out")
[ -n "$floor" ] || fail "forge restore output"
[ "$(stat -c %a "$tmp/state/forge.db")" = 600 ] || fail "the restored database is not mode 0600"
start_gate gate3
wait_log "$tmp/gate3.log" 'e.get("msg") == "recovered"' >/dev/null || fail "the Gate on the restored state did not recover"
while read -r id; do
  "$bin/forge" status "$id" >/dev/null || fail "a job acknowledged before the backup is missing after the restore"
done <"$tmp/acked-before-backup"
while read -r id; do
  if "$bin/forge" status "$id" >/dev/null 2>&1; then fail "a job submitted after the backup finished is in it"; fi
done <"$tmp/acked-after-backup"

# 3. A real Worker, connected before the retry is due.
cat >"$tmp/worker.json" <<EOF
{"version":1,"gate_url":"ws://$addr","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"500ms","concurrency":1,
 "repository_roots":[],"worktree_root":"$tmp/worktrees","runtime_root":"$tmp/runtime","repositories":[],
 "plugins":[{"id":"reference","argv":["$bin/forge-ref-plugin"]}],
 "environment_allowlist":["PATH"],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
EOF
e2e_start_worker
"$bin/forge" wait -timeout 60s -poll 100ms "$job_id" >"$tmp/aggregate.json" || fail "forge wait (exit $?)"
# The restored load jobs drain too, so the abandoner's lane gets no lease.
while read -r id; do
  if "$bin/forge" status "$id" >/dev/null 2>&1; then
    "$bin/forge" wait -timeout 60s -poll 100ms "$id" >/dev/null || fail "a restored job did not finish"
  fi
done <"$tmp/acked"

# 4. Late result and late evidence for attempt 1.
"$bin/rawlane" -gate "ws://$addr" -worker abandoner -token-env FORGE_ABANDON_TOKEN late "$job_id" "$attempt1" >"$tmp/late.out" 2>"$tmp/late.log" ||
  fail "late client failed"
python3 - "$tmp/late.out" <<'PY' || fail "a late message for attempt 1 was accepted"
import json, sys
replies = {e["event"]: e for e in map(json.loads, open(sys.argv[1]).read().splitlines()) if e["event"] != "welcome"}
for kind in ("result", "evidence"):
    r = replies[kind]
    assert r["reply"] == "reject" and r["code"] in ("stale", "expired"), r
PY
"$bin/forge" result "$job_id" >"$tmp/after-late.json" || fail "forge result"

# 5. The aggregate, before and after the late messages.
python3 - "$tmp/aggregate.json" "$tmp/after-late.json" "$attempt1" "$floor" <<'PY' || fail "aggregate does not match"
import json, sys
from datetime import datetime, timedelta
def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00"))
a = json.load(open(sys.argv[1]))
after = json.load(open(sys.argv[2]))
attempt1 = sys.argv[3]
assert a == after, "late messages changed the aggregate"
job, attempts, events = a["job"], a["attempts"], a["events"]
assert job["status"] == "succeeded" and job["result"] == "HELLO RECOVERY", job
assert job["attempt_count"] == 2, job
assert [x["ordinal"] for x in attempts] == [1, 2], attempts
a1, a2 = attempts
assert a1["id"] == attempt1 and a1["status"] == "expired" and a1["worker_id"] == "abandoner", a1
assert not a1.get("evidence"), "late evidence was stored"
assert a2["status"] == "succeeded" and a2["worker_id"] == "worker-1", a2
got = [(e["type"], e.get("attempt")) for e in events]
assert [t for t, _ in got] == ["submitted", "leased", "expired", "retry_scheduled", "leased", "succeeded"], got
assert got[1] == ("leased", 1) and got[2] == ("expired", 1) and got[4] == ("leased", 2), got
at = {e["type"] + str(e.get("attempt", "")): ts(e["at"]) for e in events}
seqs = [e["seq"] for e in events]
assert seqs == sorted(seqs), seqs
# The events in the backup keep their numbers 1..k (at least submitted and
# leased); everything after the restore (at least attempt 2's lease and the
# success) is numbered from the restore's floor on.
floor = int(sys.argv[4])
old = [q for q in seqs if q < floor]
assert len(old) >= 2 and old == list(range(1, len(old) + 1)), seqs
assert len(seqs) - len(old) >= 2, seqs
assert [ts(e["at"]) for e in events] == sorted(ts(e["at"]) for e in events), "timeline out of order"
expired_at = at["expired1"]
# Expiry no earlier than the lease deadline of attempt 1 (lease_ttl 2s).
assert expired_at >= ts(a1["deadline_at"]), (expired_at, a1["deadline_at"])
assert ts(a1["deadline_at"]) - ts(a1["leased_at"]) >= timedelta(seconds=2), a1
# Attempt 2 no earlier than the exponential-v1 backoff after attempt 1 (retry_base * 2^0 = 1s).
assert ts(a2["leased_at"]) >= expired_at + timedelta(seconds=1), (a2["leased_at"], expired_at)
print("timeline:", " -> ".join("%s@%s" % (e["type"], e["at"]) for e in events))
PY

# Clean shutdown of what is left.
stop Worker "$worker_pid"
stop Gate "$gate_pid"
pids=()
for f in "$tmp"/*.log; do
  if grep -q -e "$FORGE_OWNER_TOKEN" -e "$FORGE_WORKER_TOKEN" -e "$FORGE_ABANDON_TOKEN" -e "hello recovery" "$f"; then
    fail "$(basename "$f") contains a token or task text"
  fi
done
echo "RECOVERY-E2E PASS"
