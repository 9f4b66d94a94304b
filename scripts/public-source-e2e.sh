#!/usr/bin/env bash
# PUBLIC-SOURCE-E2E: Gate clones and fetches public repositories from
# https://github.com; Workers receive bases and return candidates as git
# bundles over the Gate's listener and never open its repositories.
#
# The production forge-gate, forge-worker and forge run unmodified inside a
# private network and mount namespace (scripts/lib/netns.sh): /etc/hosts
# maps github.com to 127.0.0.1, the system CA bundle also trusts a test CA,
# and testdata/fake-github serves git smart HTTP through the real
# `git http-backend` on 127.0.0.1:443 from $tmp/github/<owner>/<repo>.git.
#
# Proven:
#  1. The Worker ("source":"gate" registrations, no path) starts before
#     the Gate has cloned anything.
#  2. clone -> job -> candidate -> cleanup: the first submit clones
#     octo/demo into <root>/<sha256 of the URL>.git (bare, origin = the URL,
#     only refs/heads/main: no tags, no other branch); the job succeeds with
#     a candidate ref the Gate stored from the Worker's bundle in that bare
#     repository; worktrees and private directories are gone (the Worker's
#     source cache stays in runtime_root/sources).
#  3. A hook planted in the bare repository never runs (Gate fetch, Worker
#     git); a commit pushed upstream is fetched by the next submit, which
#     reuses the repository (no second clone) and succeeds on that base.
#  4. Refusals that create no job and name no path: base not on the
#     default branch (an earlier candidate), unknown base (a commit only on
#     another upstream branch), upstream answering a redirect, upstream
#     asking for credentials (fails as credentials_required, not after a
#     prompt or a timeout), bare repository whose origin was changed.
#     And a compromised Worker host (testdata/rawlane candidate: its
#     Worker token, a current lease) uploads a hand-made candidate whose
#     .gitmodules url is `--upload-pack=...`, plus a blob beyond the
#     candidate: 422 candidate_refused fsck_failed (git before 2.46 takes
#     such a bundle by fetch), the bare repository's refs, packs and
#     objects unchanged, the job failed candidate_refused.
#  5. 16 concurrent submits on a cold repository: one clone, an intact
#     repository (git fsck), all 16 jobs created and succeeded.
# Then it measures, in this one run: how many fetches 16 concurrent submits
# cause (cold and warm), submit latency p50/p99 with a warm bare repository
# and the bare `git fetch` time of the same repository.
#  6. A second Gate with delivery and two Workers under two accounts other
#     than the Gate's (uids 64101 and 64102 via setpriv, no groups, no
#     capabilities, their own 0700 directories), worker-b in its own network
#     namespace (ip netns, a veth pair) that reaches only the Gate's
#     listener (not github.com, not loopback); neither account can read the
#     Gate's repositories. One job on each Worker is delivered (merged)
#     through the offline github.com; each cold cache holds exactly the
#     base's history, and a third job on the merged main adds exactly the
#     new objects to its Worker's cache (printed). No installation token,
#     App key line or Worker/owner token appears in any log, the database,
#     an API answer or the fake's request log.
# Final line: PUBLIC-SOURCE-E2E PASS.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
# shellcheck source-path=SCRIPTDIR source=lib/netns.sh
source "$(dirname "$0")/lib/netns.sh"
# Modules are fetched (if at all) before the network disappears.
if [ "${AGENT_FORGE_NETNS:-}" != 1 ]; then (cd "$(dirname "$0")/.." && go mod download) || exit 1; fi
netns_enter "$@"
cd "$(dirname "$0")/.."

e2e_setup public-source-e2e
e2e_build forge-gate forge-worker forge
go build -o "$bin/edit-plugin" ./testdata/edit-plugin || fail "build edit-plugin"
go build -o "$bin/rawlane" ./testdata/rawlane || fail "build rawlane"
netns_setup
# The fake also serves the GitHub App API for part 6's deliveries.
mkdir -m 0700 "$tmp/secrets" "$tmp/fake"
key=$tmp/secrets/app.pem
openssl genrsa -out "$key" 2048 2>/dev/null || fail "openssl genrsa"
chmod 0600 "$key"
cat >"$tmp/fake/app.json" <<EOF
{"app_id":4242,"client_id":"Iv1.e2e","private_key_file":"$key",
 "installations":[{"id":9,"owner":"octo","repositories":["hello"],
   "permissions":{"contents":"write","pull_requests":"write","metadata":"read"}}],
 "public_repositories":["octo/demo","octo/conc","octo/bench","octo/moved","octo/hello","octo/hostile"],"runs_window_seconds":60}
EOF
netns_start_fake -app "$tmp/fake/app.json" -tokens "$tmp/fake/tokens"

FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_WORKER_TOKEN=worker-$(rand)
FORGE_HOSTILE_TOKEN=hostile-$(rand)
export FORGE_OWNER_TOKEN FORGE_WORKER_TOKEN FORGE_HOSTILE_TOKEN
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME=Seed GIT_AUTHOR_EMAIL=seed@example.invalid GIT_COMMITTER_NAME=Seed GIT_COMMITTER_EMAIL=seed@example.invalid
git_exe=$(readlink -f "$(command -v git)")

# Upstream repositories on the fake github.com, each pushed from a work
# tree: octo/demo has main, a tag and a branch only it has.
upstream() { # NAME: create $tmp/github/octo/NAME.git and $tmp/work/NAME with one commit on main
  local w=$tmp/work/$1
  git init -q -b main "$w"
  printf '%s\n' "$1" >"$w/README"
  git -C "$w" add -A
  git -C "$w" commit -q -m "first"
  git init -q --bare "$fake_git_root/octo/$1.git"
  git -C "$w" push -q "$fake_git_root/octo/$1.git" main
}
for r in demo conc bench moved private hello hostile; do upstream "$r"; done
w=$tmp/work/demo
git -C "$w" tag v1
git -C "$w" checkout -q -b feature
git -C "$w" commit -q --allow-empty -m "only on feature"
feature=$(git -C "$w" rev-parse HEAD)
git -C "$w" checkout -q main
git -C "$w" push -q "$fake_git_root/octo/demo.git" main feature v1
base1=$(git -C "$w" rev-parse main)
netns_fault octo/moved redirect
netns_fault octo/private auth

url() { printf 'https://github.com/octo/%s.git' "$1"; }
sha() { printf %s "$(url "$1")" | sha256sum | cut -d' ' -f1; }
pub=$tmp/public
mkdir -m 0700 "$pub" "$tmp/worktrees" "$tmp/runtime" "$tmp/state"
prepared() { printf '%s/%s.git' "$pub" "$(sha "$1")"; }
demo=$(prepared demo)

exec_policy='{"plugin_id":"edit","environment":["PATH"],"plugin_timeout":"1m","check_timeout":"1m","git_timeout":"20s","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}'
repo_entry() { # NAME [POOL]
  printf '{"id":"%s","repository_url":"%s","default_branch":"main","worker_pool":"%s","execution":%s}' "$1" "$(url "$1")" "${2:-local}" "$exec_policy"
}
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:0","database":"$tmp/state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"30s","retry_base":"1s","max_attempts":1},
 "default_execution":$exec_policy,
 "workers":[{"id":"worker-1","pool":"local","token_env":"FORGE_WORKER_TOKEN","concurrency":2},
            {"id":"rawlane","pool":"hostile","token_env":"FORGE_HOSTILE_TOKEN","concurrency":1}],
 "public_repository_root":"$pub","git_executable":"$git_exe",
 "repositories":[$(repo_entry demo),$(repo_entry conc),$(repo_entry bench),$(repo_entry moved),$(repo_entry private),$(repo_entry hostile hostile)]}
EOF
e2e_start_gate "$tmp/gate.log" "Gate did not start"

# 1. bench is deliberately not registered: its jobs stay pending, so the
# latency figures measure the Gate alone.
cat >"$tmp/worker.json" <<EOF
{"version":1,"gate_url":"ws://$addr","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"500ms","concurrency":2,
 "worktree_root":"$tmp/worktrees","runtime_root":"$tmp/runtime",
 "repositories":[{"id":"demo","source":"gate"},{"id":"conc","source":"gate"}],
 "plugins":[{"id":"edit","argv":["$bin/edit-plugin"]}],
 "environment_allowlist":["PATH"],"check_environment_allowlist":["PATH"],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
EOF
[ ! -e "$demo" ] || fail "the prepared repository exists before the first submit"
e2e_start_worker
wait_log "$tmp/worker.log" '"connected" in e.get("msg", "")' >/dev/null || fail "Worker did not connect while its public repository is not cloned yet"

# submit REPO BASE: POST a coding task; prints "STATUS BODY" (one line).
submit() {
  python3 - "$FORGE_GATE_URL" "$FORGE_OWNER_TOKEN" "$1" "$2" <<'PY'
import json, sys, urllib.request, urllib.error
url, token, repo, base = sys.argv[1:]
task = {"repository_id": repo, "base_sha": base,
        "instruction": "write hello.txt hi\nsubject feat: hello\nreport Added hello|hello.txt: new"}
req = urllib.request.Request(url + "/v1/jobs", data=json.dumps(task).encode(), method="POST",
                             headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=120) as r:
        print(r.status, r.read().decode().strip())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
PY
}
job_count() {
  curl -fsS -H "Authorization: Bearer $FORGE_OWNER_TOKEN" "$FORGE_GATE_URL/v1/debug/jobs?limit=100" |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["jobs"]))'
}
# info_refs REPO: how many fetches (or clones) reached the upstream.
info_refs() { count_in "$tmp/github-requests.log" "e['path'] == '/octo/$1.git/info/refs' and e['method'] == 'GET'"; }
wait_ok() { # JOB: wait for success, print the candidate
  "$bin/forge" wait -timeout 120s -poll 100ms "$1" >"$tmp/agg-$1.json" || fail "job $1 did not succeed: $(head -c 2000 "$tmp/agg-$1.json")"
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"]["candidate_sha"])' "$tmp/agg-$1.json"
}
assert_clean() {
  [ -z "$(ls -A "$tmp/worktrees")" ] || fail "worktree left behind"
  [ "$(ls -A "$tmp/runtime")" = sources ] || fail "runtime directory left behind: $(ls -A "$tmp/runtime")"
  [ "$(git --git-dir="$1" worktree list --porcelain | grep -c '^worktree ')" = 1 ] || fail "worktree registration left behind"
}

# 2. First submit: clone, job, candidate, cleanup.
read -r code body < <(submit demo "$base1")
[ "$code" = 201 ] || fail "first submit: $code $body"
job1=$(field id <<<"$body")
cand1=$(wait_ok "$job1")
[ "$(git --git-dir="$demo" rev-parse --is-bare-repository)" = true ] || fail "prepared repository is not bare"
[ "$(git --git-dir="$demo" config --get remote.origin.url)" = "$(url demo)" ] || fail "origin is not the URL"
[ "$(git --git-dir="$demo" for-each-ref --format='%(refname)' refs/heads refs/tags refs/remotes)" = refs/heads/main ] ||
  fail "more than refs/heads/main was fetched: $(git --git-dir="$demo" for-each-ref --format='%(refname)')"
[ -z "$(git --git-dir="$demo" tag -l)" ] || fail "tags were fetched"
! git --git-dir="$demo" cat-file -e "$feature^{commit}" 2>/dev/null || fail "another branch's commit was fetched"
[ "$(git --git-dir="$demo" for-each-ref --format='%(objectname)' refs/agent-forge/candidates/)" = "$cand1" ] || fail "candidate ref missing in the bare repository"
[ "$(git --git-dir="$demo" rev-parse "$cand1^")" = "$base1" ] || fail "candidate parent is not the base"
assert_clean "$demo"
[ "$(info_refs demo)" = 1 ] || fail "first submit reached upstream $(info_refs demo) times"
for e in "$pub"/* "$pub"/.[!.]*; do
  [ -e "$e" ] || continue
  case ${e##*/} in .forge-git-home | "$(sha demo).git") ;; *) fail "unexpected entry in the public root: ${e##*/}" ;; esac
done

# 3. Planted hooks never run; an upstream push is fetched; reuse.
marker=$tmp/hook-ran
mkdir -p "$demo/hooks"
for h in reference-transaction post-fetch pre-auto-gc post-checkout post-index-change; do
  printf '#!/bin/sh\ntouch %s\n' "$marker" >"$demo/hooks/$h"
  chmod +x "$demo/hooks/$h"
done
git -C "$w" commit -q --allow-empty -m "pushed upstream later"
base2=$(git -C "$w" rev-parse HEAD)
git -C "$w" push -q "$fake_git_root/octo/demo.git" main
read -r code body < <(submit demo "$base2")
[ "$code" = 201 ] || fail "submit on the newly pushed commit: $code $body"
job2=$(field id <<<"$body")
cand2=$(wait_ok "$job2")
[ "$(git --git-dir="$demo" rev-parse "$cand2^")" = "$base2" ] || fail "second candidate is not on the pushed commit"
[ ! -e "$marker" ] || fail "a hook planted in the bare repository ran"
[ "$(count_in "$tmp/gate.log" "e.get('repository_id') == 'demo' and e.get('kind') == 'clone'")" = 1 ] || fail "the demo repository was cloned more than once"
[ "$(info_refs demo)" = 2 ] || fail "upstream reached $(info_refs demo) times after two submits"
assert_clean "$demo"

# 4. Refusals: status, phase/reason, no path, no job.
refuse() { # NAME REPO BASE STATUS PHASE REASON
  local before code body
  before=$(job_count)
  read -r code body < <(submit "$2" "$3")
  [ "$code" = "$4" ] || fail "$1: HTTP $code, want $4: $body"
  python3 - "$body" "$5" "$6" <<'PY' || fail "$1: body $body"
import json, sys
e = json.loads(sys.argv[1])["error"]
assert e["code"] == "source_failed" and e["phase"] == sys.argv[2] and e["reason"] == sys.argv[3], e
assert e["retryable"] is False, e
PY
  case $body in */*) fail "$1: the answer names a path or URL: $body" ;; esac
  [ "$(job_count)" = "$before" ] || fail "$1: a job was created"
}
refuse "base not on the default branch" demo "$cand1" 422 base base_not_on_default_branch
refuse "unknown base" demo "$feature" 422 base base_missing
refuse "redirect" moved "$base1" 502 clone redirect
refuse "credentials asked" private "$base1" 502 clone credentials_required
if [ -e "$(prepared moved)" ] || [ -e "$(prepared private)" ]; then fail "a refused clone left a repository"; fi
for e in "$pub"/.forge-clone-*; do [ -e "$e" ] && fail "a refused clone left a temporary directory"; done
git --git-dir="$demo" config remote.origin.url https://github.com/evil/demo.git
refuse "origin changed" demo "$base2" 502 validate origin_mismatch
git --git-dir="$demo" config remote.origin.url "$(url demo)"
[ "$(info_refs demo)" = 4 ] || fail "a refused repository was fetched into (upstream reached $(info_refs demo) times)"

# A compromised Worker host's candidate: a .gitmodules whose url is an
# option and a blob beyond the candidate, uploaded with its Worker token
# for its current lease. Refused by the strict fsck; nothing stored.
hw=$tmp/work/hostile
hostile_base=$(git -C "$hw" rev-parse HEAD)
modules=$(printf '[submodule "x"]\n\tpath = x\n\turl = --upload-pack=touch %s\n' "$tmp/owned" | git -C "$hw" hash-object -w --stdin)
extra=$(printf 'beyond the candidate\n' | git -C "$hw" hash-object -w --stdin)
htree=$(printf '100644 blob %s\t.gitmodules\n' "$modules" | git -C "$hw" mktree)
hcommit=$(GIT_AUTHOR_NAME="Agent Forge" GIT_AUTHOR_EMAIL=forge@example.invalid GIT_COMMITTER_NAME="Agent Forge" \
  GIT_COMMITTER_EMAIL=forge@example.invalid GIT_AUTHOR_DATE="1700000000 +0000" GIT_COMMITTER_DATE="1700000000 +0000" \
  git -C "$hw" commit-tree "$htree" -p "$hostile_base" -m "hostile")
printf '%s\n^%s\n%s\n' "$hcommit" "$hostile_base" "$extra" |
  git -C "$hw" pack-objects -q --stdout --thin --revs >"$tmp/hostile.pack" || fail "hostile pack"
mkfifo "$tmp/hostile-go"
"$bin/rawlane" -gate "ws://$addr" -worker rawlane -token-env FORGE_HOSTILE_TOKEN candidate hostile edit "$tmp/hostile.pack" "$hcommit" "$htree" \
  <"$tmp/hostile-go" >"$tmp/hostile.out" 2>"$tmp/hostile.log" &
hostile_pid=$!
pids+=("$hostile_pid")
exec 3>"$tmp/hostile-go"
wait_log "$tmp/hostile.out" 'e["event"] == "welcome"' >/dev/null || fail "the hostile lane was not welcomed"
read -r code body < <(submit hostile "$hostile_base")
[ "$code" = 201 ] || fail "hostile submit: $code $body"
hjob=$(field id <<<"$body")
wait_log "$tmp/hostile.out" 'e["event"] == "base"' >/dev/null || fail "the hostile lane got no lease"
hrepo=$(prepared hostile)
snapshot() { # the bare repository's refs, packs and objects
  git --git-dir="$hrepo" for-each-ref
  ls "$hrepo/objects/pack"
  git --git-dir="$hrepo" cat-file --batch-all-objects --batch-check='%(objectname)'
}
snapshot >"$tmp/hostile.before"
echo go >&3
exec 3>&-
wait "$hostile_pid" || fail "the hostile lane failed: $(cat "$tmp/hostile.log")"
python3 - "$tmp/hostile.out" <<'PY' || fail "the hostile upload was not refused as it should be: $(cat "$tmp/hostile.out")"
import json, sys
ev = {e["event"]: e for e in map(json.loads, open(sys.argv[1]))}
c = ev["candidate"]
assert c["status"] == 422 and c["body"]["error"]["code"] == "candidate_refused" and c["body"]["error"]["reason"] == "fsck_failed", c
assert "/" not in json.dumps(c["body"]), c
assert ev["result"]["reply"] == "ack", ev["result"]
PY
snapshot >"$tmp/hostile.after"
cmp -s "$tmp/hostile.before" "$tmp/hostile.after" || fail "the refused upload stored something: $(diff "$tmp/hostile.before" "$tmp/hostile.after")"
for o in "$hcommit" "$modules" "$extra"; do
  ! git --git-dir="$hrepo" cat-file -e "$o" 2>/dev/null || fail "the refused upload's object $o is in the bare repository"
done
[ ! -e "$tmp/owned" ] || fail "the hostile .gitmodules ran"
curl -fsS -H "Authorization: Bearer $FORGE_OWNER_TOKEN" "$FORGE_GATE_URL/v1/jobs/$hjob" |
  python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["status"] == "failed" and j["failure_code"] == "candidate_refused", j' ||
  fail "the hostile job did not fail candidate_refused"

# 5. Sixteen concurrent submits on a cold repository.
conc_base=$(git -C "$tmp/work/conc" rev-parse HEAD)
bench_base=$(git -C "$tmp/work/bench" rev-parse HEAD)
python3 - "$FORGE_GATE_URL" "$FORGE_OWNER_TOKEN" "$conc_base" "$tmp/conc.json" <<'PY' || fail "concurrent submits"
import json, sys, threading, urllib.request
url, token, base, out = sys.argv[1:]
res = [None] * 16
def one(i):
    task = {"repository_id": "conc", "base_sha": base, "instruction": "write c%d.txt c\nsubject feat: c" % i}
    req = urllib.request.Request(url + "/v1/jobs", data=json.dumps(task).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        res[i] = (r.status, json.load(r)["id"])
ts = [threading.Thread(target=one, args=(i,)) for i in range(16)]
[t.start() for t in ts]
[t.join() for t in ts]
assert all(r and r[0] == 201 for r in res), res
json.dump([r[1] for r in res], open(out, "w"))
PY
conc=$(prepared conc)
[ "$(count_in "$tmp/gate.log" "e.get('repository_id') == 'conc' and e.get('kind') == 'clone'")" = 1 ] || fail "16 concurrent submits cloned more than once"
cold_fetches=$(info_refs conc)
for j in $(python3 -c 'import json,sys; print(" ".join(json.load(open(sys.argv[1]))))' "$tmp/conc.json"); do
  wait_ok "$j" >/dev/null
done
# After the jobs: while one runs, its worktree entry is legitimately half made.
git --git-dir="$conc" fsck --no-progress --no-dangling 2>"$tmp/fsck.out" || fail "the concurrently prepared repository is not intact"
assert_clean "$conc"

# Figures (one run): fetches for 16 concurrent submits on a warm repository,
# submit latency on a warm repository, and the bare git fetch it wraps.
read -r code body < <(submit bench "$bench_base")
[ "$code" = 201 ] || fail "bench submit: $code $body"
before=$(info_refs bench)
python3 - "$FORGE_GATE_URL" "$FORGE_OWNER_TOKEN" "$bench_base" <<'PY' || fail "16 concurrent submits on a warm repository"
import json, sys, threading, urllib.request
url, token, base = sys.argv[1:]
codes = []
def post():
    task = {"repository_id": "bench", "base_sha": base, "instruction": "write b.txt b"}
    req = urllib.request.Request(url + "/v1/jobs", data=json.dumps(task).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        codes.append(r.status)
ts = [threading.Thread(target=post) for _ in range(16)]
[t.start() for t in ts]
[t.join() for t in ts]
assert codes == [201] * 16, codes
PY
warm_fetches=$(( $(info_refs bench) - before ))
# Submit latency on the warm repository, alternating with the same fetch
# the Gate runs, by hand, into a copy of that repository.
cp -a "$(prepared bench)" "$tmp/bench-copy.git"
python3 - "$FORGE_GATE_URL" "$FORGE_OWNER_TOKEN" "$bench_base" "$git_exe" "$tmp" "$(url bench)" <<'PY' || fail "latency run"
import json, subprocess, sys, time, urllib.request
url, token, base, git, tmp, src = sys.argv[1:]
env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
       "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false"}
fetch = [git, "-c", "core.hooksPath=/dev/null", "-c", "credential.helper=", "-c", "protocol.allow=never",
         "-c", "protocol.https.allow=always", "-c", "http.followRedirects=false", "--git-dir=" + tmp + "/bench-copy.git",
         "fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--no-write-fetch-head", "--no-auto-maintenance",
         src, "+refs/heads/main:refs/heads/main"]
sub, bare = [], []
for _ in range(30):
    task = {"repository_id": "bench", "base_sha": base, "instruction": "write b.txt b"}
    req = urllib.request.Request(url + "/v1/jobs", data=json.dumps(task).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    t = time.monotonic()
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.status == 201
    sub.append((time.monotonic() - t) * 1000)
    t = time.monotonic()
    subprocess.run(fetch, env=env, check=True)
    bare.append((time.monotonic() - t) * 1000)
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]
print("public-source-e2e: figures: warm submit latency p50 %.1f ms p99 %.1f ms; bare git fetch p50 %.1f ms p99 %.1f ms (n=%d each, alternated)"
      % (pct(sub, 50), pct(sub, 99), pct(bare, 50), pct(bare, 99), len(sub)))
PY
echo "public-source-e2e: figures: 16 concurrent submits: cold repository 1 clone + $((cold_fetches - 1)) fetch(es); warm repository $warm_fetches fetch(es)"

stop Worker "$worker_pid"
stop Gate "$gate_pid"
for f in "$tmp"/gate.log "$tmp"/worker.log; do
  if grep -q -e "$FORGE_OWNER_TOKEN" -e "$FORGE_WORKER_TOKEN" -e "$pub" "$f"; then
    fail "$(basename "$f") contains a token or a repository path"
  fi
done

# 6. Two Workers under two accounts other than the Gate's (root), each with
# its own directories; worker-b in its own network namespace, reaching the
# Gate only through its listener on a veth pair. Their jobs are delivered
# through the offline github.com; a warm cache fetches only new objects.
ua=64101
ub=64102
chmod 0711 "$tmp"
for w in a b; do mkdir -m 0700 "$tmp/w$w" "$tmp/w$w/worktrees" "$tmp/w$w/runtime"; done
chown -R "$ua:$ua" "$tmp/wa"
chown -R "$ub:$ub" "$tmp/wb"
# ip netns keeps its files in /run/netns: a tmpfs private to this mount
# namespace, so nothing is left on the host.
mkdir -p /run/netns
mount -t tmpfs -o mode=0755 forge-netns /run/netns || fail "mount /run/netns"
ip netns add forge-wb || fail "ip netns add"
ip link add fg0 type veth peer name fg1 || fail "veth pair"
ip link set fg1 netns forge-wb
ip addr add 10.231.0.1/30 dev fg0
ip link set fg0 up
ip -n forge-wb addr add 10.231.0.2/30 dev fg1
ip -n forge-wb link set fg1 up
ip -n forge-wb link set lo up
pub2=$tmp/public2
mkdir -m 0700 "$pub2" "$tmp/state2"
FORGE_GITHUB_APP_ID=4242
TOKEN_A=worker-a-$(rand)
TOKEN_B=worker-b-$(rand)
export FORGE_GITHUB_APP_ID TOKEN_A TOKEN_B
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"10.231.0.1:0","database":"$tmp/state2/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"30s","retry_base":"1s","max_attempts":1},
 "default_execution":$exec_policy,
 "workers":[{"id":"worker-a","pool":"local","token_env":"TOKEN_A","concurrency":1},
            {"id":"worker-b","pool":"local","token_env":"TOKEN_B","concurrency":1}],
 "public_repository_root":"$pub2","git_executable":"$git_exe",
 "repositories":[$(repo_entry hello)],
 "delivery":{"api_base":"https://api.github.com","github_app_id_env":"FORGE_GITHUB_APP_ID",
   "github_app_private_key_path":"$key","max_attempts":3,"retry_base":"1s","poll_interval":"1s",
   "no_runs_grace":"3s","timeout":"2m"}}
EOF
chmod 0600 "$tmp/gate.json"
e2e_start_gate "$tmp/gate2.log" "second Gate did not start"
prepared2=$pub2/$(sha hello).git
for w in a b; do
  cat >"$tmp/w$w/worker.json" <<EOF
{"version":1,"gate_url":"ws://$addr","id":"worker-$w","token_env":"TOKEN","heartbeat_interval":"500ms","concurrency":1,
 "worktree_root":"$tmp/w$w/worktrees","runtime_root":"$tmp/w$w/runtime",
 "repositories":[{"id":"hello","source":"gate"}],
 "plugins":[{"id":"edit","argv":["$bin/edit-plugin"]}],
 "environment_allowlist":["PATH"],"check_environment_allowlist":["PATH"],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
EOF
done
chown "$ua:$ua" "$tmp/wa/worker.json"
chown "$ub:$ub" "$tmp/wb/worker.json"
as_user() { # UID CMD..: run CMD as UID (no groups, no capabilities) with a clean environment
  local u=$1
  shift
  setpriv --reuid="$u" --regid="$u" --clear-groups --inh-caps=-all -- env -i PATH=/usr/bin:/bin "$@"
}
# Each in a cgroup of its own delegated to its account; worker-b enters its
# network namespace only (ip netns exec would mount a sysfs without the
# cgroup file system).
e2e_cgroup worker-a "$ua"
(in_cgroup "$cgroup_dir" setpriv --reuid="$ua" --regid="$ua" --clear-groups --inh-caps=-all -- \
  env -i PATH=/usr/bin:/bin TOKEN="$TOKEN_A" "$bin/forge-worker" -config "$tmp/wa/worker.json" 2>"$tmp/worker-a.log") &
wa_pid=$!
pids+=("$wa_pid")
e2e_cgroup worker-b "$ub"
(in_cgroup "$cgroup_dir" nsenter --net=/run/netns/forge-wb setpriv --reuid="$ub" --regid="$ub" --clear-groups --inh-caps=-all -- \
  env -i PATH=/usr/bin:/bin TOKEN="$TOKEN_B" "$bin/forge-worker" -config "$tmp/wb/worker.json" 2>"$tmp/worker-b.log") &
wb_pid=$!
pids+=("$wb_pid")
for w in a b; do
  wait_log "$tmp/worker-$w.log" '"connected" in e.get("msg", "")' >/dev/null || fail "worker-$w did not connect"
done
# worker-b's namespace reaches the Gate's listener and nothing else; the
# Workers' accounts cannot read the Gate's repositories or each other's.
if ip netns exec forge-wb curl -s -o /dev/null --max-time 3 https://github.com/; then fail "worker-b's namespace reaches github.com"; fi
if ip netns exec forge-wb curl -s -o /dev/null --max-time 3 "http://127.0.0.1:${addr##*:}/readyz"; then fail "worker-b's namespace reaches loopback"; fi
if as_user "$ub" test -r "$pub2"; then fail "worker-b's account can read the public repository root"; fi
if as_user "$ua" test -r "$tmp/wb/runtime"; then fail "worker-a's account can read worker-b's directories"; fi

# The first job's plugin waits on a rendezvous, a UNIX socket both
# Workers' sandboxed plugins can reach (their sandboxes open no TCP
# connection but to the Worker's gateway): the connection is held until
# $tmp/release exists.
python3 - "$tmp" <<'PY' &
import os, socket, sys, time
tmp = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(tmp + "/hold.sock")
os.chmod(tmp + "/hold.sock", 0o777)
s.listen(1)
open(tmp + "/hold.addr.tmp", "w").write(tmp + "/hold.sock")
os.rename(tmp + "/hold.addr.tmp", tmp + "/hold.addr")
c, _ = s.accept()
while not os.path.exists(tmp + "/release"):
    time.sleep(0.02)
c.close()
PY
pids+=($!)
for _ in $(seq 200); do [ -s "$tmp/hold.addr" ] && break; sleep 0.05; done
hold=unix:$(cat "$tmp/hold.addr") || fail "no rendezvous"
hello_base=$(git -C "$tmp/work/hello" rev-parse HEAD)
submit_hello() { # BASE INSTRUCTION: prints the job id
  python3 - "$FORGE_GATE_URL" "$FORGE_OWNER_TOKEN" "$1" "$2" <<'PY'
import json, sys, urllib.request
url, token, base, instruction = sys.argv[1:]
task = {"repository_id": "hello", "base_sha": base, "instruction": instruction}
req = urllib.request.Request(url + "/v1/jobs", data=json.dumps(task).encode(), method="POST",
                             headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=120) as r:
    print(json.load(r)["id"])
PY
}
worker_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["attempts"][0]["worker_id"])' "$tmp/agg-$1.json"; }
attempts() {
  curl -fsS -H "Authorization: Bearer $FORGE_OWNER_TOKEN" "$FORGE_GATE_URL/v1/jobs/$1" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["attempt_count"])'
}
ja=$(submit_hello "$hello_base" "write a.txt a
subject feat: a
await $hold")
for _ in $(seq 1 100); do [ "$(attempts "$ja")" -ge 1 ] && break; sleep 0.1; done
jb=$(submit_hello "$hello_base" "write b.txt b
subject feat: b")
wait_ok "$jb" >/dev/null
: >"$tmp/release" # release the first job
wait_ok "$ja" >/dev/null
[ "$(worker_of "$ja")" != "$(worker_of "$jb")" ] || fail "both jobs ran on $(worker_of "$ja")"
for j in "$ja" "$jb"; do
  python3 - "$tmp/agg-$j.json" <<'PY' || fail "job $j was not delivered: $(head -c 1500 "$tmp/agg-$j.json")"
import json, sys
a = json.load(open(sys.argv[1]))
assert a["job"]["status"] == "succeeded" and a["job"]["delivery"]["phase"] == "merged", a["job"]
PY
done
objects() { git --git-dir="$1" count-objects -v | awk '$1 == "count:" || $1 == "in-pack:" { n += $2 } END { print n + 0 }'; }
cold_want=$(git --git-dir="$prepared2" rev-list --objects "$hello_base" | wc -l)
for w in a b; do
  got=$(objects "$tmp/w$w/runtime/sources/hello.git")
  [ "$got" = "$cold_want" ] || fail "worker-$w's cold cache holds $got objects, the base's history $cold_want"
done
# A third job on upstream's main, now two merges ahead: its Worker's cache
# receives exactly the objects that base has beyond the cached one.
tip=$(git --git-dir="$fake_git_root/octo/hello.git" rev-parse refs/heads/main)
before_a=$(objects "$tmp/wa/runtime/sources/hello.git")
before_b=$(objects "$tmp/wb/runtime/sources/hello.git")
jc=$(submit_hello "$tip" "write c.txt c
subject feat: c")
wait_ok "$jc" >/dev/null
wc_=$(worker_of "$jc")
new_want=$(git --git-dir="$prepared2" rev-list --objects "$tip" --not "$hello_base" | wc -l)
if [ "$wc_" = worker-a ]; then
  warm=$(($(objects "$tmp/wa/runtime/sources/hello.git") - before_a))
else
  warm=$(($(objects "$tmp/wb/runtime/sources/hello.git") - before_b))
fi
[ "$warm" = "$new_want" ] || fail "the warm fetch added $warm objects, the new history has $new_want"
# The Worker logs what each fetch received (the bundle's object count).
[ "$(count_in "$tmp/worker-${wc_#worker-}.log" "e.get('msg') == 'base fetched' and e.get('job') == '$jc' and e.get('objects') == $new_want")" = 1 ] ||
  fail "worker log lacks the warm fetch's object count"
echo "public-source-e2e: worker caches: cold fetch $cold_want objects each (worker-a uid $ua, worker-b uid $ub in its own netns); warm fetch on $wc_ $warm objects (exactly the new ones)"
for w in a b; do
  [ -z "$(ls -A "$tmp/w$w/worktrees")" ] || fail "worker-$w left a worktree"
done

stop worker-a "$wa_pid"
stop worker-b "$wb_pid"
stop Gate "$gate_pid"
kill -TERM "$fake_pid" 2>/dev/null || true
pids=()
[ -s "$tmp/fake/tokens" ] || fail "no installation token minted"
grep -v -e '-----' "$key" >"$tmp/fake/keylines"
for f in "$tmp"/gate*.log "$tmp"/worker*.log "$tmp"/state2/* "$tmp"/agg-*.json "$tmp/github-requests.log"; do
  [ -f "$f" ] || continue
  if grep -a -F -q -f "$tmp/fake/tokens" "$f" || grep -a -F -q -f "$tmp/fake/keylines" "$f" ||
    grep -a -q -e "$TOKEN_A" -e "$TOKEN_B" -e "$FORGE_OWNER_TOKEN" "$f"; then
    fail "$(basename "$f") holds a token or a key line"
  fi
done
echo "PUBLIC-SOURCE-E2E PASS"
