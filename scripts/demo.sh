#!/usr/bin/env bash
# make demo: the main job end to end on local defaults. Starts forge-gate
# (loopback, OS-chosen port, SQLite file in a private temp dir) and
# forge-worker (2 lanes, the reference plugin), submits one text job with
# the forge CLI, prints the job's aggregate, and shuts both down cleanly.
# Uses the binaries in bin/ (make build) and builds any that are missing
# into the temp dir. Progress goes to stderr, the aggregate to stdout.
set -euo pipefail
cd "$(dirname "$0")/.."

input=${1:-hello agent forge}
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM # run the EXIT trap on signals too
say() { echo "demo: $*" >&2; }
fail() {
  say "FAILED: $*"
  for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $(basename "$f")" >&2; tail -n 20 "$f" >&2; }; done
  exit 1
}
command -v python3 >/dev/null || fail "python3 is required (apt-get install python3)"

bin=$tmp/bin
mkdir -p "$bin"
for c in forge-gate forge-worker forge-ref-plugin forge; do
  if [ -x "bin/$c" ]; then
    cp "bin/$c" "$bin/$c"
  else
    say "building $c"
    go build -o "$bin/$c" "./cmd/$c" || fail "build $c"
  fi
done

rand() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }
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

# first_line FILE PYTHON-EXPR: the first JSON log line satisfying the
# expression (variable e), polling for at most 30 s.
first_line() {
  python3 - "$1" "$2" <<'PY'
import json, sys, time
deadline = time.time() + 30
while time.time() < deadline:
    try:
        lines = open(sys.argv[1]).read().splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if eval(sys.argv[2]):
            print(json.dumps(e))
            sys.exit(0)
    time.sleep(0.05)
sys.exit(1)
PY
}
field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

"$bin/forge-gate" -config "$tmp/gate.json" 2>"$tmp/gate.log" &
gate_pid=$!
pids+=("$gate_pid")
addr=$(first_line "$tmp/gate.log" 'e.get("msg") == "listening"' | field addr) || fail "Gate did not start"
export FORGE_GATE_URL="http://$addr"
say "Gate listening on $addr (database in a private temp dir)"

cat >"$tmp/worker.json" <<EOF
{"version":1,"gate_url":"ws://$addr","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"1s","concurrency":2,
 "repository_roots":[],"worktree_root":"$tmp/worktrees","runtime_root":"$tmp/runtime","repositories":[],
 "plugins":[{"id":"reference","argv":["$bin/forge-ref-plugin"],"sha256":"$(sha256sum "$bin/forge-ref-plugin" | cut -d' ' -f1)"}],
 "environment_allowlist":["PATH"],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
EOF
"$bin/forge-worker" -config "$tmp/worker.json" 2>"$tmp/worker.log" &
worker_pid=$!
pids+=("$worker_pid")
for lane in worker-1 'worker-1#1'; do
  first_line "$tmp/gate.log" "e.get('msg') == 'lane connected' and e.get('lane') == '$lane'" >/dev/null ||
    fail "Worker lane $lane did not connect"
done
say "Worker connected with 2 lanes"

task=$(python3 -c 'import json,sys; print(json.dumps({"input": sys.argv[1]}))' "$input")
job_id=$(printf '%s\n' "$task" | "$bin/forge" submit -file - | field id) || fail "forge submit"
say "submitted job $job_id"
"$bin/forge" wait -timeout 60s -poll 100ms "$job_id" >"$tmp/aggregate.json" || fail "forge wait (exit $?)"
python3 -m json.tool "$tmp/aggregate.json"
say "result: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"]["result"])' "$tmp/aggregate.json")"

kill -TERM "$worker_pid"
wait "$worker_pid" || fail "Worker did not shut down cleanly"
kill -TERM "$gate_pid"
wait "$gate_pid" || fail "Gate did not shut down cleanly"
pids=()
say "Gate and Worker stopped cleanly"
