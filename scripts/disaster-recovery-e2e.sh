#!/usr/bin/env bash
# DISASTER-RECOVERY-E2E: the Gate's host is lost and its state comes back
# from a Litestream replica (DECISIONS 20, docs/operations.md). Run once
# with "replication": "sync" and once with "async":
#
#  1. Litestream (the real program, v0.5.x, .ci/run installs it) replicates
#     the Gate's database to a file replica (a directory outside the state
#     directory, standing in for another disk or host); the Gate runs with
#     that replication mode, a real Worker (reference and coding plugins)
#     on a fixed address, and a raw wire client takes one lease and keeps
#     it (the attempt a replay will name).
#  2. Under load (two clients submitting text jobs, one submitting coding
#     jobs, each recording the time every acknowledgement came back) the
#     Gate and Litestream are SIGKILLed at once and the state directory
#     deleted: the Gate's host is gone. The Worker keeps running, as on its
#     own host.
#  3. `litestream restore` writes the replica to a file; `forge restore`
#     puts it in a fresh state directory (a new fencing epoch); the Gate
#     starts on it (with a new Litestream and replica in its mode).
#  4. sync: every acknowledged job is there. async: every job acknowledged
#     more than the window (2 s: Litestream's 1 s sync interval plus an
#     upload, with slack for a loaded machine) before the loss is there;
#     the newest missing job's age at the loss is printed.
#  5. The Worker reconnects by itself and finishes the restored work (every
#     restored coding job succeeds, a job submitted after the restore too);
#     the raw client's pre-loss result is refused (stale, expired or not
#     found).
# Everything lives in a private temp dir; a trap ends every process.
# Final line: DISASTER-RECOVERY-E2E PASS.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
cd "$(dirname "$0")/.."

e2e_setup disaster-recovery-e2e
# Each drill keeps its logs in its own directory: show them too.
fail() {
  e2e_dump_logs 30 "$tmp"/*/*.log "$tmp"/*/*.out
  e2e_fail disaster-recovery-e2e "$@"
}
e2e_require litestream python3
e2e_build forge-gate forge-worker forge-ref-plugin forge-codex-plugin forge
go build -o "$bin/rawlane" ./testdata/rawlane || fail "build rawlane"
CODEX_BIN=$(pwd -P)/testdata/fake-codex/codex
export CODEX_BIN

FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_WORKER_TOKEN=worker-$(rand)
FORGE_ABANDON_TOKEN=abandon-$(rand)
export FORGE_OWNER_TOKEN FORGE_WORKER_TOKEN FORGE_ABANDON_TOKEN
# The Codex plugin reaches its model only through the Worker's gateway; the
# fake Codex never calls it, so a placeholder key (the Worker's alone) does.
OPENAI_API_KEY=sk-placeholder-$(rand)
export OPENAI_API_KEY

# The async window this script holds Litestream to (docs/operations.md).
window=2

mkdir -m 0700 "$tmp/repos" "$tmp/worktrees" "$tmp/runtime"
repo=$tmp/repos/demo
GIT_CONFIG_GLOBAL=/dev/null git init -q -b main "$repo"
printf 'demo repository\n' >"$repo/README.md"
seed_commit base
base=$(g rev-parse HEAD)
python3 - "$base" >"$tmp/coding-task.json" <<'PY'
import json, sys
print(json.dumps({"repository_id": "demo", "base_sha": sys.argv[1],
                  "instruction": "Create a file named hello.txt containing one line: hello from forge.",
                  "tests": [["grep", "-qx", "hello from forge", "hello.txt"]]}))
PY

# A fixed port, so the Worker finds the restored Gate where it left it.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
exec_policy='{"plugin_id":"codex","environment":["PATH","CODEX_BIN"],"plugin_timeout":"2m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}'
text_policy='{"plugin_id":"reference","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"1s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}'

gate_config() { # MODE STATE SOCKET
  cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:$port","database":"$2/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"3s","retry_base":"500ms","max_attempts":3},
 "default_execution":$text_policy,
 "replication":"$1","replication_socket":"$3",
 "workers":[{"id":"abandoner","pool":"local","token_env":"FORGE_ABANDON_TOKEN","concurrency":1},
            {"id":"worker-1","pool":"local","token_env":"FORGE_WORKER_TOKEN","concurrency":2}],
 "repositories":[{"id":"demo","default_branch":"main","worker_pool":"local","execution":$exec_policy}]}
EOF
}

start_litestream() { # DB REPLICA SOCKET LOG; sets ls_pid
  cat >"$tmp/litestream.yml" <<EOF
socket:
  enabled: true
  path: $3
  permissions: 0600
dbs:
  - path: $1
    replica:
      type: file
      path: $2
EOF
  litestream replicate -config "$tmp/litestream.yml" >"$4" 2>&1 &
  ls_pid=$!
  pids+=("$ls_pid")
  # Litestream listens, then sets the socket's mode.
  for _ in $(seq 400); do [ -S "$3" ] && [ "$(stat -c %a "$3")" = 600 ] && break; sleep 0.05; done
  [ -S "$3" ] || fail "litestream's control socket did not appear"
  [ "$(stat -c %a "$3")" = 600 ] || fail "litestream's control socket is not mode 0600 ($(stat -c %a "$3"))"
}

# submit_loop KIND OUT: submits until killed; each acknowledged job is a
# line "ID ACK_TIME" (seconds since the epoch, after the answer came back).
submit_loop() {
  local task=$tmp/text-task.json
  [ "$1" = coding ] && task=$tmp/coding-task.json
  local out re='"id": "([0-9a-f]{32})"'
  while :; do
    # One process per submit: the id is read by bash, not python.
    out=$("$bin/forge" submit -file "$task" 2>/dev/null) || { sleep 0.05; continue; }
    [[ $out =~ $re ]] || fail "forge submit printed no job id"
    printf '%s %s\n' "${BASH_REMATCH[1]}" "$EPOCHREALTIME" >>"$2"
    # Coding jobs take the Worker seconds each: a few are enough.
    [ "$1" = coding ] && sleep 0.5
  done
}
printf '%s\n' '{"input":"load"}' >"$tmp/text-task.json"

worker_started=
say() { echo "disaster-recovery-e2e: ${SECONDS}s: $*"; }

drill() { # MODE
  local mode=$1 d=$tmp/$1
  say "$mode: start"
  mkdir -m 0700 "$d" "$d/state" "$d/run"
  local sock=$d/run/litestream.sock
  # The Worker (running since the first drill) waits while the raw
  # client takes the first lease.
  [ -z "$worker_started" ] || kill -STOP "$worker_pid"
  start_litestream "$d/state/forge.db" "$d/replica" "$sock" "$d/litestream1.log"
  gate_config "$mode" "$d/state" "$sock"
  e2e_start_gate "$d/gate1.log" "$mode: the Gate did not start"

  # The raw client takes the first job's lease and keeps it.
  "$bin/rawlane" -gate "ws://$addr" -worker abandoner -token-env FORGE_ABANDON_TOKEN abandon >"$d/abandon.out" 2>"$d/abandon.log" &
  pids+=("$!")
  wait_log "$d/abandon.out" 'e["event"] == "welcome"' >/dev/null || fail "$mode: abandoner not welcomed"
  held=$("$bin/forge" submit -file "$tmp/text-task.json" | field id) || fail "$mode: forge submit"
  lease=$(wait_log "$d/abandon.out" 'e["event"] == "lease"') || fail "$mode: the abandoner got no lease"
  [ "$(printf '%s' "$lease" | field job_id)" = "$held" ] || fail "$mode: the abandoner leased another job"
  held_attempt=$(printf '%s' "$lease" | field attempt_id)

  if [ -n "$worker_started" ]; then
    kill -CONT "$worker_pid"
  else
    cat >"$tmp/worker.json" <<EOF
{"version":1,"gate_url":"ws://127.0.0.1:$port","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"500ms","concurrency":2,
 "repository_roots":["$tmp/repos"],"worktree_root":"$tmp/worktrees","runtime_root":"$tmp/runtime",
 "repositories":[{"id":"demo","path":"$repo"}],
 "plugins":[{"id":"reference","argv":["$bin/forge-ref-plugin"]},{"id":"codex","argv":["$bin/forge-codex-plugin"]}],
 "providers":[{"id":"openai","kind":"openai-responses","base_url":"https://api.openai.com/v1","key_env":"OPENAI_API_KEY"}],
 "environment_allowlist":["PATH","CODEX_BIN"],"check_environment_allowlist":["PATH"],
 "sandbox_read_paths":["$(dirname "$CODEX_BIN")"],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
EOF
    e2e_start_worker
    worker_started=1
  fi

  say "$mode: load"
  # 2. Load, then the loss of the host.
  : >"$d/acked-text" && : >"$d/acked-coding"
  submit_loop text "$d/acked-text" &
  local l1=$!
  submit_loop text "$d/acked-text" &
  local l2=$!
  submit_loop coding "$d/acked-coding" &
  local l3=$!
  pids+=("$l1" "$l2" "$l3")
  # Long enough that some jobs are older than the window at the loss.
  local until_t=$((SECONDS + window + 2))
  until [ "$(wc -l <"$d/acked-coding")" -ge 2 ] && [ "$(wc -l <"$d/acked-text")" -ge 20 ] && [ "$SECONDS" -ge "$until_t" ]; do sleep 0.1; done
  kill -KILL "$gate_pid" "$ls_pid"
  loss=$EPOCHREALTIME
  kill -KILL "$l1" "$l2" "$l3"
  wait "$gate_pid" "$ls_pid" "$l1" "$l2" "$l3" 2>/dev/null || true
  rm -rf "$d/state"
  cat "$d/acked-text" "$d/acked-coding" >"$d/acked"

  say "$mode: host lost"
  # 3. Restore on a fresh state directory.
  litestream restore -o "$d/restored.db" "file://$d/replica" >"$d/ls-restore.log" 2>&1 || fail "$mode: litestream restore"
  mkdir -m 0700 "$d/state"
  "$bin/forge" restore -db "$d/state/forge.db" "$d/restored.db" >"$d/restore.out" 2>"$d/restore.log" || fail "$mode: forge restore (exit $?)"
  grep -q '^forge restore: restored [0-9]* bytes (schema version [0-9]*, fencing epoch 1, events numbered from [0-9]*)$' "$d/restore.out" ||
    fail "$mode: forge restore output"
  start_litestream "$d/state/forge.db" "$d/replica2" "$sock" "$d/litestream2.log"
  e2e_start_gate "$d/gate2.log" "$mode: the restored Gate did not start"
  wait_log "$d/gate2.log" 'e.get("msg") == "recovered"' >/dev/null || fail "$mode: the restored Gate did not recover"

  say "$mode: restored"
  # 4. What the restored Gate knows.
  "$bin/forge" status "$held" >/dev/null 2>&1 || fail "$mode: the held job (acknowledged before the load) is missing"
  while read -r id at; do
    if "$bin/forge" status "$id" >/dev/null 2>&1; then
      echo "present $id $at"
    else
      echo "missing $id $at"
    fi
  done <"$d/acked" >"$d/presence"
  python3 - "$d/presence" "$mode" "$loss" "$window" <<'PY' || fail "$mode: acknowledged jobs missing after the restore"
import sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()]
mode, loss, window = sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
missing = [(k, i, float(t)) for k, i, t in rows if k == "missing"]
if mode == "sync":
    assert not missing, "acknowledged but not replicated: %r" % missing[:3]
else:
    assert any(loss - float(t) > window for _, _, t in rows), "no job was acknowledged more than %ss before the loss" % window
    old = [m for m in missing if loss - m[2] > window]
    assert not old, "acknowledged more than %ss before the loss but missing: %r" % (window, old[:3])
newest = max((loss - t for _, _, t in missing), default=None)
print("%s: %d acknowledged jobs, %d present after the restore%s" % (
    mode, len(rows), len(rows) - len(missing),
    "" if newest is None else ", missing ones acknowledged at most %.3f s before the loss" % newest))
PY

  say "$mode: checked"
  # 5. The Worker reconnects by itself and finishes the restored work.
  after=$("$bin/forge" submit -file "$tmp/text-task.json" | field id) || fail "$mode: submit after the restore"
  "$bin/forge" wait -timeout 60s -poll 100ms "$after" >/dev/null || fail "$mode: a job submitted after the restore did not finish (Worker not back?)"
  while read -r id _; do
    "$bin/forge" status "$id" >/dev/null 2>&1 || continue
    "$bin/forge" wait -timeout 60s -poll 100ms "$id" >"$d/coding-aggregate.json" || fail "$mode: a restored coding job did not finish"
    python3 - "$d/coding-aggregate.json" <<'PY' || fail "$mode: a restored coding job did not succeed"
import json, sys
j = json.load(open(sys.argv[1]))["job"]
assert j["status"] == "succeeded" and len(j["candidate_sha"]) == 40, j
PY
  done <"$d/acked-coding"
  "$bin/rawlane" -gate "ws://$addr" -worker abandoner -token-env FORGE_ABANDON_TOKEN late "$held" "$held_attempt" >"$d/late.out" 2>"$d/late.log" ||
    fail "$mode: the late client failed"
  python3 - "$d/late.out" <<'PY' || fail "$mode: a pre-loss result was accepted"
import json, sys
replies = {e["event"]: e for e in map(json.loads, open(sys.argv[1]).read().splitlines()) if e["event"] != "welcome"}
for kind in ("result", "evidence"):
    r = replies[kind]
    assert r["reply"] == "reject" and r["code"] in ("stale", "expired", "not_found"), r
PY
  say "$mode: done"
  kill -KILL "$gate_pid" "$ls_pid"
  wait "$gate_pid" "$ls_pid" 2>/dev/null || true
}

drill sync
drill async
stop Worker "$worker_pid"
pids=()
for f in "$tmp"/*.log "$tmp"/*/*.log; do
  if grep -q -e "$FORGE_OWNER_TOKEN" -e "$FORGE_WORKER_TOKEN" -e "$FORGE_ABANDON_TOKEN" "$f"; then
    fail "$(basename "$f") contains a token"
  fi
done
echo "DISASTER-RECOVERY-E2E PASS"
