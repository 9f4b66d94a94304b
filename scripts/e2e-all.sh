#!/usr/bin/env bash
# Runs the e2e scripts named on the command line, E2E_JOBS of them at a time
# (default 2), and exits 1 if any failed. Each script keeps its output in a
# file of its own, printed whole when it ends, so side-by-side runs never
# interleave; every script runs even after one failed, and the summary
# names each with its wall time. The scripts are independent of each other:
# each has its own temporary directory, ports chosen by the kernel or a
# private network namespace, its own cgroup (scripts/lib/e2e.sh).
#
# The slowest scripts (most of their time spent waiting, on polls, on a
# booting systemd, on npm ci) start first, so the two queues end close
# together.
set -u

jobs=${E2E_JOBS:-2}
case $jobs in '' | *[!0-9]* | 0) echo "e2e-all: E2E_JOBS must be a positive number" >&2; exit 1 ;; esac
[ $# -gt 0 ] || { echo "usage: e2e-all.sh SCRIPT..." >&2; exit 1; }

first=(linux-installer-e2e intake-e2e delivery-e2e gemini-e2e claude-e2e codex-e2e hostile-agent-e2e)
order=()
for name in "${first[@]}"; do
  for s in "$@"; do [ "$(basename "$s" .sh)" = "$name" ] && order+=("$s"); done
done
for s in "$@"; do
  case " ${first[*]} " in *" $(basename "$s" .sh) "*) ;; *) order+=("$s") ;; esac
done

logs=$(mktemp -d "${TMPDIR:-/tmp}/forge-e2e-logs.XXXXXX")
trap 'rm -rf "$logs"' EXIT
declare -A script_of start_of log_of
n=0
summary=()
failed=0

finish() {
  local pid=$1 rc=$2 s=${script_of[$1]}
  local secs=$(($(date +%s) - start_of[$1]))
  echo "== $s"
  cat "${log_of[$pid]}"
  if [ "$rc" -eq 0 ]; then
    summary+=("ok   ${secs}s $s")
  else
    summary+=("FAIL ${secs}s $s (exit $rc)")
    failed=1
  fi
  unset "script_of[$pid]"
}

running=0
for s in "${order[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n -p done_pid
    rc=$?
    finish "$done_pid" "$rc"
    running=$((running - 1))
  fi
  n=$((n + 1))
  bash "$s" >"$logs/$n.log" 2>&1 </dev/null &
  pid=$!
  log_of[$pid]=$logs/$n.log
  script_of[$pid]=$s
  start_of[$pid]=$(date +%s)
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n -p done_pid
  rc=$?
  finish "$done_pid" "$rc"
  running=$((running - 1))
done

echo "== e2e summary ($jobs at a time)"
printf '%s\n' "${summary[@]}"
exit "$failed"
