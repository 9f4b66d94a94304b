#!/usr/bin/env bash
# End-to-end test of intake (DECISIONS 17, docs/intake.md): production
# forge-gate, forge-worker and forge, unmodified, against github.com and
# api.github.com served by pkg/githubfake in a private network and mount
# namespace (scripts/lib/netns.sh), with testdata/edit-plugin as the agent
# (it runs the write/report lines of the quoted issue body).
#
#  1. a maintainer labels an issue: one job, one status comment, one pull
#     request saying "Fixes #N" with the report and the check's outcome,
#     CI, an approval by a second maintainer (merge policy review), the
#     merge, the issue closed; requests counted for the job.
#  2. a read-only user's label and comment, a triage user's label and a
#     bot's comment start nothing and are not answered.
#  3. the body edited after the label (the Gate stopped meanwhile): no job,
#     the refusal in the status comment; the agent never sees the edit.
#  4. the label removed and added again by a maintainer: exactly one more
#     job.
#  5. the Gate SIGKILLed right after it started a job, then restarted: one
#     job, one status comment, one pull request.
#  6. a review comment's command: a follow-up commit on the same branch and
#     pull request, CI again; the old head's and the requester's approvals
#     do not merge it, a second maintainer's does.
# About 4.5 minutes, two of them the review phase's once-a-minute poll.
# INTAKE_E2E_KEEP=DIR copies the run's directory there when it fails.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
# shellcheck source-path=SCRIPTDIR source=lib/netns.sh
source "$(dirname "$0")/lib/netns.sh"
fail() {
  [ -n "${INTAKE_E2E_KEEP:-}" ] && cp -r "$tmp" "$INTAKE_E2E_KEEP" 2>/dev/null
  e2e_fail intake-e2e "$@"
}

netns_enter "$@"
cd "$(dirname "$0")/.."
start_time=$(date +%s)
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

mkdir -m 0700 "$tmp/secrets" "$tmp/state" "$tmp/public" "$tmp/worktrees" "$tmp/runtime" "$tmp/fake" "$tmp/out"
mkdir -m 0755 "$tmp/gitbin"
cp "$(command -v git)" "$tmp/gitbin/git"
chmod 0755 "$tmp/gitbin/git"
key=$tmp/secrets/app.pem
openssl genrsa -out "$key" 2048 2>/dev/null || fail "openssl genrsa"
chmod 0600 "$key"

repo=$tmp/seed
GIT_CONFIG_GLOBAL=/dev/null git init -q -b main "$repo"
echo hello >"$repo/README"
g add README
g commit -q -m base
remote=$fake_git_root/$owner/$project.git
mkdir -p "$fake_git_root/$owner"
git init -q --bare --initial-branch=main "$remote"
g push -q "$remote" main:refs/heads/main
cat >"$tmp/fake/app.json" <<EOF
{"app_id":$app_id,"client_id":"Iv1.e2e","slug":"agent-forge","private_key_file":"$key",
 "installations":[{"id":$install_id,"owner":"$owner","repositories":["$project"],
   "permissions":{"contents":"write","pull_requests":"write","issues":"write","metadata":"read"}}],
 "public_repositories":["$owner/$project"],"runs_window_seconds":60}
EOF
netns_start_fake -app "$tmp/fake/app.json" -tokens "$tmp/fake/tokens"
ctl() { curl -fsS -X POST --data "$2" "http://$fake_control/$1" || fail "fake control $1 $2"; }
# act AS ACT NUMBER [KEY VALUE]..: one person's act on GitHub; prints
# the answer ({"number","id"}).
act() {
  local as=$1 what=$2 n=$3
  shift 3
  ctl act "$(python3 -c 'import json,sys; a=sys.argv; d={"as":a[1],"act":a[2],"owner":a[3],"repo":a[4],"number":int(a[5])}
for i in range(6, len(a), 2): d[a[i]] = int(a[i+1]) if a[i] == "line" else a[i+1]
print(json.dumps(d))' "$as" "$what" "$owner" "$project" "$n" "$@")"
}
for c in maintainer:maintain second:admin reader:read triager:triage 'helper[bot]:write'; do
  ctl collaborator "{\"owner\":\"$owner\",\"repo\":\"$project\",\"login\":\"${c%%:*}\",\"role\":\"${c#*:}\"}" >/dev/null
done
state() { curl -fsS "http://$fake_control/issue-state?owner=$owner&repo=$project&number=$1" || fail "issue-state $1"; }
# status N: the Gate's comments on issue N, one a line.
status() {
  state "$1" | python3 -c 'import json,sys
for c in json.load(sys.stdin)["comments"]:
    if c["user"]["login"] == "agent-forge[bot]": print(c["body"].replace("\n", " "))'
}
# started N: how many jobs the Gates started for issue N.
started() {
  cat "$tmp"/gate-*.log >"$tmp/gates.log"
  count_in "$tmp/gates.log" "e.get('msg') == 'intake: job started' and e.get('number') == $1 and not e.get('taken')"
}
# job_of N: the job id the status comment of issue N names (waits 30 s).
job_of() {
  local i id
  for i in $(seq 150); do
    # shellcheck disable=SC2016 # the backquotes are the comment's own
  id=$(status "$1" | sed -n 's/.*job `\([0-9a-f]*\)`.*/\1/p' | head -1)
    [ -n "$id" ] && { echo "$id"; return; }
    sleep 0.2
  done
  fail "issue $1: no status comment naming a job"
}
issue() { act reporter open-issue 0 title "$1" body "$2" | field number; }

exec_policy='{"plugin_id":"edit","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}'
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:18080","database":"$tmp/state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"20s","retry_base":"1s","max_attempts":2},
 "default_execution":$exec_policy,
 "workers":[{"id":"worker-1","pool":"local","token_env":"FORGE_WORKER_TOKEN","concurrency":1}],
 "public_repository_root":"$tmp/public","git_executable":"$tmp/gitbin/git",
 "repositories":[{"id":"hello","repository_url":"$url","default_branch":"main","worker_pool":"local","execution":$exec_policy,
   "intake":{"checks":[["grep","-qx","done","result.txt"]]}}],
 "delivery":{"api_base":"https://api.github.com","github_app_id_env":"FORGE_GITHUB_APP_ID",
   "github_app_private_key_path":"$key","max_attempts":3,"retry_base":"1s","poll_interval":"1s",
   "no_runs_grace":"3s","timeout":"3m"}}
EOF
chmod 0600 "$tmp/gate.json"
cat >"$tmp/worker.json" <<EOF
{"version":1,"gate_url":"ws://127.0.0.1:18080","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"500ms","concurrency":1,
 "worktree_root":"$tmp/worktrees","runtime_root":"$tmp/runtime",
 "repositories":[{"id":"hello","source":"gate"}],
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
wait_log "$tmp/gate-1.log" 'e.get("msg") == "intake: polling"' >/dev/null || fail "the Gate does not poll"
log_lines() { wc -l <"$tmp/github-requests.log"; }

# 1. A maintainer's label: one job, through review, merged, issue closed.
n1=$(issue "Add the result file" $'Please add it.\nwrite result.txt done\nreport Added result.txt|result.txt: new file')
before=$(log_lines)
act maintainer label "$n1" label agent-forge >/dev/null
j1=$(job_of "$n1")
# The pull request: the next number on the fake (issues and pulls share).
pr=""
for _ in $(seq 300); do
  pr=$(python3 - "$tmp/github-requests.log" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["method"] == "POST" and e["path"].endswith("/pulls") and e["status"] == 201:
        print("yes")
PY
)
  [ -n "$pr" ] && break
  sleep 0.2
done
[ -n "$pr" ] || fail "scenario 1: no pull request"
prn=$((n1 + 1))
head=$(git --git-dir="$remote" rev-parse "refs/heads/forge/job-$j1") || fail "scenario 1: no branch"
state "$prn" >"$tmp/out/pr.json"
python3 - "$tmp/out/pr.json" "$n1" "$j1" <<'PY' || fail "scenario 1: pull request body"
import json, sys
pr = json.load(open(sys.argv[1]))["issue"]
body, n, job = pr["body"], sys.argv[2], sys.argv[3]
assert body.startswith("Fixes #%s\n" % n), body
for want in ["Agent Forge job `%s`, labelled by maintainer." % job, "Added result.txt", "result.txt: new file",
             "| 1 | ` grep -qx done result.txt ` | passed, exit 0", "Attempts: 1.", "Agent: ` edit `"]:
    assert want in body, (want, body)
assert pr["title"] == "Add the result file (#%s)" % n, pr["title"]
PY
# Merge policy review: CI alone does not merge; a second maintainer's
# approval of the exact head does.
sleep 5
[ "$(state "$n1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["issue"]["state"])')" = open ] || fail "scenario 1: merged without a review"
act second review "$prn" state APPROVED commit "$head" >/dev/null
"$bin/forge" wait -timeout 120s -poll 200ms "$j1" >"$tmp/out/j1.json" 2>"$tmp/out/j1.err" || fail "scenario 1: job did not succeed: $(cat "$tmp/out/j1.err")"
for _ in $(seq 50); do
  status "$n1" | grep -q "was merged" && break
  sleep 0.2
done
[ "$(state "$n1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["issue"]["state"])')" = closed ] || fail "scenario 1: issue not closed"
[ "$(status "$n1" | wc -l)" = 1 ] || fail "scenario 1: $(status "$n1" | wc -l) status comments"
status "$n1" | grep -q "was merged" || fail "scenario 1: status: $(status "$n1")"
[ "$(started "$n1")" = 1 ] || fail "scenario 1: $(started "$n1") jobs"
after=$(log_lines)
python3 - "$tmp/github-requests.log" "$before" "$after" >"$tmp/out/requests.txt" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()[int(sys.argv[2]):int(sys.argv[3])]
paid = {"intake": 0, "delivery": 0}
free = 0
for line in lines:
    e = json.loads(line)
    if e.get("host") != "api.github.com":
        continue
    if e["status"] == 304:
        free += 1
        continue
    p = e["path"]
    side = "intake" if "/issues" in p or "/collaborators/" in p or "/git/ref/" in p or p == "/app" or p.endswith("/pulls/comments") else "delivery"
    paid[side] += 1
print(paid["intake"], paid["delivery"], free)
PY
read -r req_intake req_delivery req_free <"$tmp/out/requests.txt"
echo "intake-e2e: labelled, reviewed, merged, issue closed (API requests from the label to the merge that count: $req_intake by intake, $req_delivery by delivery (token mints included); $req_free free 304s)"

# 2. Unauthorised triggers start nothing and are not answered.
n2=$(issue "Print the secrets" $'write pwned.txt yes')
act reader label "$n2" label agent-forge >/dev/null
act reader comment "$n2" body "/forge do it" >/dev/null
act reader unlabel "$n2" label agent-forge >/dev/null
act triager label "$n2" label agent-forge >/dev/null
act 'helper[bot]' comment "$n2" body "/forge do it" >/dev/null
sleep 4
[ "$(started "$n2")" = 0 ] || fail "scenario 2: a job started"
[ -z "$(status "$n2")" ] || fail "scenario 2: answered: $(status "$n2")"
echo "intake-e2e: read-only label and comment, triage label, bot comment: nothing started, nothing answered"

# 3. The body edited after the label, before the Gate read it.
n3=$(issue "Edited later" $'write result3.txt original')
kill -STOP "$gate_pid"
act maintainer label "$n3" label agent-forge >/dev/null
sleep 1.2 # past GitHub's one-second resolution
act reporter edit-issue "$n3" title "Edited later" body $'write evil.txt EDITED' >/dev/null
kill -CONT "$gate_pid"
for _ in $(seq 100); do
  [ -n "$(status "$n3")" ] && break
  sleep 0.2
done
status "$n3" | grep -q "changed after the request" || fail "scenario 3: status: $(status "$n3")"
[ "$(started "$n3")" = 0 ] || fail "scenario 3: a job started from the edited issue"
echo "intake-e2e: body edited after the label: refused, said in the status comment"

# 4. Removed and added again: exactly one more job.
act maintainer unlabel "$n3" label agent-forge >/dev/null
sleep 1.2
act maintainer label "$n3" label agent-forge >/dev/null
for _ in $(seq 100); do
  [ "$(started "$n3")" -ge 1 ] && break
  sleep 0.2
done
sleep 3
[ "$(started "$n3")" = 1 ] || fail "scenario 4: $(started "$n3") jobs after the label came back"
echo "intake-e2e: label removed and added again: one more job"

# 5. SIGKILL of the Gate right after it started a job.
n5=$(issue "Killed" $'write result5.txt done')
act maintainer label "$n5" label agent-forge >/dev/null
for _ in $(seq 150); do
  [ "$(started "$n5")" = 1 ] && break
  sleep 0.05
done
kill -KILL "$gate_pid"
wait "$gate_pid" 2>/dev/null || true
start_gate
job_of "$n5" >/dev/null
sleep 4
[ "$(started "$n5")" = 1 ] || fail "scenario 5: $(started "$n5") jobs"
[ "$(status "$n5" | wc -l)" = 1 ] || fail "scenario 5: $(status "$n5" | wc -l) status comments"
for n in "$n3" "$n5"; do
  for _ in $(seq 300); do
    status "$n" | grep -q "opened https://github.com/" && break
    sleep 0.2
  done
  status "$n" | grep -q "opened https://github.com/" || fail "scenario 5: issue $n: $(status "$n")"
done
prs=$(count_in "$tmp/github-requests.log" "e['method']=='POST' and e['path']=='/repos/$owner/$project/pulls' and e['status']==201")
[ "$prs" = 3 ] || fail "scenario 5: $prs pull requests created for 3 jobs"
echo "intake-e2e: Gate SIGKILLed after starting a job: one job, one status comment"

# 6. A review comment's follow-up: one more commit on the same branch and
#    pull request, CI again, the approval of the old head and the
#    requester's approval do not merge, a second maintainer's does.
ctl ci "{\"owner\":\"$owner\",\"repo\":\"$project\",\"mode\":\"none\"}" >/dev/null
n6=$(issue "Iterate" $'Please add it.\nwrite result6.txt done')
act maintainer label "$n6" label agent-forge >/dev/null
j6=$(job_of "$n6")
pr6=$((n6 + 1))
for _ in $(seq 300); do
  status "$n6" | grep -q "ci_no_runs" && break
  sleep 0.2
done
status "$n6" | grep -q "ci_no_runs" || fail "scenario 6: the first delivery did not end ci_no_runs: $(status "$n6")"
head6=$(git --git-dir="$remote" rev-parse "refs/heads/forge/job-$j6") || fail "scenario 6: no branch"
act second review "$pr6" state APPROVED commit "$head6" >/dev/null
ctl ci "{\"owner\":\"$owner\",\"repo\":\"$project\",\"mode\":\"success\"}" >/dev/null
act maintainer review-comment "$pr6" path result6.txt line 1 body $'/forge one more file\nwrite extra6.txt more' >/dev/null
head7=""
for _ in $(seq 300); do
  head7=$(git --git-dir="$remote" rev-parse "refs/heads/forge/job-$j6")
  [ "$head7" != "$head6" ] && break
  sleep 0.2
done
[ "$head7" != "$head6" ] || fail "scenario 6: no follow-up commit on the branch"
[ "$(git --git-dir="$remote" rev-parse "$head7^")" = "$head6" ] || fail "scenario 6: the follow-up is not one more commit on the branch"
pr_state() { state "$pr6" | python3 -c 'import json,sys; print(json.load(sys.stdin)["issue"]["state"])'; }
# The old head's approval (given above) and the requester's own do not
# count: through CI again and a review poll (once a minute), it stays open.
act maintainer review "$pr6" state APPROVED commit "$head7" >/dev/null
sleep 70
[ "$(pr_state)" = open ] || fail "scenario 6: merged on the old head's or the requester's approval"
act second review "$pr6" state APPROVED commit "$head7" >/dev/null
for _ in $(seq 400); do
  [ "$(pr_state)" = closed ] && break
  sleep 0.2
done
[ "$(git --git-dir="$remote" rev-parse refs/heads/main^2)" = "$head7" ] || fail "scenario 6: the follow-up's head was not merged"
echo "intake-e2e: review comment follow-up: one more commit on the same branch, CI again, old and requester approvals void, merged after a second maintainer's approval"

echo "intake-e2e: PASS ($(($(date +%s) - start_time)) s)"
