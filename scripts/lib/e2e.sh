# shellcheck shell=bash
# Shared helpers for the e2e scripts (scripts/*e2e.sh and scripts/demo.sh).
# Source it, before the script changes directory, with
#   source "$(dirname "$0")/lib/e2e.sh"
# It only defines functions: sourcing runs nothing, sets no options and no
# traps. The functions use the caller's globals where noted:
#   tmp   the script's private temp dir (mktemp -d; e2e_setup makes it)
#   pids  an array of the background processes to end on exit
#   bin   the directory the script builds its binaries into
#   repo  the generated git repository (for g)
# and call the caller's own `fail MESSAGE` on errors.
#
#   e2e_setup NAME      the common start: tmp a fresh private temp dir (its
#                       physical path), pids empty, bin=$tmp/bin (made),
#                       e2e_traps, and fail MSG.. as e2e_fail NAME MSG..
#   e2e_require TOOL..  fail "TOOL is required (.ci/run installs it)" for
#                       the first TOOL not on PATH.
#   e2e_cleanup         SIGKILL and reap every pid in pids, empty and remove
#                       the cgroups of e2e_cgroup, then remove tmp.
#   e2e_traps           install e2e_cleanup as the EXIT trap and make INT
#                       and TERM exit 130, so the EXIT trap runs on signals.
#   e2e_dump_logs N F.. print the last N lines of each F that exists to
#                       stderr, each under a "--- NAME" header (for fail).
#   e2e_fail NAME MSG.. print "NAME: FAIL: MSG" to stderr, then the last 30
#                       lines of each $tmp/*.log and $tmp/*.out, and exit 1
#                       (the EXIT trap then cleans up). Scripts define
#                       fail() { e2e_fail NAME "$@"; } (e2e_setup does).
#   e2e_build CMD..     go build ./cmd/CMD into $bin/CMD for each CMD;
#                       fail "build CMD" when one does not build.
#   rand                32 random hex digits (for tokens and canaries).
#   field KEY           print member KEY of the JSON object on stdin.
#   wait_log F EXPR     poll the JSON lines of file F until one satisfies the
#                       Python expression EXPR (the line is `e`); print that
#                       line and return 0, or return 1 after 30 s.
#   count_in F EXPR     print how many JSON lines of F satisfy EXPR.
#   g ARGS..            git -C "$repo" ARGS without global or system config.
#   seed_commit MSG     commit everything in $repo as Seed
#                       <seed@example.invalid> with subject MSG; fail
#                       "commit MSG" when git refuses.
#   e2e_start_gate LOG MESSAGE
#                       start "$bin/forge-gate" -config "$tmp/gate.json" in
#                       the background, stderr to LOG, add it to pids, wait
#                       for its "listening" line and set gate_pid, addr and
#                       (exported) FORGE_GATE_URL=http://$addr; fail MESSAGE
#                       when no address is logged within 30 s.
#   e2e_cgroup NAME [ACCOUNT]
#                       make a fresh cgroup v2 below the script's own
#                       (forge-e2e-PID-NAME), delegated to ACCOUNT when
#                       given (it and its cgroup.procs, cgroup.threads and
#                       cgroup.subtree_control chowned, as systemd's
#                       Delegate=yes does), set cgroup_dir to it and add it
#                       to e2e_cgroups; fail when none can be made (the
#                       script needs root, or to run in a cgroup delegated
#                       to its account). A sandboxed Worker needs one
#                       (docs/sandbox.md, "Containment"); the same NAME
#                       again reuses the cgroup (a Worker started again).
#   enter_cgroup DIR    move this (sub)shell into the cgroup DIR.
#   in_cgroup DIR CMD.. enter_cgroup DIR, then exec CMD there: use it as
#                       `(in_cgroup DIR CMD..) &`, so $! is CMD's own pid.
#   e2e_start_worker    start "$bin/forge-worker" -config "$tmp/worker.json"
#                       in the background in a cgroup of its own
#                       (e2e_cgroup worker), stderr to $tmp/worker.log, add
#                       it to pids and set worker_pid.
#   stop NAME PID       SIGTERM PID and require it to exit 0, else
#                       fail "NAME did not exit 0 on SIGTERM".

# shellcheck disable=SC2154 # tmp, pids, bin and repo belong to the caller

e2e_setup() {
  e2e_name=$1
  # shellcheck disable=SC2317 # called by the script and the other helpers
  fail() { e2e_fail "$e2e_name" "$@"; }
  tmp=$(cd "$(mktemp -d)" && pwd -P)
  pids=()
  e2e_traps
  bin=$tmp/bin
  mkdir -p "$bin"
}

e2e_require() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null || fail "$t is required (.ci/run installs it)"
  done
}

e2e_cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  e2e_cgroups_remove
  rm -rf "$tmp"
}

e2e_cgroup() {
  local own mnt
  own=$(sed -n 's/^0:://p' /proc/self/cgroup)
  mnt=$(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2" && $4 == "/") print $5; break } }' /proc/self/mountinfo | head -n 1)
  [ -n "$own" ] && [ -n "$mnt" ] || fail "no cgroup v2 here (a sandboxed Worker needs one)"
  cgroup_dir=${mnt%/}${own%/}/forge-e2e-$$-$1
  [ -d "$cgroup_dir" ] && return 0 # made before: a Worker started again
  mkdir "$cgroup_dir" 2>/dev/null || fail "cannot make a cgroup for $1 (run as root, or in a cgroup delegated to this account)"
  e2e_cgroups+=("$cgroup_dir")
  if [ -n "${2:-}" ]; then
    chown "$2" "$cgroup_dir" "$cgroup_dir/cgroup.procs" "$cgroup_dir/cgroup.threads" "$cgroup_dir/cgroup.subtree_control" ||
      fail "cannot delegate the cgroup of $1 to $2"
  fi
}

enter_cgroup() {
  echo "$BASHPID" >"$1/cgroup.procs" || fail "cannot enter the cgroup $1"
}

in_cgroup() {
  enter_cgroup "$1"
  shift
  exec "$@"
}

# e2e_cgroups_remove kills what is left in each cgroup of e2e_cgroup and
# removes it with its children, bounded.
e2e_cgroups_remove() {
  local d i
  for d in "${e2e_cgroups[@]+"${e2e_cgroups[@]}"}"; do
    [ -d "$d" ] || continue
    echo 1 >"$d/cgroup.kill" 2>/dev/null || true
    for i in $(seq 50); do
      find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
      [ -d "$d" ] || break
      sleep 0.1
    done
  done
}

e2e_traps() {
  trap e2e_cleanup EXIT
  trap 'exit 130' INT TERM # run the EXIT trap on signals too
}

e2e_dump_logs() {
  local n=$1 f
  shift
  for f in "$@"; do [ -f "$f" ] && { echo "--- $(basename "$f")" >&2; tail -n "$n" "$f" >&2; }; done
  return 0
}

e2e_fail() {
  local name=$1
  shift
  echo "$name: FAIL: $*" >&2
  e2e_dump_logs 30 "$tmp"/*.log "$tmp"/*.out
  exit 1
}

e2e_build() {
  local c
  for c in "$@"; do
    go build -o "$bin/$c" "./cmd/$c" || fail "build $c"
  done
}

rand() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }

field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

wait_log() {
  python3 - "$1" "$2" <<'PY'
import json, sys, time
path, expr = sys.argv[1], sys.argv[2]
deadline = time.time() + 30
while time.time() < deadline:
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        lines = []
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if eval(expr):
            print(json.dumps(e))
            sys.exit(0)
    time.sleep(0.05)
sys.exit(1)
PY
}

count_in() {
  python3 - "$1" "$2" <<'PY'
import json, sys
n = 0
for line in open(sys.argv[1]).read().splitlines():
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if eval(sys.argv[2]):
        n += 1
print(n)
PY
}

g() { GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 git -C "$repo" "$@"; }

seed_commit() {
  g add -A || fail "commit $1"
  GIT_AUTHOR_NAME=Seed GIT_AUTHOR_EMAIL=seed@example.invalid GIT_COMMITTER_NAME=Seed GIT_COMMITTER_EMAIL=seed@example.invalid \
    g commit -q -m "$1" || fail "commit $1"
}

e2e_start_gate() {
  "$bin/forge-gate" -config "$tmp/gate.json" 2>"$1" &
  gate_pid=$!
  pids+=("$gate_pid")
  addr=$(wait_log "$1" 'e.get("msg") == "listening"' | field addr) || fail "$2"
  export FORGE_GATE_URL="http://$addr"
}

e2e_start_worker() {
  e2e_cgroup worker
  (in_cgroup "$cgroup_dir" "$bin/forge-worker" -config "$tmp/worker.json" 2>"$tmp/worker.log") &
  worker_pid=$!
  pids+=("$worker_pid")
}

stop() {
  kill -TERM "$2"
  wait "$2" || fail "$1 did not exit 0 on SIGTERM"
}
