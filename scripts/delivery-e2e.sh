#!/usr/bin/env bash
# End-to-end test of the Gate's automatic delivery: production forge-gate,
# forge-worker and forge, unmodified, against https://github.com and
# https://api.github.com served by pkg/githubfake inside a private network
# and mount namespace (scripts/lib/netns.sh). The repository is a public
# source (repository_url); gate.json has the delivery section.
#
#  1. merged: submit -> delivering -> branch, PR, CI of the exact candidate,
#     merge; the job succeeds, main on GitHub is the merge commit whose
#     first parent is the old main and second parent the candidate.
#  2. CI fails: the job fails with ci_failed, no merge is asked for, main
#     is unchanged.
#  3. no workflow run ever starts: ci_no_runs after no_runs_grace, no merge.
#  4. the PR-creation answer is lost: the job succeeds with exactly one PR.
#  5. the Gate is SIGKILLed in each delivery phase in turn (push,
#     pull_request, ci, merge) and restarted: exactly one branch, one PR and
#     one merge; the job succeeds.
#  6. no installation token and no line of the App key appears in the
#     SQLite files, the Gate and Worker logs, any API answer the CLI
#     printed, or the fake's request log.
# And GitHub's behaviour of issue 26: a candidate changing
# .github/workflows is merged (its tokens carry workflows write); a ruleset
# refusing forge/* ends push_rejected; a candidate holding the owner token
# (base64) ends secret_in_candidate with no push; a remote whose default branch moved
# past the base gets a push of a few objects only (printed); a quickly
# skipped push workflow beside a slower pull_request workflow is merged
# only after the pull_request run succeeded; while a push stalls, no git
# process holds the token in /proc/<pid>/environ or cmdline, and a
# SIGKILLed Gate leaves no git running (the reaper).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
# shellcheck source-path=SCRIPTDIR source=lib/netns.sh
source "$(dirname "$0")/lib/netns.sh"
fail() { e2e_fail delivery-e2e "$@"; }

netns_enter "$@"
cd "$(dirname "$0")/.."
tmp=$(cd "$(mktemp -d)" && pwd -P)
chmod 0700 "$tmp"
pids=()
bin=$tmp/bin
e2e_traps
mkdir -p "$bin"
netns_setup
e2e_build forge-gate forge-worker forge
go build -o "$bin/edit-plugin" ./testdata/edit-plugin || fail "build edit-plugin"

owner=octo
project=hello
app_id=4242
install_id=9
url=https://github.com/$owner/$project.git
FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_WORKER_TOKEN=worker-$(rand)
FORGE_GITHUB_APP_ID=$app_id
export FORGE_OWNER_TOKEN FORGE_WORKER_TOKEN FORGE_GITHUB_APP_ID
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.invalid GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.invalid

# --- host side: an owned git, the App key, private state directories.
mkdir -m 0700 "$tmp/secrets" "$tmp/state" "$tmp/public" "$tmp/worktrees" "$tmp/runtime" "$tmp/fake" "$tmp/out"
mkdir -m 0755 "$tmp/gitbin"
cp "$(command -v git)" "$tmp/gitbin/git"
chmod 0755 "$tmp/gitbin/git"
key=$tmp/secrets/app.pem
openssl genrsa -out "$key" 2048 2>/dev/null || fail "openssl genrsa"
chmod 0600 "$key"

# --- GitHub side: octo/hello with main at base, public, and the App.
repo=$tmp/seed
GIT_CONFIG_GLOBAL=/dev/null git init -q -b main "$repo"
echo hello >"$repo/README"
g add README
g commit -q -m base
base=$(g rev-parse HEAD)
remote=$fake_git_root/$owner/$project.git
mkdir -p "$fake_git_root/$owner"
git init -q --bare "$remote"
g push -q "$remote" main:refs/heads/main
# octo/moved: 300 commits of history, for the push after GitHub's main
# moved past the job's base.
moved_remote=$fake_git_root/$owner/moved.git
git init -q --bare "$moved_remote"
python3 - "$moved_remote" 300 <<'PY' || fail "seed moved"
import subprocess, sys
remote, n = sys.argv[1], int(sys.argv[2])
lines = []
for i in range(n):
    lines += ["commit refs/heads/main", "mark :%d" % (i + 1), "committer t <t@example.invalid> %d +0000" % (1700000000 + i),
              "data 3", "c%02d" % (i % 100)]
    if i:
        lines.append("from :%d" % i)
    blob = "file %d\n" % i
    lines += ["M 100644 inline f%d.txt" % i, "data %d" % len(blob), blob]
subprocess.run(["git", "--git-dir=" + remote, "fast-import", "--quiet"], input="\n".join(lines).encode() + b"\n", check=True)
PY
moved_base=$(git --git-dir="$moved_remote" rev-parse refs/heads/main)
cat >"$tmp/fake/app.json" <<EOF
{"app_id":$app_id,"client_id":"Iv1.e2e","private_key_file":"$key",
 "installations":[{"id":$install_id,"owner":"$owner","repositories":["$project","moved"],
   "permissions":{"contents":"write","pull_requests":"write","metadata":"read","workflows":"write"}}],
 "public_repositories":["$owner/$project","$owner/moved"],"runs_window_seconds":60,"push_log":"$tmp/fake/pushes"}
EOF
netns_start_fake -app "$tmp/fake/app.json" -tokens "$tmp/fake/tokens"
control() { curl -fsS -X POST --data "$2" "http://$fake_control/$1" || fail "fake control $1 $2"; }
ci_mode() { control ci "{\"owner\":\"$owner\",\"repo\":\"$project\",\"mode\":\"$1\"}"; }

# --- Gate and Worker.
exec_policy='{"plugin_id":"edit","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}'
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:18080","database":"$tmp/state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"20s","retry_base":"1s","max_attempts":2},
 "default_execution":$exec_policy,
 "workers":[{"id":"worker-1","pool":"local","token_env":"FORGE_WORKER_TOKEN","concurrency":1}],
 "public_repository_root":"$tmp/public","git_executable":"$tmp/gitbin/git",
 "repositories":[{"id":"hello","repository_url":"$url","default_branch":"main","worker_pool":"local","execution":$exec_policy},
   {"id":"moved","repository_url":"https://github.com/$owner/moved.git","default_branch":"main","worker_pool":"local","execution":$exec_policy}],
 "delivery":{"api_base":"https://api.github.com","github_app_id_env":"FORGE_GITHUB_APP_ID",
   "github_app_private_key_path":"$key","max_attempts":3,"retry_base":"1s","poll_interval":"1s",
   "no_runs_grace":"4s","timeout":"3m"}}
EOF
chmod 0600 "$tmp/gate.json"
cat >"$tmp/worker.json" <<EOF
{"version":1,"gate_url":"ws://127.0.0.1:18080","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"500ms","concurrency":1,
 "worktree_root":"$tmp/worktrees","runtime_root":"$tmp/runtime",
 "repositories":[{"id":"hello","source":"gate"},{"id":"moved","source":"gate"}],
 "plugins":[{"id":"edit","argv":["$bin/edit-plugin"]}],
 "environment_allowlist":["PATH"],"check_environment_allowlist":["PATH"],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
EOF
starts=0
start_gate() {
  starts=$((starts + 1))
  e2e_start_gate "$tmp/gate-$starts.log" "Gate did not start (start $starts)"
}
start_gate
e2e_start_worker

# submit N [PATH [REPO BASE]]: a coding job writing PATH (default N.txt)
# on base; prints the job id.
submit() {
  python3 - "${4:-$base}" "$1" "${2:-$1.txt}" "${3:-hello}" >"$tmp/task-$1.json" <<'PY'
import json, sys
base, n, path, repo = sys.argv[1:]
print(json.dumps({"repository_id": repo, "base_sha": base,
                  "instruction": "write %s job %s\nsubject feat: %s" % (path, n, n)}))
PY
  "$bin/forge" submit -file "$tmp/task-$1.json" >"$tmp/out/submit-$1.json" || fail "submit $1"
  field id <"$tmp/out/submit-$1.json"
}
# wait_job NAME ID WANT_RC: forge wait, the aggregate in $tmp/out/NAME.json.
wait_job() {
  local rc=0
  "$bin/forge" wait -timeout 150s -poll 200ms "$2" >"$tmp/out/$1.json" 2>"$tmp/out/$1.err" || rc=$?
  [ "$rc" = "$3" ] || fail "$1: forge wait exit $rc, want $3: $(cat "$tmp/out/$1.err")"
}
jq_py() { python3 -c "import json,sys; a=json.load(open(sys.argv[1])); print($2)" "$1"; }
main_at() { git --git-dir="$remote" rev-parse "refs/heads/main$1"; }
requests() { count_in "$tmp/github-requests.log" "$1"; }
merges_ok() { requests "e['method']=='PUT' and e['path'].endswith('/merge') and e['status']==200"; }
merge_asks() { requests "e['method']=='PUT' and e['path'].endswith('/merge')"; }
prs_made() { requests "e['method']=='POST' and e['path']=='/repos/$owner/$project/pulls' and e['status'] in (200, 201)"; } # a dropped answer logs 200

# 1. merged.
old_main=$(main_at "")
j1=$(submit 1)
wait_job merged "$j1" 0
cand1=$(jq_py "$tmp/out/merged.json" 'a["job"]["candidate_sha"]')
[ "$(jq_py "$tmp/out/merged.json" 'a["job"]["status"]')" = succeeded ] || fail "merged: status"
[ "$(jq_py "$tmp/out/merged.json" 'a["job"]["delivery"]["phase"]')" = merged ] || fail "merged: phase"
[ "$(jq_py "$tmp/out/merged.json" 'a["job"]["delivery"]["branch"]')" = "forge/job-$j1" ] || fail "merged: branch"
[ "$(jq_py "$tmp/out/merged.json" 'a["job"]["delivery"]["ci_state"]')" = success ] || fail "merged: ci state"
merge1=$(jq_py "$tmp/out/merged.json" 'a["job"]["delivery"]["merge_sha"]')
[ "$(main_at "")" = "$merge1" ] || fail "merged: main is not the merge commit"
[ "$(main_at "^1")" = "$old_main" ] || fail "merged: first parent is not the old main"
[ "$(main_at "^2")" = "$cand1" ] || fail "merged: second parent is not the candidate"
[ "$(git --git-dir="$remote" rev-parse "refs/heads/forge/job-$j1")" = "$cand1" ] || fail "merged: branch not at the candidate"
python3 - "$tmp/out/merged.json" <<'PY' || fail "merged: events"
import json, sys
a = json.load(open(sys.argv[1]))
types = [e["type"] for e in a["events"]]
assert types[-1] == "succeeded" and "delivering" in types, types
phases = [e.get("code") for e in a["events"] if e["type"] == "delivery"]
assert phases == ["pull_request", "ci", "merge"], phases
PY
runs=$(requests "e['path']=='/repos/$owner/$project/actions/runs'")
[ "$runs" -ge 3 ] || fail "merged: $runs runs polls"
echo "delivery-e2e: merged ($runs runs polls so far)"

# 1b. a candidate changing a workflow: its tokens carry workflows write,
# so GitHub lets the App push and merge it.
j1b=$(submit 1b .github/workflows/extra.yml)
wait_job workflow "$j1b" 0
[ "$(main_at "^2")" = "$(jq_py "$tmp/out/workflow.json" 'a["job"]["candidate_sha"]')" ] || fail "workflow: not merged"
echo "delivery-e2e: workflow change merged"

# 2. CI fails.
ci_mode failure
main_before=$(main_at "")
asks=$(merge_asks)
j2=$(submit 2)
wait_job ci-failed "$j2" 3
[ "$(jq_py "$tmp/out/ci-failed.json" 'a["job"]["failure_code"]')" = ci_failed ] || fail "ci-failed: code"
[ "$(jq_py "$tmp/out/ci-failed.json" 'a["job"]["delivery"]["ci_state"]')" = failure ] || fail "ci-failed: ci state"
grep -q 'ci_failed' "$tmp/out/ci-failed.err" || fail "ci-failed: stderr lacks the code"
[ "$(main_at "")" = "$main_before" ] || fail "ci-failed: main moved"
[ "$(merge_asks)" = "$asks" ] || fail "ci-failed: a merge was asked for"
echo "delivery-e2e: ci failure"

# 3. no run ever starts.
ci_mode none
j3=$(submit 3)
wait_job no-runs "$j3" 3
[ "$(jq_py "$tmp/out/no-runs.json" 'a["job"]["failure_code"]')" = ci_no_runs ] || fail "no-runs: code"
[ "$(main_at "")" = "$main_before" ] || fail "no-runs: main moved"
[ "$(merge_asks)" = "$asks" ] || fail "no-runs: a merge was asked for"
ci_mode success
echo "delivery-e2e: no runs"

# 4. the PR-creation answer is lost.
made=$(prs_made)
control api-fault '{"mode":"lose-pr-create","count":1}'
j4=$(submit 4)
wait_job lost-pr "$j4" 0
[ "$(prs_made)" = $((made + 1)) ] || fail "lost-pr: $(($(prs_made) - made)) PRs created, want 1"
[ "$(main_at "^2")" = "$(jq_py "$tmp/out/lost-pr.json" 'a["job"]["candidate_sha"]')" ] || fail "lost-pr: not merged"
echo "delivery-e2e: lost PR creation"

# 4b. a ruleset refuses forge/* branches: push_rejected, nothing pushed.
control protect "{\"owner\":\"$owner\",\"repo\":\"$project\",\"patterns\":[\"forge/*\"]}"
j4b=$(submit 4b)
wait_job protected "$j4b" 3
[ "$(jq_py "$tmp/out/protected.json" 'a["job"]["failure_code"]')" = push_rejected ] || fail "protected: code"
git --git-dir="$remote" rev-parse --verify --quiet "refs/heads/forge/job-$j4b" >/dev/null && fail "protected: branch pushed"
control protect "{\"owner\":\"$owner\",\"repo\":\"$project\",\"patterns\":[]}"
echo "delivery-e2e: ruleset refusal -> push_rejected"

# 4e. the candidate holds the owner token (base64; the Worker cannot know
# it): the Gate refuses it before the push, secret_in_candidate, and
# GitHub sees no branch, push or pull request.
made=$(prs_made)
receives() { requests "e['method']=='POST' and e['path'].endswith('/git-receive-pack')"; }
pushed=$(receives)
python3 - "$base" "$(printf 'Bearer %s' "$FORGE_OWNER_TOKEN" | base64 -w0)" >"$tmp/task-leak.json" <<'PY'
import json, sys
print(json.dumps({"repository_id": "hello", "base_sha": sys.argv[1], "instruction": "write leak.txt " + sys.argv[2]}))
PY
"$bin/forge" submit -file "$tmp/task-leak.json" >"$tmp/out/submit-leak.json" || fail "submit leak"
jl=$(field id <"$tmp/out/submit-leak.json")
wait_job leak "$jl" 3
[ "$(jq_py "$tmp/out/leak.json" 'a["job"]["failure_code"]')" = secret_in_candidate ] || fail "leak: code"
git --git-dir="$remote" rev-parse --verify --quiet "refs/heads/forge/job-$jl" >/dev/null && fail "leak: branch pushed"
[ "$(prs_made)" = "$made" ] || fail "leak: a pull request was created"
[ "$(receives)" = "$pushed" ] || fail "leak: a push reached GitHub"
echo "delivery-e2e: a candidate holding the owner token -> secret_in_candidate, nothing pushed"

# 4c. GitHub's main moves past the job's base (50 commits) after the Gate
# fetched it: the push negotiates and sends only the candidate's objects.
jm=$(submit m m.txt moved "$moved_base")
python3 - "$moved_remote" 50 "$moved_base" <<'PY' || fail "move main"
import subprocess, sys
remote, n, tip = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lines = []
for i in range(n):
    lines += ["commit refs/heads/main", "committer t <t@example.invalid> %d +0000" % (1800000000 + i), "data 4", "m%03d" % i]
    if i == 0:
        lines.append("from " + tip)
    blob = "moved %d\n" % i
    lines += ["M 100644 inline g%d.txt" % i, "data %d" % len(blob), blob]
subprocess.run(["git", "--git-dir=" + remote, "fast-import", "--quiet"], input="\n".join(lines).encode() + b"\n", check=True)
PY
wait_job moved "$jm" 0
objects=$(awk -v r="refs/heads/forge/job-$jm" '$2 == r {print $3}' "$tmp/fake/pushes")
[ -n "$objects" ] || fail "moved: no push logged"
[ "$objects" -le 10 ] || fail "moved: the push carried $objects objects, want a few"
echo "delivery-e2e: push after GitHub's main moved 50 commits past the base: $objects objects"

# 4d. a push workflow skipped within a second, a pull_request workflow
# that starts 2.5 s after the pull request and takes 2 s: merged only
# after that run succeeded.
control workflows "{\"owner\":\"$owner\",\"repo\":\"$project\",\"workflows\":[
  {\"name\":\"lint\",\"event\":\"push\",\"startms\":0,\"durationms\":300,\"conclusion\":\"skipped\"},
  {\"name\":\"test\",\"event\":\"pull_request\",\"startms\":2500,\"durationms\":2000,\"conclusion\":\"success\"}]}"
j4d=$(submit 4d)
wait_job two-workflows "$j4d" 0
python3 - "$tmp/github-requests.log" "$owner/$project" <<'PY' || fail "two workflows: merged before the pull_request run completed"
import json, sys, datetime
created = merged = None
for line in open(sys.argv[1]):
    e = json.loads(line)
    t = datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00")[:26] + "+00:00")
    if e["method"] == "POST" and e["path"] == "/repos/%s/pulls" % sys.argv[2] and e["status"] == 201:
        created = t
    if e["method"] == "PUT" and e["path"].endswith("/merge") and e["status"] == 200:
        merged = t
gap = (merged - created).total_seconds()
assert gap >= 4.5, gap
print("delivery-e2e: two workflows: merged %.1f s after the pull request was opened" % gap)
PY

# 5. SIGKILL in each phase. Secondary limits with retry-after stretch the
# mutations (token mint, PR creation, merge) so each phase lasts seconds.
made=$(prs_made)
merged=$(merges_ok)
j5=$(submit 5)
seen=()
for phase in push pull_request ci merge; do
  control api-fault '{"mode":"secondary-retry-after","count":3}'
  got=$(python3 - "$bin/forge" "$j5" "$phase" <<'PY'
import json, subprocess, sys, time
forge, job, want = sys.argv[1:]
order = ["push", "pull_request", "ci", "merge", "merged", "failed"]
deadline = time.time() + 90
while time.time() < deadline:
    out = subprocess.run([forge, "status", job], capture_output=True, text=True)
    if out.returncode == 0:
        d = json.loads(out.stdout).get("delivery")
        if d and order.index(d["phase"]) >= order.index(want):
            print(d["phase"])
            sys.exit(0)
    time.sleep(0.05)
sys.exit(1)
PY
  ) || fail "kill: phase $phase never reached"
  kill -KILL "$gate_pid"
  wait "$gate_pid" 2>/dev/null || true
  seen+=("$got")
  [ "$got" = merged ] && break
  start_gate
done
[ "$starts" -ge 4 ] || fail "kill: only $starts Gate starts"
if [ "$got" = merged ]; then start_gate; fi
wait_job killed "$j5" 0
cand5=$(jq_py "$tmp/out/killed.json" 'a["job"]["candidate_sha"]')
[ "$(git --git-dir="$remote" for-each-ref --format=x "refs/heads/forge/job-$j5" | wc -l)" = 1 ] || fail "kill: branches"
[ "$(prs_made)" = $((made + 1)) ] || fail "kill: $(($(prs_made) - made)) PRs created, want 1"
[ "$(merges_ok)" = $((merged + 1)) ] || fail "kill: $(($(merges_ok) - merged)) merges, want 1"
[ "$(main_at "^2")" = "$cand5" ] || fail "kill: main is not the merge of the candidate"
echo "delivery-e2e: SIGKILL in phases: ${seen[*]} ($starts Gate starts)"

# 5b. a push stalls at GitHub: meanwhile no git process of the Gate holds
# the token in /proc/<pid>/environ or cmdline; the Gate is SIGKILLed and
# its reaper leaves no git running; restarted, it delivers.
curl -fsS -X POST --data "{\"repo\":\"$owner/$project\",\"mode\":\"stall-push\"}" "http://$fake_control/fault" || fail "set stall"
j5b=$(submit 5b)
python3 - "$tmp/fake/tokens" <<'PY' || fail "stalled push: a token in /proc"
import base64, os, sys, time
deadline = time.time() + 60
def procs():
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            env = open("/proc/%s/environ" % p, "rb").read()
            cmd = open("/proc/%s/cmdline" % p, "rb").read()
        except OSError:
            continue
        if b"GIT_PROJECT_ROOT=" in env:  # the fake's http-backend: GitHub's side
            continue
        yield p, cmd, env
seen = None
while time.time() < deadline and not seen:
    seen = [(p, c, e) for p, c, e in procs() if b"push\0--porcelain" in c]
    time.sleep(0.02)
assert seen, "no git push seen"
time.sleep(0.5)  # git-remote-https has asked the helper by now
toks = open(sys.argv[1]).read().split()
bad = [t.encode() for t in toks] + [base64.b64encode(("x-access-token:" + t).encode()) for t in toks]
for p, c, e in procs():
    for b in bad:
        assert b not in c and b not in e, "pid %s" % p
print("delivery-e2e: stalled push: %d git processes, no token in their environ or cmdline" % len(seen))
PY
kill -KILL "$gate_pid"
wait "$gate_pid" 2>/dev/null || true
# The fake holds the push for 15 s; the reaper must end it (and its remote
# helper) within 5 s of the Gate's death.
python3 - <<'PY' || fail "SIGKILLed Gate left a git push or its remote helper running"
import os, time
def left():
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                c = open("/proc/%s/cmdline" % p, "rb").read()
                e = open("/proc/%s/environ" % p, "rb").read()
            except OSError:
                continue
            if b"GIT_PROJECT_ROOT=" in e:  # the fake's side
                continue
            if b"push\0--porcelain" in c or b"remote-https" in c:
                yield c
deadline = time.time() + 5
while list(left()) and time.time() < deadline:
    time.sleep(0.05)
rest = list(left())
assert not rest, rest
PY
curl -fsS -X POST --data "{\"repo\":\"$owner/$project\",\"mode\":\"\"}" "http://$fake_control/fault" || fail "clear stall"
start_gate
wait_job stalled "$j5b" 0
echo "delivery-e2e: SIGKILL during a stalled push: no git left, delivered after restart"

# 6. no token and no key line anywhere.
stop gate "$gate_pid"
stop worker "$worker_pid"
[ -s "$tmp/fake/tokens" ] || fail "no token minted"
[ -z "$(find "$tmp/public" -maxdepth 1 -name '.forge-delivery-*' -print -quit)" ] || fail "push mirrors left behind"
grep -v -e '-----' "$key" >"$tmp/fake/keylines"
hits=0
for f in "$tmp"/state/* "$tmp"/gate-*.log "$tmp/worker.log" "$tmp"/out/* "$tmp/github-requests.log"; do
  [ -f "$f" ] || continue
  if grep -a -F -q -f "$tmp/fake/tokens" "$f" || grep -a -F -q -f "$tmp/fake/keylines" "$f"; then
    echo "delivery-e2e: secret found in $f" >&2
    hits=$((hits + 1))
  fi
done
[ "$hits" = 0 ] || fail "$hits files hold a token or a key line"
echo "delivery-e2e: PASS ($(wc -l <"$tmp/fake/tokens") tokens, $(requests "e['path']=='/repos/$owner/$project/actions/runs'") runs polls, $(requests "e['path']=='/repos/$owner/$project/actions/runs' and e['status']==304") answered 304)"
