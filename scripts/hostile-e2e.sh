#!/usr/bin/env bash
# HOSTILE-E2E: a table of hostile input against a running forge-gate and
# a Worker's plugin host (testdata/hostile/hostile.py holds the table).
#
#  1. Gate (file database, no Worker yet): oversized, truncated and empty
#     bodies; wrong, doubled and missing content types; duplicate and
#     case-variant keys, unknown fields, nulls, invalid UTF-8 and lone
#     surrogates; huge tests arrays and argv; traversal and control
#     characters in every id (submit bodies, every job route, the debug
#     routes, hello); wrong tokens on every owner route (and Worker tokens
#     there, the owner token on the Worker route); slow headers, a slow
#     body, 300 idle connections, silent WebSockets and one over the
#     Worker's connection limit; WebSocket frames over 1 MiB, binary and
#     continuation frames, malformed, duplicate-key and Gate-only messages,
#     messages before hello, a second hello, hellos for another Worker or
#     slot; replays of another lane's attempt (result, heartbeat, evidence)
#     and a conflicting result from the holder.
#  2. A real Worker whose plugin (testdata/hostile/plugin.py) answers
#     each job with a hostile frame: oversized, unterminated, bad UTF-8,
#     lone surrogate, duplicate/case-variant/unknown keys, null, a
#     Worker-only frame, binary, two results.
# Each row gets its bounded, value-free error; the SQLite file (read
# read-only after every row) changes in no row count; the Gate stays
# ready; the marker in every payload never reaches the database, an API
# answer or a log; a normal job succeeds afterwards.
# Prints tried=N rejected=N stored=0 per phase. Final line: HOSTILE-E2E PASS.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
cd "$(dirname "$0")/.."

e2e_setup hostile-e2e
e2e_build forge-gate forge-worker forge

FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_WORKER_TOKEN=worker-$(rand)
FORGE_RAW_TOKEN=raw-$(rand)
export FORGE_OWNER_TOKEN FORGE_WORKER_TOKEN FORGE_RAW_TOKEN
marker=HOSTILE-$(rand)

mkdir -m 0700 "$tmp/state" "$tmp/worktrees" "$tmp/runtime"
exec_policy='{"plugin_id":"hostile","environment":["PATH"],"plugin_timeout":"30s","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"2s","plugin_output_bytes":4194304,"check_output_bytes":2048,"git_output_bytes":1048576}'
cat >"$tmp/gate.json" <<JSON
{"version":1,"listen":"127.0.0.1:0","database":"$tmp/state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"30s","retry_base":"1s","max_attempts":1},
 "default_execution":$exec_policy,
 "workers":[{"id":"worker-1","pool":"local","token_env":"FORGE_WORKER_TOKEN","concurrency":1},
            {"id":"raw","pool":"local","token_env":"FORGE_RAW_TOKEN","concurrency":2}],
 "repositories":[{"id":"demo","default_branch":"main","worker_pool":"local","execution":$exec_policy}]}
JSON
e2e_start_gate "$tmp/gate.log" "Gate did not start"
db=$tmp/state/forge.db

# 1. The Gate's own surfaces.
python3 testdata/hostile/hostile.py gate "$addr" "$db" "$marker" 2>"$tmp/gate-table.out" | tee "$tmp/gate-summary.out" ||
  fail "gate table: $(tail -n 1 "$tmp/gate-summary.out")"

# 2. The Worker's plugin host.
cat >"$tmp/worker.json" <<JSON
{"version":1,"gate_url":"ws://$addr","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"1s","concurrency":1,
 "repository_roots":[],"worktree_root":"$tmp/worktrees","runtime_root":"$tmp/runtime","repositories":[],
 "plugins":[{"id":"hostile","argv":["$(pwd -P)/testdata/hostile/plugin.py"]}],
 "environment_allowlist":["PATH"],"check_environment_allowlist":[],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":4194304,"check_output_bytes":2048,"git_output_bytes":1048576}}
JSON
e2e_start_worker
wait_log "$tmp/gate.log" "e.get('msg') == 'lane connected' and e.get('lane') == 'worker-1'" >/dev/null || fail "Worker did not connect"
python3 testdata/hostile/hostile.py plugin "$addr" "$db" "$marker" 2>"$tmp/plugin-table.out" | tee "$tmp/plugin-summary.out" ||
  fail "plugin table: $(tail -n 1 "$tmp/plugin-summary.out")"

# Still serving: a normal job through the same Worker succeeds.
job=$(printf '{"input":"ok still serving"}\n' | "$bin/forge" submit -file - | field id) || fail "normal submit"
"$bin/forge" wait -timeout 60s -poll 100ms "$job" >"$tmp/normal.json" || fail "normal job did not succeed"
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"]["result"])' "$tmp/normal.json")" = "STILL SERVING" ] ||
  fail "normal job result"
[ "$(python3 -c 'import sqlite3,sys; print(sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True).execute("PRAGMA integrity_check").fetchone()[0])' "$db")" = ok ] ||
  fail "integrity_check"

stop Worker "$worker_pid"
stop Gate "$gate_pid"
pids=()
for f in "$tmp"/*.log "$db"*; do
  [ -f "$f" ] || continue
  if grep -a -q -e "$marker" -e "$FORGE_OWNER_TOKEN" -e "$FORGE_WORKER_TOKEN" -e "$FORGE_RAW_TOKEN" "$f"; then
    fail "$(basename "$f") holds the marker or a token"
  fi
done
echo "HOSTILE-E2E PASS"
