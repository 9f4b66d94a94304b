#!/usr/bin/env bash
# EVIDENCE-E2E: bounded, redacted coding evidence and its privacy, with a
# real Gate, a real Worker, a synthetic repository and testdata/edit-plugin.
#
#  1. A failing scoped check prints secret-looking text (a canary from the
#     repository and one from an allowlisted variable): the job fails with
#     scoped_test_failed; its evidence holds only [REDACTED], bound to the
#     base; no canary appears in the aggregate, the database or any log; the
#     worktree is removed.
#  2. 32 passing checks: the limit case, 33 records bound to the candidate.
#  3. Owner-only access: 401 without a token and with a worker token.
#  4. The plugin vanishes at runtime: every attempt fails at spawn and the
#     job ends max_attempts_exceeded.
#  5. A Worker whose plugin is missing refuses to start, without a path in
#     its message.
#  6. A hand-driven lane (testdata/evidence-lane) takes a lease: raw output
#     an oversized batch and a failed check not bound to the base are
#     rejected; a valid batch is ACKed, an
#     identical replay too, a conflicting one is rejected. Gate is killed
#     and restarted: the evidence is still on the leased attempt. After the
#     attempt expires, late evidence for it is rejected and changes nothing.
# Everything lives in a private temp dir; a trap ends every process.
# Final line: EVIDENCE-E2E PASS.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
cd "$(dirname "$0")/.."

e2e_setup evidence-e2e
e2e_build forge-gate forge-worker forge
go build -o "$bin/edit-plugin" ./testdata/edit-plugin || fail "build edit-plugin"
go build -o "$bin/evidence-lane" ./testdata/evidence-lane || fail "build evidence-lane"

FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_WORKER_TOKEN=worker-$(rand)
FORGE_RAW_TOKEN=raw-$(rand)
REPO_CANARY=sk-live-repo-$(rand)
FORGE_CHECK_CANARY=sk-live-env-$(rand)
export FORGE_OWNER_TOKEN FORGE_WORKER_TOKEN FORGE_RAW_TOKEN FORGE_CHECK_CANARY

# The repository carries a secret-looking file that a check will print.
mkdir -m 0700 "$tmp/repos" "$tmp/worktrees" "$tmp/runtime" "$tmp/state"
repo=$tmp/repos/demo
GIT_CONFIG_GLOBAL=/dev/null git init -q -b main "$repo"
printf 'token=%s\n' "$REPO_CANARY" >"$repo/credentials.txt"
seed_commit base
base=$(g rev-parse HEAD)

exec_policy='{"plugin_id":"edit","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"5s","plugin_output_bytes":1048576,"check_output_bytes":64,"git_output_bytes":1048576}'
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:0","database":"$tmp/state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"100ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"8s","retry_base":"100ms","max_attempts":2},
 "default_execution":$exec_policy,
 "workers":[{"id":"worker-1","pool":"local","token_env":"FORGE_WORKER_TOKEN","concurrency":1},
            {"id":"raw","pool":"local","token_env":"FORGE_RAW_TOKEN","concurrency":1}],
 "repositories":[{"id":"demo","default_branch":"main","worker_pool":"local","execution":$exec_policy}]}
EOF
gate_n=0
start_gate() { # sets gate_pid, addr
  gate_n=$((gate_n + 1))
  if [ -n "${addr:-}" ]; then
    sed -i "s/\"listen\":\"[^\"]*\"/\"listen\":\"$addr\"/" "$tmp/gate.json"
  fi
  e2e_start_gate "$tmp/gate$gate_n.log" "Gate did not start"
}
start_gate

worker_json() { # $1: plugin path
  cat <<EOF
{"version":1,"gate_url":"ws://$addr","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"300ms","concurrency":1,
 "repository_roots":["$tmp/repos"],"worktree_root":"$tmp/worktrees","runtime_root":"$tmp/runtime",
 "repositories":[{"id":"demo","path":"$repo"}],
 "plugins":[{"id":"edit","argv":["$1"]}],
 "environment_allowlist":["PATH","FORGE_CHECK_CANARY"],"check_environment_allowlist":["PATH","FORGE_CHECK_CANARY"],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
EOF
}
cp "$bin/edit-plugin" "$tmp/plugin"
worker_json "$tmp/plugin" >"$tmp/worker.json"
e2e_start_worker
wait_log "$tmp/worker.log" 'e.get("msg") == "connected"' >/dev/null || fail "Worker did not connect"

submit() { # $1: tests JSON; prints the job id
  python3 - "$base" "$1" >"$tmp/task.json" <<'PY'
import json, sys
print(json.dumps({"repository_id": "demo", "base_sha": sys.argv[1],
                  "instruction": "write notes.txt evidence e2e instruction text", "tests": json.loads(sys.argv[2])}))
PY
  "$bin/forge" submit -file "$tmp/task.json" | field id
}

# 1. A failing check that prints secrets.
# shellcheck disable=SC2016 # $FORGE_CHECK_CANARY is expanded by the check's shell
job1=$(submit '[["true"],["sh","-c","cat credentials.txt; echo env=$FORGE_CHECK_CANARY; head -c 4096 /dev/zero; exit 7"],["true"]]') || fail "submit 1"
"$bin/forge" wait -timeout 60s -poll 100ms "$job1" >"$tmp/agg1.json" 2>>"$tmp/forge.log" && fail "job 1 succeeded"
python3 - "$tmp/agg1.json" "$base" <<'PY' || fail "job 1 aggregate"
import json, sys
a = json.load(open(sys.argv[1])); base = sys.argv[2]
assert a["job"]["status"] == "failed" and a["job"]["failure_code"] == "scoped_test_failed", a["job"]
assert len(a["attempts"]) == 1, "scoped_test_failed is terminal"
ev = a["attempts"][0]["evidence"]
assert [r["reason"] for r in ev] == ["passed", "failed"], ev   # stops at the first failure
for r in ev:
    assert r["phase"] == "scoped_check" and r["sha"] == base, r
quiet, loud = ev
assert quiet["output"] == "" and quiet["output_redacted"] is False and quiet["output_truncated"] is False, quiet
assert loud["output"] == "[REDACTED]" and loud["output_redacted"] is True and loud["output_truncated"] is True, loud
assert loud["exit_code"] == 7 and loud["arg_count"] == 3 and loud["args"] == ["[REDACTED]"] * 3, loud
assert "candidate_sha" not in a["job"] or not a["job"]["candidate_sha"], a["job"]
PY
if [ -n "$(ls -A "$tmp/worktrees")" ] || [ -n "$(ls -A "$tmp/runtime")" ]; then fail "job 1 left a worktree or private directory"; fi
[ -z "$(g for-each-ref refs/agent-forge/)" ] || fail "a failed job left a candidate ref"

# 2. The limit case: 32 passing checks, 33 records.
job2=$(submit "$(python3 -c 'import json; print(json.dumps([["true"]] * 32))')") || fail "submit 2"
"$bin/forge" wait -timeout 60s -poll 100ms "$job2" >"$tmp/agg2.json" || fail "job 2 failed"
python3 - "$tmp/agg2.json" <<'PY' || fail "job 2 aggregate"
import json, sys
a = json.load(open(sys.argv[1])); cand = a["job"]["candidate_sha"]
ev = a["attempts"][0]["evidence"]
assert len(ev) == 33 and [r["index"] for r in ev[:32]] == list(range(32)), len(ev)
assert all(r["sha"] == cand and r["reason"] == "passed" for r in ev[:32]), ev
assert ev[32] == {"phase": "candidate_commit", "reason": "created", "sha": cand}, ev[32]
PY

# 3. Owner-only access to evidence.
python3 - "$FORGE_GATE_URL" "$job1" "$FORGE_WORKER_TOKEN" <<'PY' || fail "evidence readable without the owner token"
import sys, urllib.request, urllib.error
url, job, worker = sys.argv[1], sys.argv[2], sys.argv[3]
for path in ("/v1/jobs/%s/aggregate" % job, "/v1/jobs/%s" % job):
    for headers in ({}, {"Authorization": "Bearer " + worker}):
        try:
            urllib.request.urlopen(urllib.request.Request(url + path, headers=headers))
            raise SystemExit("%s answered 200 with %s" % (path, list(headers)))
        except urllib.error.HTTPError as e:
            assert e.code == 401, (path, e.code)
PY

# 4. The plugin vanishes while the Worker runs.
rm -f "$tmp/plugin"
job3=$(submit '[["true"]]') || fail "submit 3"
"$bin/forge" wait -timeout 60s -poll 100ms "$job3" >"$tmp/agg3.json" 2>>"$tmp/forge.log" && fail "job 3 succeeded"
python3 - "$tmp/agg3.json" <<'PY' || fail "job 3 aggregate"
import json, sys
a = json.load(open(sys.argv[1]))
assert a["job"]["status"] == "failed" and a["job"]["failure_code"] == "max_attempts_exceeded", a["job"]
assert len(a["attempts"]) == 2, a["attempts"]
for at in a["attempts"]:
    assert at["evidence"] == [{"phase": "plugin", "reason": "spawn_failed"}], at
PY
[ -z "$(ls -A "$tmp/worktrees")" ] || fail "job 3 left a worktree"
stop Worker "$worker_pid"

# 5. A missing plugin stops Worker startup, without a path in the message.
worker_json "$tmp/missing-plugin-$(rand)" >"$tmp/worker2.json"
if "$bin/forge-worker" -config "$tmp/worker2.json" 2>"$tmp/worker2.log"; then fail "Worker started without its plugin"; fi
grep -q 'plugins\[0\]' "$tmp/worker2.log" || fail "startup error does not name the plugin field"
if grep -q -e "$tmp" -e missing-plugin "$tmp/worker2.log"; then fail "startup error contains a path"; fi

# 6. A hand-driven lane: rejected, accepted and replayed batches, restart, expiry, late evidence.
python3 - "$tmp" "$base" <<'PY'
import json, sys
d, base = sys.argv[1], sys.argv[2]
check = {"phase": "scoped_check", "reason": "failed", "index": 0, "sha": base, "exit_code": 1, "duration_ms": 1,
         "arg_count": 1, "args": ["[REDACTED]"], "output": "[REDACTED]", "output_redacted": True, "output_truncated": False}
raw = dict(check, output="token=sk-live-raw-output")
def write(name, batch, records):
    json.dump({"batch": batch, "records": records}, open("%s/%s.json" % (d, name), "w"))
write("raw-output", 1, [raw])
write("oversized", 1, [{"phase": "preparation", "reason": "base_missing", "note": "x" * (97 * 1024)}])
write("valid", 1, [check])
write("conflict", 1, [dict(check, exit_code=2)])
write("not-base", 1, [dict(check, sha="1" * 40)])
write("late", 2, [{"phase": "cleanup", "reason": "cleanup_failed"}])
PY
"$bin/evidence-lane" -gate "ws://$addr" -worker raw -token-env FORGE_RAW_TOKEN -repo demo take \
  "$tmp/raw-output.json" "$tmp/oversized.json" "$tmp/not-base.json" "$tmp/valid.json" "$tmp/valid.json" "$tmp/conflict.json" >"$tmp/lane.out" 2>"$tmp/lane.log" &
pids+=("$!")
job4=$(submit '[["true"]]') || fail "submit 4"
lease=$(wait_log "$tmp/lane.out" 'e["event"] == "lease"') || fail "the hand-driven lane got no lease"
[ "$(printf '%s' "$lease" | field job_id)" = "$job4" ] || fail "the lane leased another job"
attempt4=$(printf '%s' "$lease" | field attempt_id)
wait_log "$tmp/lane.out" 'e["event"] == "done"' >/dev/null || fail "the lane did not finish its batches"
python3 - "$tmp/lane.out" <<'PY' || fail "batch answers"
import json, sys
got = [e for e in map(json.loads, open(sys.argv[1]).read().splitlines()) if e["event"] == "evidence"]
want = [("reject", "invalid"), ("reject", "invalid"), ("reject", "invalid"), ("ack", None), ("ack", None), ("reject", "conflict")]
assert [(e["reply"], e.get("code")) for e in got] == want, got
PY
"$bin/forge" result "$job4" >"$tmp/agg4-before.json" || fail "forge result 4"
{ kill -KILL "$gate_pid" && wait "$gate_pid"; } 2>/dev/null || true
start_gate
"$bin/forge" result "$job4" >"$tmp/agg4-restart.json" || fail "forge result after restart"
python3 - "$tmp/agg4-before.json" "$tmp/agg4-restart.json" <<'PY' || fail "evidence did not survive the restart"
import json, sys
before, after = (json.load(open(p)) for p in sys.argv[1:3])
b, a = before["attempts"][0], after["attempts"][0]
assert b["evidence"] == a["evidence"] and len(a["evidence"]) == 1 and a["evidence"][0]["exit_code"] == 1, (b, a)
assert a["status"] == "leased", a["status"]
PY
python3 - "$FORGE_GATE_URL" "$job4" "$FORGE_OWNER_TOKEN" <<'PY' || fail "attempt 1 of job 4 did not expire"
import json, sys, time, urllib.request
url, job, tok = sys.argv[1:4]
deadline = time.time() + 30
while time.time() < deadline:
    req = urllib.request.Request("%s/v1/jobs/%s/aggregate" % (url, job), headers={"Authorization": "Bearer " + tok})
    a = json.load(urllib.request.urlopen(req))
    if a["attempts"][0]["status"] == "expired":
        sys.exit(0)
    time.sleep(0.1)
sys.exit(1)
PY
"$bin/evidence-lane" -gate "ws://$addr" -worker raw -token-env FORGE_RAW_TOKEN late "$job4" "$attempt4" "$tmp/late.json" >"$tmp/late.out" 2>"$tmp/late.log" ||
  fail "late client failed"
python3 - "$tmp/late.out" <<'PY' || fail "late evidence was accepted"
import json, sys
got = [e for e in map(json.loads, open(sys.argv[1]).read().splitlines()) if e["event"] == "evidence"]
assert len(got) == 1 and got[0]["reply"] == "reject" and got[0]["code"] in ("stale", "expired"), got
PY
"$bin/forge" result "$job4" >"$tmp/agg4-late.json" || fail "forge result after late evidence"
python3 - "$tmp/agg4-restart.json" "$tmp/agg4-late.json" <<'PY' || fail "late evidence changed the attempt"
import json, sys
before, after = (json.load(open(p)) for p in sys.argv[1:3])
assert before["attempts"][0]["evidence"] == after["attempts"][0]["evidence"]
PY

# Privacy: no canary, token or instruction text anywhere Gate keeps or logs.
stop Gate "$gate_pid"
pids=()
for f in "$tmp"/agg*.json "$tmp"/state/* "$tmp"/*.log; do
  [ -f "$f" ] || continue
  if grep -a -q -e "$REPO_CANARY" -e "$FORGE_CHECK_CANARY" -e sk-live-raw-output "$f"; then
    fail "$(basename "$f") contains a canary"
  fi
done
for f in "$tmp"/*.log; do
  if grep -q -e "$FORGE_OWNER_TOKEN" -e "$FORGE_WORKER_TOKEN" -e "$FORGE_RAW_TOKEN" -e "evidence e2e instruction" -e "$tmp" "$f"; then
    fail "$(basename "$f") contains a token, the instruction or a path"
  fi
done
echo "EVIDENCE-E2E PASS"
