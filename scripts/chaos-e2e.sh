#!/usr/bin/env bash
# CHAOS-E2E: crash consistency under a bounded soak (testdata/chaos/chaos.py).
#
#   scripts/chaos-e2e.sh [-seed N] [-jobs N] [-coding PERCENT] [-seconds S]
#
# Defaults are the CI size (40 jobs over 40 s, a quarter coding); the full
# soak is e.g. -jobs 300 -seconds 200 (under 5 minutes). The seed (random
# unless given) is printed first, and fixes the job mix and the chaos
# schedule.
#
# One Gate (file database, lease_ttl 3s) and three Workers of two lanes
# each (their own clone of a generated repository): text jobs run
# testdata/chaos/slow-plugin.py (sleeps, then answers), coding jobs run
# testdata/edit-plugin and a scoped check. While jobs are submitted, at
# random moments: the Gate is SIGKILLed and restarted, Worker a SIGKILLed
# and restarted, Worker b SIGTERMed and restarted, a running plugin
# SIGKILLed. Afterwards, from the owner API and the SQLite file (read-only):
# every job terminal exactly once; no attempt succeeded twice, and none
# but a job's last; no failed or expired attempt holds a candidate;
# attempt ordinals are gapless and match attempt_count; the events agree
# with the attempts (a leased event per attempt, plus one per released
# lease, and the event of its end); worker_shutdown only on attempts a
# Worker logged as started; every coding success's candidate ref exists
# in the clone that made it; no worktree or runtime directory is left;
# PRAGMA integrity_check is ok. A self-check then tampers copies of the
# database (a terminal event removed, a second one added, an ordinal gap,
# worker_shutdown on an unstarted lease) and requires each to be caught.
# Last line: jobs=N kills=K restarts=R lost=0 duplicated=0 burned=0
# leaked_dirs=0 integrity=ok (exit 0 only when all hold).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
cd "$(dirname "$0")/.."

seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
jobs=40
coding=25
seconds=40
while [ $# -gt 0 ]; do
  case $1 in
    -seed) seed=$2 ;;
    -jobs) jobs=$2 ;;
    -coding) coding=$2 ;;
    -seconds) seconds=$2 ;;
    *) echo "usage: chaos-e2e.sh [-seed N] [-jobs N] [-coding PERCENT] [-seconds S]" >&2; exit 2 ;;
  esac
  shift 2
done
echo "chaos-e2e: seed=$seed jobs=$jobs coding=$coding% seconds=$seconds"

tmp=$(cd "$(mktemp -d)" && pwd -P)
pids=()
# The soak runs in its own process group with every daemon it starts;
# the exit trap ends that group.
soak=
kill_soak() { if [ -n "$soak" ]; then kill -KILL -- "-$soak" 2>/dev/null || true; fi; }
trap 'kill_soak; e2e_cleanup' EXIT
trap 'exit 130' INT TERM
fail() { e2e_fail chaos-e2e "$@"; }

bin=$tmp/bin
mkdir -p "$bin"
e2e_build forge-gate forge-worker
go build -o "$bin/edit-plugin" ./testdata/edit-plugin || fail "build edit-plugin"

FORGE_OWNER_TOKEN=owner-$(rand)
export FORGE_OWNER_TOKEN
for w in a b c; do export "FORGE_WORKER_${w^^}_TOKEN=worker-$w-$(rand)"; done

mkdir -m 0700 "$tmp/repos" "$tmp/state"
repo=$tmp/repos/seed
GIT_CONFIG_GLOBAL=/dev/null git init -q -b main "$repo"
printf 'chaos repository\n' >"$repo/README.md"
g add -A
GIT_AUTHOR_NAME=Seed GIT_AUTHOR_EMAIL=seed@example.invalid GIT_COMMITTER_NAME=Seed GIT_COMMITTER_EMAIL=seed@example.invalid \
  g commit -q -m base
g rev-parse HEAD >"$tmp/base"
for w in a b c; do
  GIT_CONFIG_GLOBAL=/dev/null git clone -q "$repo" "$tmp/repos/demo-$w"
  mkdir -m 0700 "$tmp/worktrees-$w" "$tmp/runtime-$w"
done
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf '127.0.0.1:%s' "$port" >"$tmp/addr"

text_policy='{"plugin_id":"slow","environment":["PATH"],"plugin_timeout":"30s","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"5s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}'
code_policy='{"plugin_id":"edit","environment":["PATH"],"plugin_timeout":"30s","check_timeout":"30s","git_timeout":"1m","cleanup_timeout":"5s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}'
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:$port","database":"$tmp/state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"200ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"3s","retry_base":"200ms","max_attempts":10},
 "default_execution":$text_policy,
 "workers":[{"id":"worker-a","pool":"local","token_env":"FORGE_WORKER_A_TOKEN","concurrency":2},
            {"id":"worker-b","pool":"local","token_env":"FORGE_WORKER_B_TOKEN","concurrency":2},
            {"id":"worker-c","pool":"local","token_env":"FORGE_WORKER_C_TOKEN","concurrency":2}],
 "repositories":[{"id":"demo","default_branch":"main","worker_pool":"local","execution":$code_policy}]}
EOF
for w in a b c; do
  cat >"$tmp/worker-$w.json" <<EOF
{"version":1,"gate_url":"ws://127.0.0.1:$port","id":"worker-$w","token_env":"FORGE_WORKER_${w^^}_TOKEN","heartbeat_interval":"500ms","concurrency":2,
 "repository_roots":["$tmp/repos"],"worktree_root":"$tmp/worktrees-$w","runtime_root":"$tmp/runtime-$w",
 "repositories":[{"id":"demo","path":"$tmp/repos/demo-$w"}],
 "plugins":[{"id":"slow","argv":["$(pwd -P)/testdata/chaos/slow-plugin.py"]},{"id":"edit","argv":["$bin/edit-plugin"]}],
 "environment_allowlist":["PATH"],"check_environment_allowlist":["PATH"],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
EOF
done

for w in a b c; do e2e_cgroup "worker-$w"; done
setsid python3 testdata/chaos/chaos.py "$tmp" "$seed" "$jobs" "$coding" "$seconds" "${cgroup_dir%-c}" >"$tmp/summary.out" 2>"$tmp/chaos.out" &
soak=$!
rc=0
wait "$soak" || rc=$?
soak=
cat "$tmp/summary.out"
[ "$rc" = 0 ] || fail "soak checks failed (seed $seed)"
echo "CHAOS-E2E PASS"
