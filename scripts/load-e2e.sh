#!/usr/bin/env bash
# LOAD-E2E: the Gate under many Worker lanes, measured from outside.
#
#   scripts/load-e2e.sh [-sizes L1,L2,...] [-drain N] [-latency K] [-real JOBS]
#
# Defaults are the CI size (-sizes 256,8 -drain 500 -latency 50 -real 60);
# the full size is -sizes 10000,1000,8 -drain 10000 -latency 1000 -real 1000.
# For each lane count L, a fresh Gate (file database, lease_ttl 5s, sweep
# every 1s, retry_base 100ms) gets ceil(L/250) Workers of at most 250
# lanes, and testdata/load-lanes opens L raw lanes over real WebSockets on
# loopback (fd limits raised to the hard limit) and reports: Gate RSS per
# idle lane, submit→lease p50/p99 with every lane idle, the dead-Worker
# re-lease time (lease TTL + one sweep interval + the retry backoff is the
# bound it is compared with), and, after the lanes disconnect and N jobs are
# queued, drain jobs/s through the reconnected lanes and Gate CPU per job.
# Then real Workers (2 × 4 lanes, the reference plugin) drain -real jobs.
# Figures are printed, one line per size; nothing is asserted on them
# (timing is not a test): the script fails only when work does not finish.
# Final line: LOAD-E2E PASS.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
cd "$(dirname "$0")/.."

sizes=256,8
drain=500
latency=50
real=60
while [ $# -gt 0 ]; do
  case $1 in
    -sizes) sizes=$2 ;;
    -drain) drain=$2 ;;
    -latency) latency=$2 ;;
    -real) real=$2 ;;
    *) echo "usage: load-e2e.sh [-sizes L1,L2,...] [-drain N] [-latency K] [-real JOBS]" >&2; exit 2 ;;
  esac
  shift 2
done

e2e_setup load-e2e
ulimit -n "$(ulimit -Hn)"
e2e_build forge-gate forge-worker forge-ref-plugin
go build -o "$bin/load-lanes" ./testdata/load-lanes || fail "build load-lanes"
FORGE_OWNER_TOKEN=owner-$(rand)
export FORGE_OWNER_TOKEN
echo "load-e2e: sizes=$sizes drain=$drain latency=$latency real=$real fd_limit=$(ulimit -n) cpus=$(nproc)"

gate_config() { # $1: workers, $2: lanes per Worker, $3: dir
  python3 - "$1" "$2" "$3" >"$3/gate.json" <<'PY'
import json, sys
w, per, d = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
pol = {"plugin_id": "reference", "environment": ["PATH"], "plugin_timeout": "1m", "check_timeout": "1m", "git_timeout": "1m",
       "cleanup_timeout": "1s", "plugin_output_bytes": 1048576, "check_output_bytes": 2048, "git_output_bytes": 1048576}
print(json.dumps({"version": 1, "listen": "127.0.0.1:0", "database": d + "/state/forge.db", "owner_token_env": "FORGE_OWNER_TOKEN",
                  "recovery_interval": "1s", "lease_poll_interval": "1s", "default_pool": "local",
                  "lifecycle": {"lease_ttl": "5s", "retry_base": "100ms", "max_attempts": 3}, "default_execution": pol,
                  "workers": [{"id": "load-%d" % i, "pool": "local", "token_env": "FORGE_LOAD_TOKEN_%d" % i, "concurrency": per} for i in range(w)],
                  "repositories": []}))
PY
}

run_size() { # $1: lanes
  local lanes=$1 w per d i
  w=$(((lanes + 249) / 250))
  per=$(((lanes + w - 1) / w))
  d=$tmp/size-$lanes
  mkdir -p "$d" && mkdir -m 0700 "$d/state"
  for ((i = 0; i < w; i++)); do export "FORGE_LOAD_TOKEN_$i=load-$i-$(rand)"; done
  gate_config "$w" "$per" "$d"
  cp "$d/gate.json" "$tmp/gate.json"
  e2e_start_gate "$d/gate.log" "Gate ($lanes lanes) did not start"
  "$bin/load-lanes" -gate "$addr" -gate-pid "$gate_pid" -workers "$w" -per "$per" -latency "$latency" -drain "$drain" \
    >"$d/figures.json" 2>"$d/driver.log" || fail "load driver at $lanes lanes: $(tail -n 3 "$d/driver.log")"
  stop "Gate ($lanes lanes)" "$gate_pid"
  pids=()
  python3 - "$d/figures.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
print(("load: lanes=%(lanes)d workers=%(workers)d rss_per_idle_lane=%(rss_per_idle_lane_kib).1fKiB "
       "submit_to_lease_p50=%(submit_to_lease_p50_ms).2fms p99=%(submit_to_lease_p99_ms).2fms "
       "dead_worker_release=%(dead_release_s).2fs (bound 5s ttl + 1s sweep + 0.1s backoff) "
       "drain=%(drain_jobs_per_s).0f jobs/s over %(drain_jobs)d gate_cpu_per_job=%(gate_cpu_ms_per_job).3fms "
       "connect=%(connect_s).1fs reconnect=%(reconnect_s).1fs queue_submits=%(queue_submits_per_s).0f/s") % f)
PY
}

IFS=, read -r -a lane_sizes <<<"$sizes"
for n in "${lane_sizes[@]}"; do run_size "$n"; done

# Real Workers with the reference plugin: queue, then drain.
d=$tmp/real
mkdir -p "$d" "$d/wt" "$d/rt" && mkdir -m 0700 "$d/state"
for i in 0 1; do export "FORGE_LOAD_TOKEN_$i=real-$i-$(rand)"; done
gate_config 2 4 "$d"
cp "$d/gate.json" "$tmp/gate.json"
e2e_start_gate "$d/gate.log" "Gate (real Workers) did not start"
python3 - "$addr" "$real" <<'PY' || fail "queueing jobs for the real Workers"
import os, sys
sys.path.insert(0, "testdata/forgeclient")
from forgeclient import owner_json
for i in range(int(sys.argv[2])):
    st, _ = owner_json(sys.argv[1], os.environ["FORGE_OWNER_TOKEN"], "POST", "/v1/jobs", {"input": "real load %d" % i})
    assert st == 201, st
PY
cpu0=$(awk '{print $14 + $15}' "/proc/$gate_pid/stat")
start=$(date +%s.%N)
wpids=()
for i in 0 1; do
  cat >"$d/worker-$i.json" <<EOF
{"version":1,"gate_url":"ws://$addr","id":"load-$i","token_env":"FORGE_LOAD_TOKEN_$i","heartbeat_interval":"1s","concurrency":4,
 "repository_roots":[],"worktree_root":"$d/wt/$i","runtime_root":"$d/rt/$i","repositories":[],
 "plugins":[{"id":"reference","argv":["$bin/forge-ref-plugin"]}],
 "environment_allowlist":["PATH"],"check_environment_allowlist":[],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
EOF
  e2e_cgroup "worker-$i"
  (in_cgroup "$cgroup_dir" "$bin/forge-worker" -config "$d/worker-$i.json" 2>"$d/worker-$i.log") &
  wpids+=("$!")
  pids+=("$!")
done
python3 - "$d/state/forge.db" "$real" <<'PY' || fail "the real Workers did not drain the queue"
import sys, time
sys.path.insert(0, "testdata/forgeclient")
from forgeclient import ro_db
deadline = time.time() + 600
while time.time() < deadline:
    db = ro_db(sys.argv[1])
    n = db.execute("SELECT count(*) FROM jobs WHERE status = 'succeeded'").fetchone()[0]
    db.close()
    if n >= int(sys.argv[2]):
        sys.exit(0)
    time.sleep(0.05)
sys.exit(1)
PY
end=$(date +%s.%N)
cpu1=$(awk '{print $14 + $15}' "/proc/$gate_pid/stat")
python3 -c 'import sys; n, s, e, c0, c1 = int(sys.argv[1]), *map(float, sys.argv[2:]); print("load: real Workers 2x4 lanes, reference plugin: drain=%.0f jobs/s over %d gate_cpu_per_job=%.3fms" % (n / (e - s), n, (c1 - c0) * 10 / n))' \
  "$real" "$start" "$end" "$cpu0" "$cpu1"
for p in "${wpids[@]}"; do stop Worker "$p"; done
stop Gate "$gate_pid"
pids=()
echo "LOAD-E2E PASS"
