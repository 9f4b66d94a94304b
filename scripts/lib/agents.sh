# shellcheck shell=bash
# Helpers for the e2e scripts that drive the real agent CLIs
# (scripts/claude-e2e.sh, scripts/codex-e2e.sh, scripts/gemini-e2e.sh): the pinned npm
# installations, a Worker under strace and the check of what strace saw.
# Source it after scripts/lib/e2e.sh, before the script changes directory,
# with
#   source "$(dirname "$0")/lib/agents.sh"
# It only defines functions. They use the caller's globals tmp, pids, bin
# and repo and the caller's `fail MESSAGE`, like scripts/lib/e2e.sh.
#
#   agents_traps        after e2e_setup: make the EXIT trap first SIGKILL
#                       worker_pid (the Worker under strace: killing strace
#                       does not end it), then run e2e_cleanup; sets
#                       worker_pid empty.
#   agents_npm_ci DIR SRC
#                       npm ci the package.json and package-lock.json of
#                       SRC (the pinned versions and integrity) into the
#                       new directory DIR, without install scripts; output
#                       to DIR.out. Returns npm's status (run it in the
#                       background to overlap it with the build).
#   agents_codex_bin DIR
#                       set and export CODEX_BIN, the native codex of the
#                       npm installation DIR; fail unless it reports the
#                       pinned version 0.169.0.
#   agents_strace OUT CMD..
#                       run CMD under strace following every process,
#                       recording its network calls (connect, sendto,
#                       sendmsg, sendmmsg) into OUT, each line led by the
#                       thread id and its command name (TID<COMM>).
#   agents_account DIR..
#                       as root: the Worker will run as uid/gid 65534 (the
#                       installed system runs it unprivileged; as root the
#                       kernel's ptrace checks, and so the sandbox's hold
#                       on other processes, do not apply): make $tmp
#                       traversable and DIR.. that account's. Otherwise
#                       the calling user runs it and nothing changes.
#   agents_start_worker start "$bin/forge-worker" -config "$tmp/worker.json"
#                       (as the account of agents_account, when called)
#                       under agents_strace into $tmp/strace.txt, stderr
#                       to $tmp/worker.log, in the background; add strace
#                       to pids and set strace_pid and worker_pid (the
#                       Worker's own pid).
#   agents_stop_worker  SIGTERM the Worker and require it to exit 0; clears
#                       worker_pid.
#   agents_gateway_port set gateway_port, the port of the Worker's model
#                       gateway (its "gateway" log line).
#   agents_fake_ca      the test authority the fakes' TLS (-tls-ca) uses:
#                       $tmp/fake-ca.pem. Start the Worker with
#                       SSL_CERT_FILE set to it (the Worker alone trusts it).
#   agents_proc_scan ROOT KEY NAMES SECONDS
#                       for SECONDS, read /proc/PID/environ and cmdline of
#                       every descendant of ROOT (not ROOT itself) again
#                       and again, but for the Worker's own (its binary:
#                       reapers and forks about to exec; and non-dumpable
#                       ones), which no process of the attempt can read;
#                       fail unless each executable
#                       name of the comma-separated NAMES was read at least
#                       once, and print the first process holding KEY and
#                       exit 1 if any did. Prints one line.
#   agents_fake_peers STRACE PORT
#                       every connect() in the strace output STRACE to the
#                       loopback PORT came from a thread of forge-worker
#                       (the gateway), and at least one did.
#   agents_net_check STRACE PORT[:MIN:NAME]..
#                       every AF_INET/AF_INET6 address in the strace output
#                       STRACE is loopback with one of the PORTs (so no DNS
#                       query either), and each PORT given a MIN got at
#                       least MIN connect() calls (the sample covers that
#                       agent). Prints one line; exits non-zero with the
#                       first offending call, "DNS query" leading a call to
#                       port 53.
#   g ARGS..            git -C "$repo" ARGS without global or system
#                       config, trusting $repo whoever owns it.
#   wait_job ID NAME    forge wait for job ID (120 s), aggregate into
#                       $tmp/agg-NAME.json; never fails itself.
#   agents_check_success BASE NAME
#                       the job NAME (its aggregate from wait_job) succeeded
#                       on attempt 1 with the agent report of the
#                       structured answer and the usage the gateway
#                       metered (the fakes' usage fields), and its candidate, a child of
#                       BASE in $repo with the structured commit subject,
#                       adds only NAME.txt holding "NAME from forge".
#   agents_check_failed NAME N CODE [plugin-failed]
#                       the job NAME (its aggregate from wait_job) failed
#                       after N attempts, each failed with failure_code
#                       CODE; with plugin-failed, each attempt's evidence is
#                       only the plugin's failure and it has no candidate.

# shellcheck disable=SC2154 # tmp, pids, bin and repo belong to the caller

agents_cleanup() {
  if [ -n "${worker_pid:-}" ]; then kill -KILL "$worker_pid" 2>/dev/null || true; fi
  e2e_cleanup
}

agents_traps() {
  worker_pid=
  worker_as=()
  trap agents_cleanup EXIT
}

agents_npm_ci() {
  mkdir "$1"
  cp "$2/package.json" "$2/package-lock.json" "$1/"
  (cd "$1" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >"$1.out" 2>&1
}

agents_codex_bin() {
  CODEX_BIN=$(find "$1/node_modules/@openai" -path '*/vendor/*/bin/codex' -type f | head -n 1)
  [ -x "$CODEX_BIN" ] || fail "the npm package has no native codex binary for this platform"
  [ "$("$CODEX_BIN" --version)" = "codex-cli 0.169.0" ] || fail "codex --version is not 0.169.0"
  export CODEX_BIN
}

agents_strace() {
  local out=$1
  shift
  strace -f -qq -Y --seccomp-bpf -e trace=connect,sendto,sendmsg,sendmmsg -o "$out" "$@"
}

agents_account() {
  worker_as=()
  [ "$(id -u)" = 0 ] || return 0
  worker_as=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all)
  chmod 0755 "$tmp"
  chown -R 65534:65534 "$@"
}

g() { GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 git -c safe.directory="$repo" -C "$repo" "$@"; }

agents_start_worker() {
  # The Worker execs from a shell that wrote its pid, so the pid is the Worker's.
  # It runs in a cgroup of its own (e2e_cgroup), delegated to its account,
  # which the shell enters first.
  local account=""
  [ "${#worker_as[@]}" = 0 ] || account=65534
  e2e_cgroup worker $account
  # shellcheck disable=SC2016 # $$, $1, $2, $d, $c and $@ are the inner shell's
  agents_strace "$tmp/strace.txt" \
    sh -c 'd=$1; c=$2; shift 2; echo $$ >"$c/cgroup.procs" && echo $$ >"$d/worker.pid" && exec "$@" 2>"$d/worker.log"' sh "$tmp" "$cgroup_dir" \
    "${worker_as[@]}" "$bin/forge-worker" -config "$tmp/worker.json" &
  strace_pid=$!
  pids+=("$strace_pid")
  for _ in $(seq 100); do [ -s "$tmp/worker.pid" ] && break; sleep 0.05; done
  worker_pid=$(cat "$tmp/worker.pid") || fail "Worker did not start under strace"
}

agents_stop_worker() {
  kill -TERM "$worker_pid"
  wait "$strace_pid" || fail "Worker did not exit 0 on SIGTERM"
  worker_pid=
}

agents_gateway_port() {
  # shellcheck disable=SC2034 # gateway_port is the caller's
  gateway_port=$(wait_log "$tmp/worker.log" "e.get('msg') == 'gateway'" | python3 -c 'import json,sys; print(json.load(sys.stdin)["port"])') ||
    fail "the Worker logged no gateway"
}

agents_fake_ca() { echo "$tmp/fake-ca.pem"; }

agents_proc_scan() {
  python3 - "$@" <<'PY'
import os, sys, time
root, key, names, secs = int(sys.argv[1]), sys.argv[2].encode(), set(filter(None, sys.argv[3].split(","))), float(sys.argv[4])
def descendants():
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open("/proc/%s/stat" % d, "rb").read()
            except OSError:
                continue
            kids.setdefault(int(stat[stat.rindex(b")") + 2:].split()[1]), []).append(int(d))
    out, todo = [], [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out
reads, pids, unreadable, trusted, seen = 0, set(), set(), set(), set()
deadline = time.time() + secs
while time.time() < deadline:
    for pid in descendants():
        try:
            # The Worker's own binary (its reapers; a fork of it not yet
            # replaced by the program it starts, which shares its memory)
            # is trusted and non-dumpable, as is any process whose /proc
            # entries are root's while it is not: no process of the
            # attempt can read them, and none is a process of the attempt.
            comm = os.path.basename(os.readlink("/proc/%d/exe" % pid))
            uid = int(open("/proc/%d/status" % pid).read().split("\nUid:")[1].split()[0])
            if comm == "forge-worker" or (os.stat("/proc/%d" % pid).st_uid == 0 and uid != 0):
                trusted.add(pid)
                continue
            env = open("/proc/%d/environ" % pid, "rb").read()
            cmd = open("/proc/%d/cmdline" % pid, "rb").read()
        except OSError:
            unreadable.add(pid)
            continue
        reads += 1
        pids.add(pid)
        seen.add(comm)
        if key in env or key in cmd:
            sys.exit("the key is in the environment or command line of %s (pid %d)" % (comm, pid))
    time.sleep(0.2)
if not names <= seen:
    sys.exit("the scan never read %s (read: %s)" % (", ".join(sorted(names - seen)), ", ".join(sorted(seen))))
print("proc scan: %d reads of %d processes (%s), %d of the Worker's own skipped, %d unreadable, no key" % (
    reads, len(pids), ", ".join(sorted(seen)), len(trusted), len(unreadable)))
PY
}

agents_fake_peers() {
  python3 - "$@" <<'PY'
import re, sys
path, port = sys.argv[1], sys.argv[2]
call = re.compile(r'^\d+<([^>]*)> connect\(.*sin6?_port=htons\(%s\)' % re.escape(port))
n = 0
for line in open(path, errors="replace"):
    m = call.search(line)
    if m:
        if m.group(1) != "forge-worker":
            sys.exit("%s connected to the fake: %s" % (m.group(1), line.strip()[:200]))
        n += 1
if n == 0:
    sys.exit("no connection to the fake at all")
print("strace: all %d connections to the fake came from forge-worker" % n)
PY
}

agents_net_check() {
  python3 - "$@" <<'PY'
import re, sys
path, specs = sys.argv[1], sys.argv[2:]
ports, want, names = set(), {}, {}
for s in specs:
    port, _, rest = s.partition(":")
    ports.add(port)
    if rest:
        n, _, name = rest.partition(":")
        want[port], names[port] = int(n), name
inet = re.compile(r'sa_family=AF_INET6?, sin6?_port=htons\((\d+)\)')
seen, bad = dict.fromkeys(want, 0), []
for line in open(path, errors="replace"):
    if "AF_INET" not in line:
        continue
    m = inet.search(line)
    port = m.group(1) if m else None
    loop = 'inet_addr("127.0.0.1")' in line or '"::1"' in line
    if port not in ports or not loop:
        bad.append(("DNS query " if port == "53" else "") + line.strip()[:200])
    elif port in seen and "connect(" in line:
        seen[port] += 1
if bad:
    sys.exit("%d calls, first: %s" % (len(bad), bad[0]))
counts = ", ".join("%d to %s" % (seen[p], names[p]) for p in want)
if any(seen[p] < want[p] for p in want):
    sys.exit("strace saw connections: %s; the sample does not cover the agents" % counts)
print("strace: connections %s, none elsewhere" % counts)
PY
}

wait_job() { "$bin/forge" wait -timeout 120s -poll 100ms "$1" >"$tmp/agg-$2.json" 2>>"$tmp/forge.out" || true; }

agents_check_success() {
  local base=$1 name=$2 agg=$tmp/agg-$2.json cand
  python3 - "$agg" "$name" <<'PY' || fail "job $name: aggregate does not match: $(head -c 600 "$agg")"
import json, sys
a = json.load(open(sys.argv[1]))
name = sys.argv[2]
job, attempts = a["job"], a["attempts"]
assert job["status"] == "succeeded", job
assert len(attempts) == 1 and attempts[0]["status"] == "succeeded", attempts
rep = attempts[0].get("agent_report")
assert rep == {"self_reported": True, "summary": "Added %s.txt as the task asked." % name,
               "changes": ["%s.txt: new file with one line" % name]}, rep
# The gateway metered the attempt: every answer of the fakes reports 10
# input and 5 output tokens (a stream cut after Anthropic's message_start
# reports its 10 and 1), and the job's usage is its one attempt's.
u = attempts[0].get("usage")
assert u is not None and u["requests"] >= 1 and u["input_tokens"] >= 10 and u["cached_tokens"] == 0, u
answers = u["input_tokens"] // 10
assert u["input_tokens"] == 10 * answers and answers <= u["requests"] and answers <= u["output_tokens"] <= 5 * answers, u
assert job.get("usage") == u, (job.get("usage"), u)
print("job %s: the gateway metered %d requests, %d input and %d output tokens" % (name, u["requests"], u["input_tokens"], u["output_tokens"]))
PY
  cand=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"]["candidate_sha"])' "$agg")
  [ "$(g show "$cand:$name.txt")" = "$name from forge" ] || fail "job $name: candidate lacks the file the agent wrote"
  [ "$(g log -1 --format=%s "$cand")" = "feat: add $name.txt" ] || fail "job $name: commit subject is not the structured answer's"
  [ "$(g rev-parse "$cand^")" = "$base" ] || fail "job $name: candidate parent is not the base"
  [ "$(g diff --name-only "$base" "$cand")" = "$name.txt" ] || fail "job $name: candidate changes more than $name.txt"
}

agents_check_failed() {
  local agg=$tmp/agg-$1.json
  python3 - "$agg" "$2" "$3" "${4:-}" <<'PY' || fail "job $1: aggregate does not match: $(head -c 600 "$agg")"
import json, sys
a = json.load(open(sys.argv[1]))
n, code, plugin_failed = int(sys.argv[2]), sys.argv[3], sys.argv[4] == "plugin-failed"
assert a["job"]["status"] == "failed", a["job"]
assert len(a["attempts"]) == n, a["attempts"]
for at in a["attempts"]:
    assert at["status"] == "failed" and at["failure_code"] == code, at
    if plugin_failed:
        assert at["evidence"] == [{"phase": "plugin", "reason": "failed"}], at
        assert at.get("candidate_sha") is None, at
PY
}
