#!/usr/bin/env bash
# HOSTILE-AGENT-E2E: the agent's seat played hostile (testdata/hostile-agent)
# through a real Gate and Worker that run as ONE unprivileged account (the
# README's "Running it yourself"): as root the script runs them, and
# everything they start, as uid/gid 65534 (setpriv), with that account
# owning their files; otherwise as the calling user.
#
#  1. Gate (file database, an env file holding both tokens, a stand-in App
#     private key in its state directory) and a Worker (a static repository
#     registration; the hostile agent as its only plugin) start; a collector
#     listens on a UNIX socket for the agent's reports and on an abstract
#     UNIX socket of its own (a target for the agent).
#  2. Sandboxed (worker.json without "sandbox": Landlock): a text job and a
#     coding job whose scoped check is the hostile agent too. Every try of
#     the plugin and of the check (testdata/hostile-agent lists them:
#     /proc/<pid>/environ|mem|fd|cmdline of every process outside its tree,
#     ptrace of the forge processes, signals, abstract sockets, reading the
#     Gate's database, state, env files, key, the Worker's config and roots,
#     writing outside its workspace, symlinks and hardlinks out, changing
#     the metadata (mode, owner, times, attributes) of everything it was
#     told about and of its repository's files by every route, through an
#     io_uring (an attribute, an ACL that is an effective chmod 0666), set-ID
#     bits, its own roots, the fs-verity and fscrypt ioctls, the Gate's
#     API without and with anything found, the network: TCP to the
#     collector's listener on loopback and on 198.51.100.7 (an address of
#     lo, not loopback), DNS over UDP to its responder, a TCP Fast Open
#     send, the resolver; chains of setsid hoppers left behind that report
#     themselves when still alive after their invocation ended) is
#     counted; a try reached when it
#     succeeded or when what it read holds a secret (either token, the key).
#     Printed: tried=N reached=0 (required), per source. Besides Gate and
#     Worker (non-dumpable) a decoy of the same account, dumpable, with a
#     secret in its environment, stands for any process the sandbox alone
#     must keep the agent from.
#  3. The public-source layout (DECISIONS 15), in the same phase: the
#     Gate clones octo/pub from an offline github.com (scripts/lib/netns.sh:
#     the whole script runs in a private network and mount namespace) and
#     the Worker (a "source":"gate" registration) fetches the base into its
#     source cache <runtime_root>/sources/pub.git; the agent, as plugin and
#     check of that job, runs in the attempt's private container (git/ and
#     tree/, borrowing the cache's objects) and also tries the cache
#     (read its config and refs; create files in it, its objects, refs,
#     hooks, sources/; open its config, refs and packs for writing; chmod),
#     its own repository's alternates pointed at every other object
#     directory it can name, the other attempt's container (two such jobs
#     run at once; their plugins meet at the collector's barriers, which
#     name each one's container to the other) and a stand-in container
#     beside them (same owner and mode, a secret inside), the
#     Gate's public root and prepared repository, and the Worker's bundle
#     routes (GET /v1/worker/source, PUT /v1/worker/candidate) with
#     whatever it found, replaying a lane's working binding with other
#     leases. Printed per layout: tried=N reached=0 (required); the
#     cache's chmod too (the sandbox's metadata guard, docs/sandbox.md).
#  4. The same with "sandbox": "none": reached > 0 is required (each kind
#     of check can fail), and what was reached is printed per kind; in the
#     public-source layout the agent then reads and writes the cache and
#     the other container, reads the Gate's prepared repository, fetches
#     its base and stores a candidate of its own with the Worker token it
#     read (that job then fails: its candidate ref is taken). Replaying
#     another lease stays refused (the Gate's lease binding, not the
#     sandbox): required reached=0 there too.
#  5. In each phase, before the jobs above: per layout a coding job whose
#     agent makes its git metadata (the HEAD its .git names, that git
#     directory's config and a hook; on a static registration the
#     repository's config and a hook) 1 TiB sparse files, and one whose
#     agent makes a file of its tree one (testdata/hostile-agent/sparse.go;
#     sandboxed, the plants the sandbox refuses are counted as refused).
#     Counted: sparse-job (reached unless the job failed) and
#     sparse-worker (reached if the Worker died); the jobs above then
#     run on the same Worker. Sandbox or not, reached=0 is required. The
#     races of issue 34 (an evil git config renamed in after validation
#     read it, the tree swapped for a link during commit and cleanup)
#     run as Go tests through the real coding executor with a racer
#     outside the sandbox: pkg/worker/hostile_race_linux_test.go
#     (docs/sandbox.md).
# Final line: HOSTILE-AGENT-E2E PASS.
#
# Standalone parts, for running the agent under other deployments (the
# installed units): build it with `go build -o X ./testdata/hostile-agent`,
# register X as a plugin (and X check as a scoped check) with HOSTILE_REPORT
# (and optionally HOSTILE_GATE, HOSTILE_READ, HOSTILE_WRITE: colon-separated
# absolute paths) in both environment allowlists and the policy, then
#   scripts/hostile-agent-e2e.sh collect ADDR_FILE REPORT_FILE
# runs the collector (its address goes to ADDR_FILE), and
#   scripts/hostile-agent-e2e.sh count REPORT_FILE SECRET...
# prints the counts and exits 0 only when nothing was reached.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
# shellcheck source-path=SCRIPTDIR source=lib/netns.sh
source "$(dirname "$0")/lib/netns.sh"

# collect ADDR_FILE REPORT_FILE: accept reports (JSON lines) on a UNIX
# socket beside ADDR_FILE (its path goes to ADDR_FILE) until killed; also
# hold an abstract UNIX socket open as a target.
collect() {
  exec python3 - "$1" "$2" <<'PY'
import json, os, socket, sys, threading
addr_file, out = sys.argv[1], sys.argv[2]
lock = threading.Lock()
abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
abstract.bind("\0forge-hostile-agent-e2e-%d" % os.getpid())
abstract.listen(16)
threading.Thread(target=lambda: [abstract.accept()[0].close() for _ in iter(int, 1)], daemon=True).start()
# A pathname UNIX socket beside ADDR_FILE: the sandbox lets the agent
# open no TCP connection but to the Worker's gateway and proxy.
path = os.path.join(os.path.dirname(os.path.abspath(addr_file)), "collector.sock")
if os.path.exists(path):
    os.unlink(path)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o777)
s.listen(16)
with open(addr_file + ".tmp", "w") as f:
    f.write(path)
os.rename(addr_file + ".tmp", addr_file)
# A barrier line {"barrier": NAME, "container": PATH, "parties": N} holds
# the connection until N containers arrived at NAME (or 30 s passed), then
# answers {"peers": [the others' containers]} and logs the release.
barriers, cond, proxies = {}, threading.Condition(), {}
def barrier(c, req):
    name, parties = str(req["barrier"]), int(req["parties"])
    with cond:
        b = barriers.setdefault(name, {"in": [], "gen": 0})
        gen = b["gen"]
        b["in"].append(str(req["container"]))
        proxies[str(req["container"])] = str(req.get("proxy", ""))
        if len(b["in"]) >= parties:
            b["out"], b["in"], b["gen"] = b["in"], [], gen + 1
            cond.notify_all()
        else:
            cond.wait_for(lambda: b["gen"] != gen, timeout=30)
            if b["gen"] == gen:  # timed out: release whoever is there
                b["out"], b["in"], b["gen"] = b["in"], [], gen + 1
                cond.notify_all()
        arrived = b["out"]
    peers = [p for p in arrived if p != req["container"]]
    others = [proxies.get(p, "") for p in peers if proxies.get(p, "")]
    c.sendall((json.dumps({"peers": peers, "proxies": others}) + "\n").encode())
    with lock, open(out + ".barriers", "a") as f:
        f.write(json.dumps({"barrier": name, "arrived": len(arrived)}) + "\n")
# Network stand-ins for the agent's direct tries: a TCP listener saying
# hello on every address (loopback, and FAR_ADDR, an address of lo that is
# not loopback), a UDP responder answering any DNS query. A
# {"targets": 1} line is answered with their addresses.
far = os.environ.get("HOSTILE_FAR_ADDR", "")
tcp = socket.socket()
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind(("0.0.0.0", 0))
tcp.listen(16)
def hello():
    while True:
        c, _ = tcp.accept()
        try:
            c.sendall(b"hello\n")
        except OSError:
            pass
        c.close()
threading.Thread(target=hello, daemon=True).start()
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", 0))
def dns():
    while True:
        q, peer = udp.recvfrom(512)
        udp.sendto(q[:2] + b"\x81\x80" + q[4:], peer)
threading.Thread(target=dns, daemon=True).start()
# A pathname UNIX socket of the Worker's own account (HOSTILE_OWN_UID),
# open to all, saying hello: a stand-in for its per-user service manager
# or session bus, which would start unconfined processes on request.
own_path = os.path.join(os.path.dirname(path), "own-account.sock")
if os.path.exists(own_path):
    os.unlink(own_path)
own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
own.bind(own_path)
os.chmod(own_path, 0o777)
own_uid = int(os.environ["HOSTILE_OWN_UID"])
os.chown(own_path, own_uid, own_uid)
own.listen(16)
def own_hello():
    while True:
        c, _ = own.accept()
        try:
            c.sendall(b"hello\n")
        except OSError:
            pass
        c.close()
threading.Thread(target=own_hello, daemon=True).start()
targets = {"tcp": "127.0.0.1:%d" % tcp.getsockname()[1], "udp": "127.0.0.1:%d" % udp.getsockname()[1],
           "tcp_far": "%s:%d" % (far or "127.0.0.1", tcp.getsockname()[1]), "unix_own": own_path}
with open(addr_file + ".targets.tmp", "w") as f:
    json.dump(targets, f)
os.rename(addr_file + ".targets.tmp", addr_file + ".targets")
def serve(c):
    data = b""
    while True:
        b = c.recv(65536)
        if not b:
            break
        data += b
        if data.startswith(b'{"barrier"') and b"\n" in data:
            line, data = data.split(b"\n", 1)
            barrier(c, json.loads(line))
        if data.startswith(b'{"targets"') and b"\n" in data:
            line, data = data.split(b"\n", 1)
            c.sendall((json.dumps(targets) + "\n").encode())
    c.close()
    with lock, open(out, "ab") as f:
        f.write(data)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
}

# count REPORT SECRET...: tried, reached (the try succeeded, or what it read
# holds a secret); cmdline reads count only by a secret. Exit 1 if reached.
count() {
  python3 - "$@" <<'PY'
import base64, collections, json, sys
report, secrets = sys.argv[1], [s.encode() for s in sys.argv[2:] if s]
tried, reached = collections.Counter(), collections.Counter()
allowed, allowed_ok = collections.Counter(), collections.Counter()
who = collections.Counter()
where = collections.defaultdict(list)
for line in open(report, "rb").read().splitlines():
    t = json.loads(line)
    kind = t["kind"]
    if kind.startswith("allowed-"):  # what the policy allows: no try
        allowed[kind] += 1
        allowed_ok[kind] += 1 if t["ok"] else 0
        continue
    tried[kind] += 1
    who[t["who"]] += 1
    data = base64.b64decode(t.get("data", ""))
    leak = any(s in data for s in secrets)
    if leak or (t["ok"] and kind != "proc-cmdline"):
        reached[kind] += 1
        where[kind].append(t["target"])
for k in sorted(tried):
    print("  %-16s tried=%-5d reached=%d" % (k, tried[k], reached[k]))
    for w in sorted(set(where[k]))[:3]:
        print("      e.g. " + w)
for k in sorted(allowed):
    print("  %-16s used=%-5d worked=%d" % (k, allowed[k], allowed_ok[k]))
print("  by source: " + " ".join("%s=%d" % kv for kv in sorted(who.items())))
print("tried=%d reached=%d" % (sum(tried.values()), sum(reached.values())))
sys.exit(1 if sum(reached.values()) else 0)
PY
}

case "${1:-}" in
collect) shift; collect "$@" ;;
count) shift; count "$@"; exit $? ;;
"") ;;
*) echo "usage: $0 [collect ADDR_FILE REPORT_FILE | count REPORT_FILE SECRET...]" >&2; exit 2 ;;
esac

# The public-source layout needs github.com: the rest of the script runs
# in a private network and mount namespace (modules fetched before).
if [ "${AGENT_FORGE_NETNS:-}" != 1 ]; then
  (cd "$(dirname "$0")/.." && go mod download) || exit 1
  HOSTILE_E2E_UID=$(id -u)
  export HOSTILE_E2E_UID
fi
netns_enter "$@"
cd "$(dirname "$0")/.."

tmp=$(cd "$(mktemp -d)" && pwd -P)
pids=()
e2e_traps
fail() { e2e_fail hostile-agent-e2e "$@"; }

# The one account Gate and Worker share. as_account replaces the shell it
# runs in: use it as `as_account CMD... &`, so $! is CMD's own pid.
if [ "${HOSTILE_E2E_UID:-$(id -u)}" = 0 ]; then
  account=65534
  as_account() { exec setpriv --reuid="$account" --regid="$account" --clear-groups --inh-caps=-all "$@"; }
else
  account=$(id -u)
  as_account() { exec "$@"; }
fi
chmod 0755 "$tmp"
bin=$tmp/bin
mkdir -p "$bin"
e2e_build forge-gate forge-worker forge
go build -o "$bin/hostile-agent" ./testdata/hostile-agent || fail "build hostile-agent"
netns_setup
# shellcheck disable=SC2119 # the git service alone: no App API
netns_start_fake
chmod -R a+rX "$bin"

FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_WORKER_TOKEN=worker-$(rand)
export FORGE_OWNER_TOKEN FORGE_WORKER_TOKEN
key_marker=APP-KEY-$(rand)

mkdir -m 0700 "$tmp/state" "$tmp/repos" "$tmp/worktrees" "$tmp/runtime" "$tmp/home" "$tmp/reports"
printf -- '-----BEGIN RSA PRIVATE KEY-----\n%s\n-----END RSA PRIVATE KEY-----\n' "$key_marker" >"$tmp/state/app-key.pem"
printf 'FORGE_OWNER_TOKEN=%s\nFORGE_WORKER_TOKEN=%s\n' "$FORGE_OWNER_TOKEN" "$FORGE_WORKER_TOKEN" >"$tmp/gate.env"
printf 'FORGE_WORKER_TOKEN=%s\n' "$FORGE_WORKER_TOKEN" >"$tmp/worker.env"
chmod 0600 "$tmp/state/app-key.pem" "$tmp/gate.env" "$tmp/worker.env"
repo=$tmp/repos/demo
GIT_CONFIG_GLOBAL=/dev/null git init -q -b main "$repo"
printf 'demo\n' >"$repo/README.md"
g add -A
GIT_AUTHOR_NAME=Seed GIT_AUTHOR_EMAIL=seed@example.invalid GIT_COMMITTER_NAME=Seed GIT_COMMITTER_EMAIL=seed@example.invalid \
  g commit -q -m base || fail "seed commit"
base=$(g rev-parse HEAD)

# The public-source layout: octo/pub upstream on the offline github.com,
# the Gate's public repository root, the path its prepared repository gets.
source_setup() {
  local w=$tmp/work/pub
  export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
  git init -q -b main "$w"
  printf 'pub\n' >"$w/README"
  git -C "$w" add -A
  GIT_AUTHOR_NAME=Seed GIT_AUTHOR_EMAIL=seed@example.invalid GIT_COMMITTER_NAME=Seed GIT_COMMITTER_EMAIL=seed@example.invalid \
    git -C "$w" commit -q -m first || fail "seed octo/pub"
  git init -q --bare "$fake_git_root/octo/pub.git"
  git -C "$w" push -q "$fake_git_root/octo/pub.git" main || fail "push octo/pub"
  pub_base=$(git -C "$w" rev-parse HEAD)
  pub_url=https://github.com/octo/pub.git
  pub_root=$tmp/public
  mkdir -m 0700 "$pub_root"
  pub_prepared=$pub_root/$(printf %s "$pub_url" | sha256sum | cut -d' ' -f1).git
  unset GIT_CONFIG_GLOBAL GIT_CONFIG_NOSYSTEM
}
source_setup

# An address of this host that is not loopback (on lo: the namespace has
# no other device), for the agent's direct connection beside loopback.
ip addr add 198.51.100.7/32 dev lo || fail "add a non-loopback address"
export HOSTILE_FAR_ADDR=198.51.100.7
# The collector runs as the caller (root in CI): not a target of signals.
HOSTILE_OWN_UID=$account collect "$tmp/collector.addr" "$tmp/reports/current.jsonl" 2>"$tmp/collector.log" &
pids+=($!)
for _ in $(seq 200); do [ -s "$tmp/collector.addr.targets" ] && break; sleep 0.05; done
report_addr=$(cat "$tmp/collector.addr") || fail "collector did not start"
# The policy lets the attempts (plugin and checks) reach the collector's
# listener on its non-loopback address through their CONNECT proxies, and
# nothing else.
far_target=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tcp_far"])' "$tmp/collector.addr.targets") ||
  fail "no collector targets"

envs='["PATH","HOSTILE_REPORT","HOSTILE_READ","HOSTILE_WRITE","HOSTILE_GATE","HOSTILE_GATE_REPOS","HOSTILE_ATTEMPTS","HOSTILE_PEERS"]'
exec_policy='{"plugin_id":"hostile","environment":'$envs',"plugin_timeout":"2m","check_timeout":"2m","git_timeout":"1m","cleanup_timeout":"5s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576,"network_allow":["'$far_target'"],"network_checks":true}'
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:0","database":"$tmp/state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"30s","retry_base":"1s","max_attempts":1},
 "default_execution":$exec_policy,
 "workers":[{"id":"worker-1","pool":"local","token_env":"FORGE_WORKER_TOKEN","concurrency":4}],
 "public_repository_root":"$pub_root","git_executable":"$(readlink -f "$(command -v git)")",
 "repositories":[{"id":"demo","default_branch":"main","worker_pool":"local","execution":$exec_policy},
   {"id":"pub","repository_url":"$pub_url","default_branch":"main","worker_pool":"local","execution":$exec_policy}]}
EOF
chown -R "$account:$account" "$tmp/state" "$tmp/repos" "$tmp/worktrees" "$tmp/runtime" "$tmp/home" \
  "$tmp/gate.env" "$tmp/worker.env" "$tmp/gate.json" "$pub_root"
"$bin/forge-gate" --version >/dev/null || fail "forge-gate does not run"
as_account "$bin/forge-gate" -config "$tmp/gate.json" 2>"$tmp/gate.log" &
gate_pid=$!
pids+=("$gate_pid")
addr=$(wait_log "$tmp/gate.log" 'e.get("msg") == "listening"' | field addr) || fail "Gate did not start"
export FORGE_GATE_URL="http://$addr"

# A decoy: a process of the same account that is not non-dumpable (as a
# child carrying a token would be if it were not protected) and holds a
# secret in its environment. Only the sandbox keeps the agent from it.
cp "$(command -v sleep)" "$bin/forge-decoy"
decoy_token=decoy-$(rand)
(DECOY_TOKEN=$decoy_token as_account "$bin/forge-decoy" 600) &
pids+=($!)

export HOSTILE_REPORT=$report_addr HOSTILE_GATE=$addr
HOSTILE_READ=$(printf '%s:' "$tmp/state" "$tmp/state/forge.db" "$tmp/state/forge.db-wal" "$tmp/state/forge.db-shm" \
  "$tmp/state/app-key.pem" "$tmp/gate.env" "$tmp/worker.env" "$tmp/gate.json" "$tmp/worker.json" \
  "$tmp/runtime" "$tmp/worktrees" "$tmp/repos" "$repo" "$tmp/home" "$tmp")
HOSTILE_WRITE=$(printf '%s:' "$tmp/home" "$tmp/repos" "$repo" "$repo/.git" "$repo/.git/refs/heads" "$repo/.git/hooks" \
  "$tmp/state" "$tmp/runtime" "$tmp/worktrees" "$tmp")
# The public-source layout's targets: the Gate's public root and prepared
# repository, and a stand-in for another attempt's container (decoy_attempt).
HOSTILE_GATE_REPOS=$(printf '%s:' "$pub_root" "$pub_prepared")
decoy_dir=$tmp/worktrees/wt-decoy
HOSTILE_ATTEMPTS=$decoy_dir
# Two public-source jobs at once: their plugins meet at the collector's
# barriers, which name each one's container to the other.
HOSTILE_PEERS=2
export HOSTILE_READ HOSTILE_WRITE HOSTILE_GATE_REPOS HOSTILE_ATTEMPTS HOSTILE_PEERS
attempt_secret=ATTEMPT-$(rand)

# decoy_attempt: another attempt's container as the Worker makes one (0700,
# the account's, git/ a repository, tree/ its workspace), a secret in its
# files. The Worker sweeps wt-* at startup: made once it runs.
decoy_attempt() {
  rm -rf "$decoy_dir"
  mkdir -m 0700 "$decoy_dir"
  GIT_CONFIG_GLOBAL=/dev/null git init -q --template= --separate-git-dir="$decoy_dir/git" "$decoy_dir/tree" || fail "decoy attempt"
  printf 'TOKEN=%s\n' "$attempt_secret" >"$decoy_dir/tree/secret.txt"
  printf '[forge]\n\tsecret = %s\n' "$attempt_secret" >>"$decoy_dir/git/config"
  GIT_CONFIG_GLOBAL=/dev/null git --git-dir="$decoy_dir/git" hash-object -w "$decoy_dir/tree/secret.txt" >/dev/null || fail "decoy object"
  chown -R "$account:$account" "$decoy_dir"
}

# run_phase NAME SANDBOX_FIELD: a Worker with that sandbox, a text job and
# a coding job whose check is the agent; the reports land in NAME.jsonl.
run_phase() {
  local name=$1 sandbox=$2 text coding public j
  : >"$tmp/reports/current.jsonl"
  cat >"$tmp/worker.json" <<EOF
{"version":1,"gate_url":"ws://$addr","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"500ms","concurrency":4,
 "repository_roots":["$tmp/repos"],"worktree_root":"$tmp/worktrees","runtime_root":"$tmp/runtime",
 "repositories":[{"id":"demo","path":"$repo"},{"id":"pub","source":"gate"}],
 "plugins":[{"id":"hostile","argv":["$bin/hostile-agent"]}],
 "environment_allowlist":$envs,"check_environment_allowlist":$envs,$sandbox
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
EOF
  chown "$account:$account" "$tmp/worker.json"
  e2e_cgroup "worker-$name" "$account"
  (enter_cgroup "$cgroup_dir" && as_account "$bin/forge-worker" -config "$tmp/worker.json" 2>"$tmp/worker-$name.log") &
  worker_pid=$!
  pids+=("$worker_pid")
  wait_log "$tmp/worker-$name.log" "e.get('msg') == 'started'" >/dev/null || fail "$name: Worker did not start"
  decoy_attempt
  sparse_round sparse-tree
  sparse_round sparse-meta
  kill -0 "$worker_pid" 2>/dev/null && alive=true || alive=false
  printf '{"who":"plugin","kind":"sparse-worker","target":"the Worker after the sparse jobs","ok":%s}\n' \
    "$([ "$alive" = true ] && echo false || echo true)" >>"$tmp/reports/current.jsonl"
  [ "$alive" = true ] || fail "$name: the Worker died of the sparse jobs: $(tail -c 2000 "$tmp/worker-$name.log")"
  text=$(printf '%s\n' '{"input":"hostile"}' | "$bin/forge" submit -file - | field id) || fail "$name: submit text"
  python3 - "$base" "$bin/hostile-agent" >"$tmp/task.json" <<'PY'
import json, sys
print(json.dumps({"repository_id": "demo", "base_sha": sys.argv[1], "instruction": "be hostile",
                  "tests": [[sys.argv[2], "check"]]}))
PY
  coding=$("$bin/forge" submit -file "$tmp/task.json" | field id) || fail "$name: submit coding"
  python3 - "$pub_base" "$bin/hostile-agent" >"$tmp/task-pub.json" <<'PY'
import json, sys
print(json.dumps({"repository_id": "pub", "base_sha": sys.argv[1], "instruction": "be hostile",
                  "tests": [[sys.argv[2], "check"]]}))
PY
  public=()
  for _ in 1 2; do
    public+=("$("$bin/forge" submit -file "$tmp/task-pub.json" | field id)") || fail "$name: submit public-source coding"
  done
  "$bin/forge" wait -timeout 120s -poll 100ms "$text" >"$tmp/agg-$name-text.json" || fail "$name: text job did not succeed"
  "$bin/forge" wait -timeout 120s -poll 100ms "$coding" >"$tmp/agg-$name-coding.json" || fail "$name: coding job did not succeed"
  # Unconfined, the agent stores a candidate of its own first: the job's
  # own candidate is then refused and the job fails; it must end.
  for j in "${public[@]}"; do
    if ! "$bin/forge" wait -timeout 120s -poll 100ms "$j" >"$tmp/agg-$name-public.json" 2>"$tmp/wait-$name-public.err"; then
      [ "$name" = none ] || fail "$name: public-source job did not succeed: $(head -c 2000 "$tmp/agg-$name-public.json")"
      python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["job"]["status"] == "failed"' "$tmp/agg-$name-public.json" ||
        fail "$name: public-source job did not end: $(head -c 2000 "$tmp/agg-$name-public.json")"
    fi
  done
  stop Worker "$worker_pid"
  # A survivor reports itself 1.5 s after its invocation's end: the last
  # ones have to have had the time (testdata/hostile-agent/survivor.go).
  sleep 2
  # One report file per layout: public-source attempts mark theirs.
  grep -v '"layout":"gate"' "$tmp/reports/current.jsonl" >"$tmp/reports/$name.jsonl" || true
  grep '"layout":"gate"' "$tmp/reports/current.jsonl" >"$tmp/reports/$name-source.jsonl" || true
  python3 - "$tmp/reports/$name.jsonl" "$tmp/reports/$name-source.jsonl" <<'PY' || fail "$name: the plugin and the check did not both report in both layouts"
import json, sys
for f in sys.argv[1:]:
    who = {json.loads(l)["who"] for l in open(f) if l.strip()}
    assert who == {"plugin", "check"}, (f, who)
PY
  # Both plugins met twice, and each tried the other's real container.
  python3 - "$tmp/reports/current.jsonl.barriers" "$tmp/reports/$name-source.jsonl" "$tmp/worktrees/" "$decoy_dir" <<'PY' ||
import json, sys
bars = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()[-4:]]
assert [(b["barrier"], b["arrived"]) for b in bars] == [("start", 2)] * 2 + [("end", 2)] * 2, bars
real = {t["target"] for t in map(json.loads, open(sys.argv[2]))
        if t["kind"] == "attempt-read" and t["target"].startswith(sys.argv[3]) and not t["target"].startswith(sys.argv[4])}
assert real, "no real container tried"
PY
    fail "$name: the two public-source plugins did not meet, or did not try each other's container"
}

# sparse_round INSTRUCTION: one coding job in each layout whose agent
# makes its git metadata (sparse-meta) or a file of its tree
# (sparse-tree) 1 TiB sparse files (testdata/hostile-agent/sparse.go),
# the two at once. The instructions run one after the other: sparse-meta
# plants the static repository's shared files, which a concurrent
# attempt on it would see. A sparse-job line per job: reached unless the
# job failed.
sparse_round() {
  local instr=$1 i status layout ids=() repos=(demo pub) bases=("$base" "$pub_base")
  for i in 0 1; do
    python3 -c 'import json, sys; print(json.dumps({"repository_id": sys.argv[1], "base_sha": sys.argv[2], "instruction": sys.argv[3]}))' \
      "${repos[$i]}" "${bases[$i]}" "$instr" >"$tmp/task-sparse.json"
    ids+=("$("$bin/forge" submit -file "$tmp/task-sparse.json" | field id)") || fail "submit $instr"
  done
  for i in 0 1; do
    "$bin/forge" wait -timeout 120s -poll 100ms "${ids[$i]}" >"$tmp/agg-sparse.json" 2>/dev/null || true
    status=$(python3 -c 'import json, sys; j = json.load(open(sys.argv[1]))["job"]; print(j["status"] + "/" + (j.get("failure_code") or ""))' "$tmp/agg-sparse.json") ||
      fail "$instr: no aggregate for ${repos[$i]}"
    layout=""
    [ "${repos[$i]}" = pub ] && layout=',"layout":"gate"'
    printf '{"who":"plugin","kind":"sparse-job","target":"%s %s %s","ok":%s%s}\n' "${repos[$i]}" "$instr" "$status" \
      "$(case $status in failed/*) echo false ;; *) echo true ;; esac)" "$layout" >>"$tmp/reports/current.jsonl"
  done
}

secrets=("$FORGE_OWNER_TOKEN" "$FORGE_WORKER_TOKEN" "$key_marker" "$decoy_token" "$attempt_secret")
# The network around the Worker's gateway (net.go): direct TCP to a
# loopback port and to a non-loopback address, DNS over UDP, TCP Fast Open,
# a UNIX socket of the Worker's own account (a user manager's stand-in);
# beside them (not required to reach unconfined) a CONNECT through the
# attempt's proxy to a host its policy does not list (the proxy refuses it
# either way) and, in the public-source layout, the other attempt's proxy.
net_kinds="net-tcp-loopback net-tcp-far net-udp-dns net-fastopen net-unix-own-account"
source_kinds="cache-read cache-write cache-chmod alternates attempt-read attempt-write gate-repo-read gate-repo-write worker-source worker-candidate"

# 2. Sandboxed (the default).
run_phase sandboxed ""
grep -q '"msg":"sandbox","sandbox":"landlock"' "$tmp/worker-sandboxed.log" || fail "the Worker did not log its Landlock sandbox"
echo "hostile-agent-e2e: sandboxed (Landlock, the default), Gate and Worker as uid $account:"
count "$tmp/reports/sandboxed.jsonl" "${secrets[@]}" >"$tmp/count-sandboxed.out" || {
  cat "$tmp/count-sandboxed.out"
  fail "the sandboxed agent reached something"
}
cat "$tmp/count-sandboxed.out"
tried=$(sed -n 's/^tried=\([0-9]*\) .*/\1/p' "$tmp/count-sandboxed.out")
[ "$tried" -ge 50 ] || fail "only $tried tries"
meta_kinds="meta-chmod meta-utimes meta-xattr meta-symlink meta-procfd meta-dirfd meta-emptypath meta-fd"
# What the guard refuses beyond the plain calls (guard.go): io_uring's
# setxattr and ACL, set-ID bits, the roots themselves, verity and fscrypt.
meta_kinds="$meta_kinds meta-uring-xattr meta-uring-acl meta-setuid meta-setgid meta-root meta-verity meta-fscrypt"
[ "$(uname -m)" = x86_64 ] && meta_kinds="$meta_kinds meta-i386"
for kind in proc-environ proc-mem proc-fd signal ptrace abstract-socket read list write symlink hardlink gate-no-token \
  survivor $meta_kinds meta-chown sparse-plant sparse-job sparse-worker $net_kinds net-resolve; do
  grep -q "^  $kind " "$tmp/count-sandboxed.out" || fail "no $kind try"
done
# What the sandbox and the proxy refused is in the coding attempt's
# evidence: a network record, by host and port (the collector's listener
# among them), nothing else of the tries.
python3 - "$tmp/agg-sandboxed-coding.json" "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tcp"])' "$tmp/collector.addr.targets")" <<'PY' ||
import json, sys
agg, target = json.load(open(sys.argv[1])), sys.argv[2]
recs = [r for a in agg["attempts"] for r in a.get("evidence", []) if r["phase"] == "network"]
assert len(recs) == 1, recs
r = recs[0]
assert r["reason"] == "refused" and r["refused_count"] >= len(r["refused"]) >= 2, r
dests = {"%s:%d" % (d["host"], d["port"]) for d in r["refused"]}
assert target in dests, (target, dests)
print("hostile-agent-e2e: the coding attempt's evidence: %d refused connections, %d destinations kept" % (r["refused_count"], len(r["refused"])))
PY
  fail "the coding attempt's evidence holds no network record naming the refused destinations"
# The proxy works for what the policy allows, from the plugin and the check.
grep -Eq "^  allowed-proxy +used=[1-9][0-9]* +worked=[1-9]" "$tmp/count-sandboxed.out" ||
  fail "the attempt's proxy did not reach the host its policy allows"
echo "hostile-agent-e2e: sandboxed, public-source layout (source cache, attempt container, the Gate's bundle routes):"
count "$tmp/reports/sandboxed-source.jsonl" "${secrets[@]}" >"$tmp/count-sandboxed-source.out" || {
  cat "$tmp/count-sandboxed-source.out"
  fail "the sandboxed agent reached something in the public-source layout"
}
cat "$tmp/count-sandboxed-source.out"
for kind in $source_kinds proc-environ read write sparse-plant sparse-job $net_kinds net-proxy-refused net-other-proxy; do
  grep -q "^  $kind " "$tmp/count-sandboxed-source.out" || fail "public-source layout: no $kind try"
done
grep -Eq "^  allowed-proxy +used=[1-9][0-9]* +worked=[1-9]" "$tmp/count-sandboxed-source.out" ||
  fail "public-source layout: the attempt's proxy did not reach the host its policy allows"

# 3. Unconfined: the same agent reaches things.
run_phase none '"sandbox":"none",'
grep -q '"sandbox":"none"' "$tmp/worker-none.log" || fail "the Worker did not log that it runs unconfined"
echo "hostile-agent-e2e: \"sandbox\": \"none\" (each check can fail):"
if count "$tmp/reports/none.jsonl" "${secrets[@]}" >"$tmp/count-none.out"; then
  cat "$tmp/count-none.out"
  fail "with sandbox none the agent reached nothing: the checks cannot fail"
fi
cat "$tmp/count-none.out"
for kind in proc-environ proc-mem proc-fd ptrace read write signal gate-replay $meta_kinds $net_kinds; do
  grep -Eq "^  $kind +tried=[0-9]+ +reached=[1-9]" "$tmp/count-none.out" || fail "unconfined, $kind reached nothing"
done
echo "hostile-agent-e2e: \"sandbox\": \"none\", public-source layout:"
if count "$tmp/reports/none-source.jsonl" "${secrets[@]}" >"$tmp/count-none-source.out"; then
  cat "$tmp/count-none-source.out"
  fail "public-source layout, with sandbox none the agent reached nothing: the checks cannot fail"
fi
cat "$tmp/count-none-source.out"
for kind in cache-read cache-write cache-chmod alternates attempt-read attempt-write gate-repo-read gate-repo-write worker-source worker-candidate net-other-proxy; do
  grep -Eq "^  $kind +tried=[0-9]+ +reached=[1-9]" "$tmp/count-none-source.out" || fail "unconfined, public-source layout: $kind reached nothing"
done
# The Gate, not the sandbox, binds a bundle request to the lane's current
# lease: even with the Worker token and a working lane and generation,
# every other lease is refused.
grep -Eq "^  worker-replay +tried=[1-9][0-9]* +reached=0" "$tmp/count-none-source.out" ||
  fail "unconfined, public-source layout: replaying another lease was not tried, or reached"
# Sparse files are the Worker's to survive, sandbox or not: every such
# job fails, the Worker lives on (run_phase), in both layouts.
if ! grep -Eq "^  sparse-job +tried=2 +reached=0" "$tmp/count-none.out" ||
  ! grep -Eq "^  sparse-job +tried=2 +reached=0" "$tmp/count-none-source.out" ||
  ! grep -Eq "^  sparse-worker +tried=1 +reached=0" "$tmp/count-none.out"; then
  fail "unconfined: a sparse job did not fail, or the Worker did not survive it"
fi
# The proxy, not the sandbox, checks the host a CONNECT names.
grep -Eq "^  net-proxy-refused +tried=[1-9][0-9]* +reached=0" "$tmp/count-none.out" ||
  fail "unconfined: a CONNECT to a host the policy does not list was not tried, or reached"

stop Gate "$gate_pid"
echo "HOSTILE-AGENT-E2E PASS"
