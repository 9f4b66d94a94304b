#!/usr/bin/env bash
# End-to-end test of forge-github: the production binary, unmodified,
# publishes Worker candidates to https://api.github.com and
# https://github.com served by pkg/githubfake inside a private network and
# mount namespace (scripts/lib/netns.sh). Covered: publish, repeat (same
# PR), a lost PR-creation answer (still one PR), 5xx and secondary-limit
# retries, a workflow change without and with the installation's workflows
# grant, a local base ahead of GitHub's (base_drift: unreviewed base
# commits are never published), a ruleset refusing the branch
# (push_rejected), an existing branch at another commit, base drift, tree
# mismatch, dirty worktree, world-readable key, foreign api_base, and that
# the token (raw or as the Basic credential) never appears in any file the
# runs wrote, in the fake's request log or in /proc/*/cmdline and
# /proc/*/environ samples taken while forge-github and its git run.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
# shellcheck source-path=SCRIPTDIR source=lib/netns.sh
source "$(dirname "$0")/lib/netns.sh"
fail() { e2e_fail forge-github-e2e "$@"; }

netns_enter "$@"
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
chmod 0700 "$tmp"
pids=()
bin=$tmp/bin
e2e_traps
mkdir -p "$bin"
netns_setup
e2e_build forge-github

owner=octo-org
project=project
app_id=4242
install_id=9

# --- local side: an owned git, the App key, the worktree with candidates.
mkdir -m 0700 "$tmp/secrets" "$tmp/run" "$tmp/home" "$tmp/fake"
mkdir -m 0755 "$tmp/gitbin" "$tmp/local"
cp "$(command -v git)" "$tmp/gitbin/git"
chmod 0755 "$tmp/gitbin/git"
key=$tmp/secrets/app.pem
openssl genrsa -out "$key" 2048 2>/dev/null || fail "openssl genrsa"
chmod 0600 "$key"
repo=$tmp/local/$project
mkdir -m 0755 "$repo"
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.invalid GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.invalid
g init -q -b main
echo base >"$repo/README"
g add README
g commit -q -m base
base=$(g rev-parse HEAD)

# candidate JOB FILE CONTENT [PARENT]: a commit on PARENT (default: base)
# changing FILE, pinned at the Worker's ref; prints "sha tree".
candidate() {
  local job=$1 file=$2 content=$3 parent=${4:-$base} blob tree sha
  blob=$(printf '%s\n' "$content" | g hash-object -w --stdin)
  rm -f "$tmp/index"
  GIT_INDEX_FILE=$tmp/index g read-tree "$parent"
  GIT_INDEX_FILE=$tmp/index g update-index --add --cacheinfo "100644,$blob,$file"
  tree=$(GIT_INDEX_FILE=$tmp/index g write-tree)
  sha=$(g commit-tree "$tree" -p "$parent" -m "candidate $job")
  g update-ref "refs/agent-forge/candidates/$job/attempt1" "$sha"
  echo "$sha $tree"
}

# publication JOB SHA TREE [PARENT]
publication() {
  printf '{"version":1,"candidate_sha":"%s","expected_parent_sha":"%s","expected_tree_sha":"%s","candidate_ref":"refs/agent-forge/candidates/%s/attempt1","base_branch":"main","new_branch":"forge/job-%s","pr_title":"Reviewed candidate %s","pr_body":"Ready for review.\\nSecond line."}' \
    "$2" "${4:-$base}" "$3" "$1" "$1" "$1"
}

config() {
  printf '{"version":1,"api_base":"%s","owner":"%s","repository":"%s","local_repository":"%s","git_executable":"%s","github_app_id_env":"FORGE_GITHUB_APP_ID","github_app_private_key_path":"%s"}\n' \
    "$1" "$owner" "$project" "$repo" "$tmp/gitbin/git" "$key" >"$tmp/secrets/github.json"
  chmod 0600 "$tmp/secrets/github.json"
}
config https://api.github.com

# --- GitHub side: the repository (main at base) and the App.
remote=$fake_git_root/$owner/$project.git
mkdir -p "$fake_git_root/$owner"
git init -q --bare "$remote"
g push -q "$remote" main:refs/heads/main
cat >"$tmp/fake/app.json" <<EOF
{"app_id":$app_id,"client_id":"Iv1.e2e","private_key_file":"$key",
 "installations":[{"id":$install_id,"owner":"$owner","repositories":["$project"],
   "permissions":{"contents":"write","pull_requests":"write","metadata":"read"}}]}
EOF
netns_start_fake -app "$tmp/fake/app.json" -tokens "$tmp/fake/tokens"

api_fault() {
  curl -fsS -X POST --data "{\"mode\":\"$1\",\"count\":$2}" "http://$fake_control/api-fault" || fail "set API fault $1"
}
grant() {
  curl -fsS -X POST --data "{\"id\":$install_id,\"permissions\":$1}" "http://$fake_control/installation" || fail "set installation permissions"
}

# run NAME PUBLICATION: forge-github with the publication on stdin, stdout
# and stderr to $tmp/NAME.out/.err, exit code in rc; /proc/*/cmdline is
# sampled while it runs.
touch "$tmp/fake/marker"
run() {
  local name=$1
  FORGE_GITHUB_APP_ID=$app_id TMPDIR=$tmp/run HOME=$tmp/home \
    "$bin/forge-github" -config "$tmp/secrets/github.json" <<<"$2" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  local pid=$!
  python3 - "$pid" >>"$tmp/cmdline-samples" <<'PY'
import os, sys, time
pid = sys.argv[1]
def alive():
    try:
        return open("/proc/%s/stat" % pid).read().split()[2] != "Z"
    except OSError:
        return False
while alive():
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                env = open("/proc/%s/environ" % p, "rb").read()
                # The fake's git http-backend and its children are GitHub's
                # side (CGI hands them the request's Authorization header).
                if b"GIT_PROJECT_ROOT=" in env:
                    continue
                for b in (open("/proc/%s/cmdline" % p, "rb").read(), env):
                    sys.stdout.write(b.replace(b"\0", b" ").decode("utf-8", "replace") + "\n")
            except OSError:
                pass
    time.sleep(0.005)
PY
  rc=0
  wait "$pid" || rc=$?
}

expect() { # NAME RC [CODE]: the run ended with RC and, if given, code CODE
  [ "$rc" = "$2" ] || fail "$1: exit $rc, want $2: $(cat "$tmp/$1.err")"
  if [ -n "${3:-}" ]; then
    grep -q "^forge-github: error: $3: " "$tmp/$1.err" || fail "$1: stderr lacks $3: $(cat "$tmp/$1.err")"
    [ ! -s "$tmp/$1.out" ] || fail "$1: stdout not empty on failure"
  fi
}
remote_branch() { git --git-dir="$remote" rev-parse --verify --quiet "refs/heads/$1" || true; }
posts() { count_in "$tmp/github-requests.log" "e['method']=='POST' and e['path']=='/repos/$owner/$project/pulls'"; }

# 1. publish, then repeat: the same branch and PR.
read -r c1 t1 < <(candidate 1 src/one.txt one)
run publish "$(publication 1 "$c1" "$t1")"
expect publish 0
[ "$(field pr_number <"$tmp/publish.out")" = 1 ] || fail "publish: PR number"
[ "$(field pr_url <"$tmp/publish.out")" = "https://github.com/$owner/$project/pull/1" ] || fail "publish: PR URL"
[ "$(field candidate_sha <"$tmp/publish.out")" = "$c1" ] || fail "publish: candidate"
[ "$(field branch_created <"$tmp/publish.out")" = True ] || fail "publish: branch not created"
[ "$(remote_branch forge/job-1)" = "$c1" ] || fail "publish: remote branch not at the candidate"
api_fault server-error 1
run repeat "$(publication 1 "$c1" "$t1")"
expect repeat 0
[ "$(field pr_url <"$tmp/repeat.out")" = "https://github.com/$owner/$project/pull/1" ] || fail "repeat: another PR"
[ "$(field branch_created <"$tmp/repeat.out")" = False ] || fail "repeat: created the branch again"
[ "$(field pr_created <"$tmp/repeat.out")" = False ] || fail "repeat: created a PR"
[ "$(posts)" = 1 ] || fail "repeat: PR creation requested again"

# 2. the answer to the PR creation is lost: still exactly one PR.
read -r c2 t2 < <(candidate 2 src/two.txt two)
api_fault lose-pr-create 1
run lost "$(publication 2 "$c2" "$t2")"
expect lost 0
[ "$(field pr_number <"$tmp/lost.out")" = 2 ] || fail "lost: PR number"
run lost-repeat "$(publication 2 "$c2" "$t2")"
expect lost-repeat 0
[ "$(field pr_number <"$tmp/lost-repeat.out")" = 2 ] || fail "lost: repeat found another PR"
[ "$(posts)" = 2 ] || fail "lost: $(posts) PR creations, want 2"

# 3. a workflow change: refused without the workflows grant (nothing
# pushed), published with it (through a secondary limit with retry-after).
read -r c3 t3 < <(candidate 3 .github/workflows/ci.yml 'on: push')
run wf-denied "$(publication 3 "$c3" "$t3")"
expect wf-denied 4 permission_denied
[ -z "$(remote_branch forge/job-3)" ] || fail "wf-denied: branch pushed"
grant '{"contents":"write","pull_requests":"write","metadata":"read","workflows":"write"}'
api_fault secondary-retry-after 1
run wf-granted "$(publication 3 "$c3" "$t3")"
expect wf-granted 0
[ "$(remote_branch forge/job-3)" = "$c3" ] || fail "wf-granted: branch not pushed"

# A local base ahead of GitHub's (here with a workflow change of its own):
# its commits were never reviewed, so nothing is published (base_drift).
grant '{"contents":"write","pull_requests":"write","metadata":"read"}'
read -r wb _ < <(candidate wfbase .github/workflows/lint.yml 'on: pull_request')
g update-ref refs/heads/main "$wb"
g reset -q --hard main
read -r c6 t6 < <(candidate 6 src/six.txt six "$wb")
run ahead "$(publication 6 "$c6" "$t6" "$wb")"
expect ahead 3 base_drift
[ -z "$(remote_branch forge/job-6)" ] || fail "ahead: branch pushed"
g update-ref refs/heads/main "$base"
g reset -q --hard main

# A ruleset forbids creating forge/* branches: GH013, push_rejected.
curl -fsS -X POST --data "{\"owner\":\"$owner\",\"repo\":\"$project\",\"patterns\":[\"forge/*\"]}" "http://$fake_control/protect" || fail "protect"
read -r c9 t9 < <(candidate 9 src/nine.txt nine)
run protected "$(publication 9 "$c9" "$t9")"
expect protected 3 push_rejected
[ -z "$(remote_branch forge/job-9)" ] || fail "protected: branch pushed"
curl -fsS -X POST --data "{\"owner\":\"$owner\",\"repo\":\"$project\",\"patterns\":[]}" "http://$fake_control/protect" || fail "unprotect"

# 4. the branch exists on GitHub at another commit.
read -r c4 t4 < <(candidate 4 src/four.txt four)
g push -q "$remote" "$c1:refs/heads/forge/job-4"
run conflict "$(publication 4 "$c4" "$t4")"
expect conflict 3 branch_conflict
[ "$(remote_branch forge/job-4)" = "$c1" ] || fail "conflict: branch moved"

# A legal branch whose name ends like ours (git ls-remote matches refs by
# their tail) is not ours: the publication goes ahead.
read -r c7 t7 < <(candidate 7 src/seven.txt seven)
g push -q "$remote" "$c1:refs/heads/x/refs/heads/forge/job-7"
run lookalike "$(publication 7 "$c7" "$t7")"
expect lookalike 0
[ "$(remote_branch forge/job-7)" = "$c7" ] || fail "lookalike: branch not pushed"
[ "$(remote_branch x/refs/heads/forge/job-7)" = "$c1" ] || fail "lookalike: the other branch moved"

# GitHub carries out the push but its answer is lost: the branch is read
# back, found at the candidate, and the PR is created in the same run.
read -r c8 t8 < <(candidate 8 src/eight.txt eight)
curl -fsS -X POST --data "{\"repo\":\"$owner/$project\",\"mode\":\"lose-push\"}" "http://$fake_control/fault" || fail "set git fault"
run lost-push "$(publication 8 "$c8" "$t8")"
curl -fsS -X POST --data "{\"repo\":\"$owner/$project\",\"mode\":\"\"}" "http://$fake_control/fault" || fail "clear git fault"
expect lost-push 0
[ "$(remote_branch forge/job-8)" = "$c8" ] || fail "lost-push: branch not pushed"
[ "$(field pr_created <"$tmp/lost-push.out")" = True ] || fail "lost-push: no PR"

# 5. local refusals: nothing reaches GitHub.
before=$(wc -l <"$tmp/github-requests.log")
read -r c5 t5 < <(candidate 5 src/five.txt five)
g commit -q --allow-empty -m drift
run drift "$(publication 5 "$c5" "$t5")"
expect drift 3 base_drift
g reset -q --hard "$base"
run tree "$(publication 5 "$c5" "$(printf '4%.0s' {1..40})")"
expect tree 3 tree_mismatch
echo dirty >>"$repo/README"
run dirty "$(publication 5 "$c5" "$t5")"
expect dirty 3 worktree_dirty
g checkout -q -- README
chmod 0644 "$key"
run key "$(publication 5 "$c5" "$t5")"
expect key 1 key_unsafe
chmod 0600 "$key"
run lock "$(publication 5 "$c5" "$t5" | sed 's#"forge/job-5"#"forge/x.lock/job-5"#')"
expect lock 3 publication_invalid
config https://api.github.com.evil.example
run api-base "$(publication 5 "$c5" "$t5")"
expect api-base 1 api_base_refused
config https://api.github.com
[ "$(wc -l <"$tmp/github-requests.log")" = "$before" ] || fail "a refused publication reached GitHub"
run after "$(publication 5 "$c5" "$t5")"
expect after 0

# 6. every token was revoked, and none appears anywhere it should not.
[ -s "$tmp/fake/tokens" ] || fail "no token minted"
n=0
while read -r tok; do
  n=$((n + 1))
  printf 'Authorization: Bearer %s\n' "$tok" >"$tmp/fake/header"
  code=$(curl -s -o /dev/null -w '%{http_code}' -H @"$tmp/fake/header" "https://api.github.com/repos/$owner/$project/pulls")
  [ "$code" = 401 ] || fail "token $n not revoked (status $code)"
done <"$tmp/fake/tokens"
rm -f "$tmp/fake/header"
[ -s "$tmp/cmdline-samples" ] || fail "no /proc samples"
grep -q 'push --porcelain' "$tmp/cmdline-samples" || fail "the /proc samples never caught the git push"
# /tmp is shared with other processes whose files come and go: find's
# complaints about vanished entries are not failures.
newer() { find "$tmp" /tmp -xdev -path "$tmp/fake" -prune -o -type f -newer "$tmp/fake/marker" -print0 2>/dev/null || true; }
written=$(newer | tr -cd '\0' | wc -c)
[ "$written" -gt 0 ] || fail "no written files found"
hits=0
while IFS= read -r -d '' f; do
  echo "forge-github-e2e: token found in $f" >&2
  hits=$((hits + 1))
done < <(newer | xargs -0 -r grep -l -Z -F -f "$tmp/fake/tokens" 2>/dev/null || true)
# The Basic credential git would send is base64 of x-access-token:<token>.
python3 - "$tmp/fake/tokens" >"$tmp/fake/basic" <<'PY'
import base64, sys
for t in open(sys.argv[1]).read().split():
    print(base64.b64encode(("x-access-token:" + t).encode()).decode())
PY
for f in "$tmp/github-requests.log" "$tmp/cmdline-samples"; do
  grep -F -q -f "$tmp/fake/tokens" "$f" && { echo "forge-github-e2e: token found in $f" >&2; hits=$((hits + 1)); }
  grep -F -q -f "$tmp/fake/basic" "$f" && { echo "forge-github-e2e: Basic credential found in $f" >&2; hits=$((hits + 1)); }
done
[ "$hits" = 0 ] || fail "$hits files hold a token value"
[ -z "$(find "$tmp/run" -mindepth 1 -print -quit)" ] || fail "forge-github left files in its temporary directory"
echo "forge-github-e2e: PASS ($n tokens, $written written files and $(wc -l <"$tmp/cmdline-samples") cmdline/environ lines searched)"
