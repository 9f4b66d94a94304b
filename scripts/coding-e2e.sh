#!/usr/bin/env bash
# CODING-E2E: one coding job end to end through a real Gate and Worker.
#
#  1. A generated local repository (main branch) is registered with Gate
#     and Worker; the Worker runs forge-codex-plugin with the deterministic
#     fake Codex (testdata/fake-codex/codex), or the real Codex when
#     CODEX_BIN is set (with its key in OPENAI_API_KEY); the plugin
#     reaches the model through the Worker's gateway (worker.json
#     providers: one OpenAI provider), which the fake checks. (Until cmd/forge-codex-plugin exists the script
#     says so and uses testdata/edit-plugin instead.)
#  2. A coding task with two scoped checks and an author identity is
#     submitted and waited for.
#  3. Proven: success; candidate_sha equals the deterministic ref
#     refs/agent-forge/candidates/<job>/<attempt>; its parent is the base;
#     Author is the task identity and Committer is Agent Forge; both checks
#     passed in the candidate (evidence names the candidate SHA); the
#     worktree and private directories are gone; the ref and commit survive
#     `git reflog expire --expire=now --all && git gc --prune=now`; no log
#     holds a token or the instruction.
# Everything lives in a private temp dir; a trap ends every process.
# Final line: CODING-E2E PASS.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
cd "$(dirname "$0")/.."

e2e_setup coding-e2e
e2e_build forge-gate forge-worker forge
if [ -d cmd/forge-codex-plugin ]; then
  go build -o "$bin/forge-codex-plugin" ./cmd/forge-codex-plugin || fail "build forge-codex-plugin"
  plugin_argv="\"$bin/forge-codex-plugin\""
  if [ -n "${CODEX_BIN:-}" ]; then
    echo "coding-e2e: using the real Codex at CODEX_BIN"
  else
    CODEX_BIN=$(pwd -P)/testdata/fake-codex/codex
    deterministic=1
    echo "coding-e2e: using the fake Codex"
  fi
  instruction="Create a file named hello.txt containing one line: hello from forge."
else
  echo "coding-e2e: cmd/forge-codex-plugin is not in this tree yet; using testdata/edit-plugin"
  go build -o "$bin/edit-plugin" ./testdata/edit-plugin || fail "build edit-plugin"
  plugin_argv="\"$bin/edit-plugin\""
  CODEX_BIN=/nonexistent
  deterministic=1
  instruction=$'write hello.txt hello from forge\nsubject feat: add hello.txt\nreport Added hello.txt|hello.txt: new file with one line'
fi
export CODEX_BIN
deterministic=${deterministic:-}
# The sandbox reads the Codex executable's directory (the fake, or the
# real CLI's installation) besides the system paths.
codex_dir=$(cd "$(dirname "$CODEX_BIN")" 2>/dev/null && pwd -P || echo /nonexistent)

FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_WORKER_TOKEN=worker-$(rand)
export FORGE_OWNER_TOKEN FORGE_WORKER_TOKEN
# The plugin reaches its model through the Worker's gateway: one OpenAI
# provider, its key in OPENAI_API_KEY (the Worker's alone). The fake Codex
# never calls it, so a placeholder key does.
if [ -z "${OPENAI_API_KEY:-}" ]; then
  [ -n "$deterministic" ] || fail "the real Codex needs OPENAI_API_KEY (the Worker's gateway holds it)"
  OPENAI_API_KEY=sk-placeholder-$(rand)
fi
export OPENAI_API_KEY

# 1. A generated repository with a base commit on main.
mkdir -m 0700 "$tmp/repos" "$tmp/worktrees" "$tmp/runtime" "$tmp/state"
repo=$tmp/repos/demo
GIT_CONFIG_GLOBAL=/dev/null git init -q -b main "$repo"
printf 'demo repository\n' >"$repo/README.md"
seed_commit base
base=$(g rev-parse HEAD)

exec_policy='{"plugin_id":"codex","environment":["PATH","CODEX_BIN"],"plugin_timeout":"2m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}'
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:0","database":"$tmp/state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"10s","retry_base":"1s","max_attempts":2},
 "default_execution":$exec_policy,
 "workers":[{"id":"worker-1","pool":"local","token_env":"FORGE_WORKER_TOKEN","concurrency":1}],
 "repositories":[{"id":"demo","default_branch":"main","worker_pool":"local","execution":$exec_policy}]}
EOF

e2e_start_gate "$tmp/gate.log" "Gate did not start"

cat >"$tmp/worker.json" <<EOF
{"version":1,"gate_url":"ws://$addr","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"500ms","concurrency":1,
 "repository_roots":["$tmp/repos"],"worktree_root":"$tmp/worktrees","runtime_root":"$tmp/runtime",
 "repositories":[{"id":"demo","path":"$repo"}],
 "plugins":[{"id":"codex","argv":[$plugin_argv]}],
 "providers":[{"id":"openai","kind":"openai-responses","base_url":"https://api.openai.com/v1","key_env":"OPENAI_API_KEY"}],
 "environment_allowlist":["PATH","CODEX_BIN"],"check_environment_allowlist":["PATH"],
 "sandbox_read_paths":["$codex_dir"],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
EOF
e2e_start_worker

# 2. Submit and wait.
python3 - "$base" "$instruction" >"$tmp/task.json" <<'PY'
import json, sys
print(json.dumps({"repository_id": "demo", "base_sha": sys.argv[1], "instruction": sys.argv[2],
                  "tests": [["sh", "-c", "test -f hello.txt"], ["grep", "-qx", "hello from forge", "hello.txt"]],
                  "commit_author_name": "Ada Lovelace", "commit_author_email": "ada@example.org"}))
PY
job_id=$("$bin/forge" submit -file "$tmp/task.json" | field id) || fail "forge submit"
"$bin/forge" wait -timeout 120s -poll 100ms "$job_id" >"$tmp/aggregate.json" || fail "forge wait (exit $?): $(cat "$tmp/aggregate.json")"

# 3. The aggregate.
read -r cand attempt < <(python3 - "$tmp/aggregate.json" "$deterministic" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
deterministic = sys.argv[2] == "1"
job, attempts = a["job"], a["attempts"]
assert job["status"] == "succeeded", job
cand = job["candidate_sha"]
assert len(cand) == 40, job
assert len(attempts) == 1, attempts
at = attempts[0]
assert at["status"] == "succeeded" and at["candidate_sha"] == cand, at
ev = at["evidence"]
checks = [r for r in ev if r["phase"] == "scoped_check"]
assert [c["index"] for c in checks] == [0, 1], ev
for c, argc in zip(checks, (3, 4)):
    assert c["reason"] == "passed" and c["exit_code"] == 0 and c["sha"] == cand, c
    assert c["arg_count"] == argc and c["args"] == ["[REDACTED]"] * argc, c
assert ev[-1] == {"phase": "candidate_commit", "reason": "created", "sha": cand}, ev
rep = at.get("agent_report")
assert rep is not None or not deterministic, "the deterministic plugin always reports"
if rep is not None:
    assert rep["self_reported"] is True and rep["summary"] and rep["changes"], rep
print(cand, at["id"])
PY
) || fail "aggregate does not match"

ref="refs/agent-forge/candidates/$job_id/$attempt"
[ "$(g rev-parse "$ref")" = "$cand" ] || fail "candidate ref does not point at candidate_sha"
[ "$(g rev-parse "$cand^")" = "$base" ] || fail "candidate parent is not the base"
[ "$(g rev-list --count "$base..$cand")" = 1 ] || fail "candidate is not one commit on the base"
[ "$(g log -1 --format='%an <%ae>' "$cand")" = "Ada Lovelace <ada@example.org>" ] || fail "author is not the task identity"
[ "$(g log -1 --format='%cn <%ce>' "$cand")" = "Agent Forge <forge@example.invalid>" ] || fail "committer is not Agent Forge"
[ "$(g show "$cand:hello.txt")" = "hello from forge" ] || fail "candidate content"
subject=$(g log -1 --format=%s "$cand")
[ -n "$subject" ] || fail "empty commit subject"
if [ -n "$deterministic" ] && [ "$subject" != "feat: add hello.txt" ]; then fail "commit subject is not the negotiated one"; fi
[ -z "$(ls -A "$tmp/worktrees")" ] || fail "worktree left behind"
[ -z "$(ls -A "$tmp/runtime")" ] || fail "runtime directory left behind"
[ "$(g worktree list --porcelain | grep -c '^worktree ')" = 1 ] || fail "worktree registration left behind"
if [ "$(g rev-parse HEAD)" != "$base" ] || [ "$(g symbolic-ref HEAD)" != refs/heads/main ]; then fail "the repository's own checkout moved"; fi
g reflog expire --expire=now --all
g gc -q --prune=now
[ "$(g rev-parse "$ref")" = "$cand" ] || fail "ref lost after gc"
g cat-file -e "$cand^{commit}" || fail "candidate object lost after gc"

stop Worker "$worker_pid"
stop Gate "$gate_pid"
pids=()
for f in "$tmp"/*.log; do
  if grep -q -e "$FORGE_OWNER_TOKEN" -e "$FORGE_WORKER_TOKEN" -e "$OPENAI_API_KEY" -e "hello from forge" -e "$tmp" "$f"; then
    fail "$(basename "$f") contains a token, the provider key, the instruction or a path"
  fi
done
echo "candidate $cand on $ref: $(g log -1 --format=%s "$cand")"
echo "CODING-E2E PASS"
