#!/usr/bin/env bash
# SECRETS-E2E: distinctive secret values never leave the processes that
# must hold them, through a real Gate, Worker, testdata/edit-plugin and a
# synthetic repository.
#
#  Secrets: the owner and worker tokens; a canary in an allowlisted
#  variable the scoped checks get (FORGE_CHECK_CANARY); and, in a
#  repository file the checks print, secret-looking strings (sk-live-…,
#  ghp_…, AKIA…) next to a PEM private key header.
#  1. A coding job whose checks print all of them and pass; its plugin is
#     held alive (a FIFO) while /proc is sampled: the cmdline and environ
#     of the Gate, the Worker and every descendant (plugin, git, checks),
#     every few milliseconds for the whole run.
#  2. A coding job whose check prints them and fails (the evidence keeps
#     only [REDACTED]).
#  3. A coding job whose plugin writes the Worker token, base64-encoded,
#     into a file: it fails secret_in_candidate on its only attempt, its
#     one record names the file, and no candidate exists.
#  4. Every API answer is kept: submit, job, events, aggregate, readyz,
#     the debug routes (jobs, workers, job, live activity while the plugin
#     runs, the static page) and 401 answers to a presented Worker token.
# Then: zero hits of any value in the SQLite file and its WAL (copied while
# the Gate runs, and after it stops), the Gate and Worker logs, every API
# answer, the evidence, the candidate commit, and in any cmdline; in
# environ only the Gate (both tokens), the Worker (its token, the check
# canary) and the scoped checks (the check canary) hold one; no worktree
# or runtime directory is left.
# Final line: SECRETS-E2E PASS.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
cd "$(dirname "$0")/.."

e2e_setup secrets-e2e
mkdir "$tmp/api"
e2e_build forge-gate forge-worker forge
go build -o "$bin/edit-plugin" ./testdata/edit-plugin || fail "build edit-plugin"

FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_WORKER_TOKEN=worker-$(rand)
FORGE_CHECK_CANARY=sk-live-env-$(rand)
export FORGE_OWNER_TOKEN FORGE_WORKER_TOKEN FORGE_CHECK_CANARY
repo_canary=sk-live-repo-$(rand)
ghp=ghp_$(rand)$(rand | cut -c1-4)
akia=AKIA$(rand | tr 'a-f' 'A-F' | cut -c1-16)
mark=secrets-check-$(rand | cut -c1-8)
python3 - "$tmp/secrets.json" "$repo_canary" "$ghp" "$akia" <<'PY'
import json, os, sys
json.dump({"FORGE_OWNER_TOKEN": os.environ["FORGE_OWNER_TOKEN"], "FORGE_WORKER_TOKEN": os.environ["FORGE_WORKER_TOKEN"],
           "FORGE_CHECK_CANARY": os.environ["FORGE_CHECK_CANARY"], "REPO_CANARY": sys.argv[2], "GHP": sys.argv[3],
           "AKIA": sys.argv[4]}, open(sys.argv[1], "w"))
PY

mkdir -m 0700 "$tmp/repos" "$tmp/worktrees" "$tmp/runtime" "$tmp/state"
repo=$tmp/repos/demo
GIT_CONFIG_GLOBAL=/dev/null git init -q -b main "$repo"
printf 'token=%s\ngithub=%s\naws=%s\n' "$repo_canary" "$ghp" "$akia" >"$repo/credentials.txt"
seed_commit base
base=$(g rev-parse HEAD)

exec_policy='{"plugin_id":"edit","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"5s","plugin_output_bytes":1048576,"check_output_bytes":4096,"git_output_bytes":1048576}'
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:0","database":"$tmp/state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"20s","retry_base":"1s","max_attempts":1},
 "default_execution":$exec_policy,
 "workers":[{"id":"worker-1","pool":"local","token_env":"FORGE_WORKER_TOKEN","concurrency":1}],
 "repositories":[{"id":"demo","default_branch":"main","worker_pool":"local","execution":$exec_policy}]}
EOF
# Each daemon gets only what it must hold.
env -u FORGE_CHECK_CANARY "$bin/forge-gate" -config "$tmp/gate.json" 2>"$tmp/gate.log" &
gate_pid=$!
pids+=("$gate_pid")
addr=$(wait_log "$tmp/gate.log" 'e.get("msg") == "listening"' | field addr) || fail "Gate did not start"
export FORGE_GATE_URL="http://$addr"
cat >"$tmp/worker.json" <<EOF
{"version":1,"gate_url":"ws://$addr","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"300ms","concurrency":1,
 "repository_roots":["$tmp/repos"],"worktree_root":"$tmp/worktrees","runtime_root":"$tmp/runtime",
 "repositories":[{"id":"demo","path":"$repo"}],
 "plugins":[{"id":"edit","argv":["$bin/edit-plugin"]}],
 "environment_allowlist":["PATH","FORGE_CHECK_CANARY"],"check_environment_allowlist":["PATH","FORGE_CHECK_CANARY"],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":4096,"git_output_bytes":1048576}}
EOF
e2e_cgroup worker
(in_cgroup "$cgroup_dir" env -u FORGE_OWNER_TOKEN "$bin/forge-worker" -config "$tmp/worker.json" 2>"$tmp/worker.log") &
worker_pid=$!
pids+=("$worker_pid")
wait_log "$tmp/worker.log" 'e.get("msg") == "connected"' >/dev/null || fail "Worker did not connect"

python3 testdata/secrets/procsample.py "$tmp/stop" "$tmp/procs.json" "$tmp/secrets.json" "$mark" gate="$gate_pid" worker="$worker_pid" &
sampler=$!
pids+=("$sampler")

api() { # $1: name to keep the answer under; $2: path; $3: token (default owner)
  python3 - "$addr" "$2" "${3:-$FORGE_OWNER_TOKEN}" >"$tmp/api/$1" <<'PY'
import sys, urllib.request, urllib.error
addr, path, tok = sys.argv[1:4]
req = urllib.request.Request("http://%s%s" % (addr, path), headers={"Authorization": "Bearer " + tok})
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        sys.stdout.buffer.write(b"%d " % r.status + r.read())
except urllib.error.HTTPError as e:
    sys.stdout.buffer.write(b"%d " % e.code + e.read())
PY
}

# shellcheck disable=SC2016 # $FORGE_CHECK_CANARY is expanded by the check's shell
print_secrets='cat credentials.txt; echo "env=$FORGE_CHECK_CANARY"; echo "-----BEGIN RSA PRIVATE KEY-----"; sleep 0.3'
submit() { # $1: name; $2: instruction; $3: tests JSON; prints the job id
  python3 - "$base" "$2" "$3" >"$tmp/task-$1.json" <<'PY'
import json, sys
print(json.dumps({"repository_id": "demo", "base_sha": sys.argv[1], "instruction": sys.argv[2], "tests": json.loads(sys.argv[3])}))
PY
  "$bin/forge" submit -file "$tmp/task-$1.json" >"$tmp/api/submit-$1" || fail "submit $1"
  field id <"$tmp/api/submit-$1"
}

# 1. A passing job; the plugin waits on a loopback rendezvous (reachable
# from inside the Worker's sandbox) while the API is read: its first
# connection says it started, its second is held until release exists.
# A sandboxed program connects only to sockets of its own or to those of
# another account that every account may use (docs/sandbox.md): the
# rendezvous socket is uid 65534's, in a directory every account may
# search (the Worker may run as root).
chmod 0711 "$tmp"
mkdir -m 0755 "$tmp/rv"
python3 - "$tmp" <<'PY' &
import os, socket, sys, time
tmp = sys.argv[1]
path = tmp + "/rv/rendezvous.sock"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # a sandbox opens no TCP connection but to the gateway
s.bind(path)
os.chmod(path, 0o777)
os.chown(path, 65534, 65534)
s.listen(2)
open(tmp + "/rendezvous.addr.tmp", "w").write(path)
os.rename(tmp + "/rendezvous.addr.tmp", tmp + "/rendezvous.addr")
c, _ = s.accept()
c.close()
open(tmp + "/started", "w").close()
c, _ = s.accept()
while not os.path.exists(tmp + "/release"):
    time.sleep(0.02)
c.close()
PY
pids+=($!)
for _ in $(seq 200); do [ -s "$tmp/rendezvous.addr" ] && break; sleep 0.05; done
rendezvous=unix:$(cat "$tmp/rendezvous.addr") || fail "no rendezvous"
tests=$(python3 -c 'import json,sys; print(json.dumps([["sh","-c",sys.argv[1] + " # " + sys.argv[2]], ["sh","-c",sys.argv[1] + "; exit 0 # " + sys.argv[2]]]))' "$print_secrets" "$mark")
job1=$(submit ok "signal $rendezvous
await $rendezvous
write notes.txt secrets e2e
subject chore: add notes" "$tests")
for _ in $(seq 600); do [ -e "$tmp/started" ] && break; sleep 0.05; done
[ -e "$tmp/started" ] || fail "the plugin never started"
sleep 0.3 # the plugin and its Worker lane are sampled meanwhile
api activity-running "/v1/debug/jobs/$job1/activity"
api debug-job-running "/v1/debug/jobs/$job1"
api debug-workers-running /v1/debug/workers
: >"$tmp/release"
"$bin/forge" wait -timeout 60s -poll 100ms "$job1" >"$tmp/api/wait-ok" || fail "job 1 did not succeed"
python3 - "$tmp/api/wait-ok" <<'PY' || fail "job 1 aggregate"
import json, sys
a = json.load(open(sys.argv[1]))
assert a["job"]["status"] == "succeeded", a["job"]
ev = a["attempts"][0]["evidence"]
assert [r["reason"] for r in ev if r["phase"] == "scoped_check"] == ["passed", "passed"], ev
PY

# 2. A failing check that prints the same secrets.
fail_tests=$(python3 -c 'import json,sys; print(json.dumps([["sh","-c",sys.argv[1] + "; exit 3 # " + sys.argv[2]]]))' "$print_secrets" "$mark")
job2=$(submit fail "write notes.txt secrets e2e failing" "$fail_tests")
"$bin/forge" wait -timeout 60s -poll 100ms "$job2" >"$tmp/api/wait-fail" 2>>"$tmp/forge.log" && fail "job 2 succeeded"
python3 - "$tmp/api/wait-fail" <<'PY' || fail "job 2 aggregate"
import json, sys
a = json.load(open(sys.argv[1]))
assert a["job"]["failure_code"] == "scoped_test_failed", a["job"]
loud = a["attempts"][0]["evidence"][-1]
assert loud["output"] == "[REDACTED]" and loud["output_redacted"] is True, loud
PY

# 3. The plugin plants the Worker token (base64) in the change: the
# Worker refuses it before any check or commit.
leak=$(printf '%s' "$FORGE_WORKER_TOKEN" | base64 -w0)
job3=$(submit leak "write notes.txt fine
write leak.txt $leak" '[["true"]]')
"$bin/forge" wait -timeout 60s -poll 100ms "$job3" >"$tmp/api/wait-leak" 2>>"$tmp/forge.log" && fail "job 3 succeeded"
python3 - "$tmp/api/wait-leak" <<'PY' || fail "job 3 aggregate"
import json, sys
a = json.load(open(sys.argv[1]))
assert a["job"]["failure_code"] == "secret_in_candidate" and not a["job"].get("candidate_sha"), a["job"]
assert len(a["attempts"]) == 1, a["attempts"]
assert a["attempts"][0]["evidence"] == [{"phase": "workspace_validation", "reason": "secret_in_candidate", "path": "leak.txt"}], a["attempts"][0]
PY
[ -z "$(g for-each-ref "refs/agent-forge/candidates/$job3")" ] || fail "job 3 left a candidate"

# 4. Every other API answer.
for j in "$job1" "$job2" "$job3"; do
  api "job-$j" "/v1/jobs/$j"
  api "events-$j" "/v1/jobs/$j/events"
  api "aggregate-$j" "/v1/jobs/$j/aggregate"
  api "debug-job-$j" "/v1/debug/jobs/$j"
  api "activity-$j" "/v1/debug/jobs/$j/activity"
  api "worker-token-$j" "/v1/jobs/$j/aggregate" "$FORGE_WORKER_TOKEN"
  grep -q '^401 ' "$tmp/api/worker-token-$j" || fail "a Worker token read a job"
done
api debug-jobs /v1/debug/jobs
api debug-workers /v1/debug/workers
api debug-page /debug/
api readyz /readyz
api wrong-owner /v1/debug/jobs "$FORGE_WORKER_TOKEN"
cp "$tmp/state/forge.db" "$tmp/running.db"
[ -f "$tmp/state/forge.db-wal" ] && cp "$tmp/state/forge.db-wal" "$tmp/running.db-wal"

touch "$tmp/stop"
wait "$sampler" || fail "the /proc sampler failed"
stop Worker "$worker_pid"
stop Gate "$gate_pid"
pids=()
cand=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"]["candidate_sha"])' "$tmp/api/wait-ok")
g show "$cand" >"$tmp/candidate.txt"
[ -z "$(ls -A "$tmp/worktrees")" ] || fail "worktree left behind"
[ -z "$(ls -A "$tmp/runtime")" ] || fail "runtime directory left behind"

# Zero hits where nothing may hold a secret.
files=("$tmp"/state/* "$tmp"/running.db* "$tmp"/*.log "$tmp"/api/* "$tmp/candidate.txt")
python3 - "$tmp/secrets.json" "$tmp/procs.json" "${files[@]}" <<'PY' || fail "a secret escaped (above)"
import json, os, sys
secrets = json.load(open(sys.argv[1]))
procs = json.load(open(sys.argv[2]))
bad = []
for path in sys.argv[3:]:
    data = open(path, "rb").read()
    for n, v in secrets.items():
        if v.encode() in data:
            bad.append("%s holds %s" % (os.path.basename(path), n))
may = {"gate": {"FORGE_OWNER_TOKEN", "FORGE_WORKER_TOKEN"}, "worker": {"FORGE_WORKER_TOKEN", "FORGE_CHECK_CANARY"}}
roles = {"gate": 0, "worker": 0, "reaper": 0, "plugin": 0, "check": 0, "git": 0, "other": 0}
for p in procs["procs"]:
    if p["in_cmdline"]:
        bad.append("cmdline of %s (%s) holds %s" % (p["argv0"], p["root"], p["in_cmdline"]))
    if p["is_root"]:
        role = p["root"]
        allowed = may[role]
    elif p["check"]:
        role, allowed = "check", {"FORGE_CHECK_CANARY"}
    else:
        role = {"edit-plugin": "plugin", "git": "git", "forge-worker": "reaper"}.get(p["argv0"], "other")
        allowed = set()
    roles[role] += 1
    extra = set(p["in_environ"]) - allowed
    if extra:
        bad.append("environ of %s (%s, %s) holds %s" % (p["argv0"], role, p["cmd"][:40], sorted(extra)))
for need in ("gate", "worker", "plugin", "check", "git"):
    if roles[need] == 0:
        bad.append("no %s process was sampled" % need)
print("secrets-e2e: %d /proc samples over %s processes; %d files searched" %
      (procs["samples"], ", ".join("%s=%d" % kv for kv in roles.items()), len(sys.argv) - 3))
for b in bad:
    print("LEAK: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
echo "SECRETS-E2E PASS"
