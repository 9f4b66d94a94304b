#!/usr/bin/env bash
# CODEX-E2E: the real Codex CLI through Gate + Worker + forge-codex-plugin,
# offline, against a local fake of the Responses API.
#
#  1. `npm ci` installs @openai/codex@0.169.0 from testdata/codex-npm (the
#     lockfile pins version and integrity); CODEX_BIN is its native binary.
#     testdata/fake-responses listens on loopback: turn 1 answers a call of
#     Codex's own apply_patch tool adding the file the task names, turn 2
#     the final JSON message for the --output-schema the plugin sent. A
#     control run of Codex with only a provider configured shows the strace
#     check catches its DNS lookups (plugin marketplace, analytics); the
#     same run, with the sandbox flags the plugin used to pass on Linux
#     (danger-full-access), shows the network probe of 4b reaching the
#     fake, so that probe can fail.
#  2. The operator's worker.json declares the fake as a provider (its
#     https URL, the key's variable, an X-Forge-Via header only the
#     Worker knows); the fake serves TLS from a test authority that only
#     the Worker trusts (SSL_CERT_FILE on the Worker's process). The
#     profile (model, reasoning effort, the provider's id) is named in the
#     plugin's argv; the key's variable is in no allowlist. The repository
#     has a .codex/config.toml naming another model and provider with
#     analytics and plugins on. The Worker (two lanes; as uid 65534 when
#     the script runs as root, as installed) runs under strace, following
#     every process it starts; the plugin and Codex run in the
#     Worker's Landlock sandbox (reading the npm installation and the
#     profile's directory as sandbox_read_paths) with Codex's own sandbox
#     for its commands being a permission profile with the network off
#     (seccomp, no bubblewrap: docs/codex.md). The repository's config also
#     asks for danger-full-access, which Codex must not load.
#  3. Two slow jobs at once: while both run, their CODEX_HOMEs are two
#     different private 0700 directories sharing no file, holding only the
#     read-only config.toml, which names the gateway and no key; a scan of
#     /proc/PID/environ and cmdline of every process the Worker started
#     (plugin, Codex, its helpers and commands), again and again during
#     the run, finds no key (a control scan of this script's own children
#     finds it in the fake's). Both succeed on attempt 1; each candidate
#     holds the file Codex's apply_patch wrote; commit subject and agent
#     report come from the structured answer.
#  4. A job whose first model stream is cut mid-way (Codex retries)
#     succeeds on attempt 1.
#  4b. Commands Codex runs (the model asks for `env`, then for a bash
#     command that writes a file in the workspace and connects to the fake)
#     do not see the provider key, can write the workspace, and cannot
#     connect: the fake gets no request from them, while Codex's own model
#     requests go on.
#  4c. The model has Codex run the command of issue 35 (every
#     /proc/PID/environ it can read into NOTE.txt): the job succeeds and
#     its candidate's NOTE.txt holds environments but no key.
#  4d. The model has Codex write the key (which the test hands the fake,
#     not the agent) into the task's file: the attempt fails
#     secret_in_candidate (terminal, the record names the file), no
#     candidate exists and no object reachable in the repository holds
#     the key.
#  5. A provider answering 400 ends every attempt as a plugin failure
#     (retryable); one answering 401 ends the job after one attempt as the
#     terminal plugin_incompatible, Codex stopped at its first retry.
#  6. Afterwards: no worktree or runtime directory left; every provider
#     request reached the fake over TLS from the gateway (the X-Forge-Via
#     header) with the operator's model, effort and the real key, and none
#     carried a gateway credential; strace saw every connection to the fake
#     made by the Worker, and no DNS query and no connection but to the
#     Gate, the gateway and the fake; no log or database holds the key.
# Everything lives in a private temp dir; a trap ends every process.
# Final line: CODEX-E2E PASS.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib/e2e.sh
source "$(dirname "$0")/lib/e2e.sh"
# shellcheck source-path=SCRIPTDIR source=lib/agents.sh
source "$(dirname "$0")/lib/agents.sh"
cd "$(dirname "$0")/.."

e2e_setup codex-e2e
agents_traps
e2e_require npm strace python3 git

# 1. The pinned Codex CLI (installed in parallel with the build) and the
# fake provider.
agents_npm_ci "$tmp/npm" testdata/codex-npm &
npm_pid=$!
e2e_build forge-gate forge-worker forge forge-codex-plugin
go build -o "$bin/fake-responses" ./testdata/fake-responses || fail "build fake-responses"
wait "$npm_pid" || fail "npm ci: $(tail -5 "$tmp/npm.out")"
agents_codex_bin "$tmp/npm"

CODEX_E2E_PROVIDER_KEY=sk-e2e-$(rand)
FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_WORKER_TOKEN=worker-$(rand)
export CODEX_E2E_PROVIDER_KEY FORGE_OWNER_TOKEN FORGE_WORKER_TOKEN
via=via-$(rand) # the header the Worker's gateway adds (worker.json), known to nobody else

# The fake gets the key twice: to check it (-key-env) and, for 4d, as the
# text it has the model plant (-plant-env).
CODEX_E2E_VIA=$via CODEX_E2E_PLANT=$CODEX_E2E_PROVIDER_KEY "$bin/fake-responses" -addr-file "$tmp/fake.addr" \
  -log "$tmp/fake-requests.jsonl" -key-env CODEX_E2E_PROVIDER_KEY -slow 3s \
  -tls-ca "$(agents_fake_ca)" -via-env CODEX_E2E_VIA -plant-env CODEX_E2E_PLANT 2>"$tmp/fake.log" &
pids+=("$!")
for _ in $(seq 100); do [ -s "$tmp/fake.addr" ] && break; sleep 0.05; done
fake_addr=$(cat "$tmp/fake.addr") || fail "fake Responses API did not start"
fake_port=${fake_addr##*:}

# The sampler catches what it is meant to: Codex with only a provider
# configured (no switches off) looks up its plugin marketplace and
# analytics hosts, which agents_net_check must refuse.
mkdir -m 0700 "$tmp/control-home" "$tmp/control-ws"
git -C "$tmp/control-ws" init -q
printf 'model = "gpt-5.5"\nmodel_provider = "fake"\n[model_providers.fake]\nname = "fake"\nbase_url = "http://%s/v1"\nwire_api = "responses"\nenv_key = "CODEX_E2E_PROVIDER_KEY"\n' \
  "$fake_addr" >"$tmp/control-home/config.toml"
# (slow: the answer waits 3 s, so the lookups Codex starts at startup happen;
# net-probe: the command of 4b, with the old danger-full-access)
printf 'Say done.\nfake-responses-mode: slow,net-probe\n' |
  CODEX_HOME=$tmp/control-home agents_strace "$tmp/control-strace.txt" \
    "$CODEX_BIN" exec --cd "$tmp/control-ws" --sandbox danger-full-access -c 'approval_policy="never"' \
    --ephemeral --json - >"$tmp/control.out" 2>&1 ||
  fail "control run of Codex failed"
if agents_net_check "$tmp/control-strace.txt" "$fake_port:4:the fake provider" >"$tmp/control-net.out" 2>&1; then
  fail "agents_net_check did not catch the control run's lookups"
fi
grep -q 'DNS query' "$tmp/control-net.out" || fail "control run: no DNS query seen: $(cat "$tmp/control-net.out")"
if [ "$(count_in "$tmp/fake-requests.jsonl" 'e["path"] == "/net-probe"')" != 1 ] ||
  [ "$(count_in "$tmp/fake-requests.jsonl" 'e["net_probe_reached"]')" = 0 ]; then
  fail "control run: the network probe did not reach the fake with danger-full-access"
fi
: >"$tmp/fake-requests.jsonl"

# 2. The operator's profile: the provider is the worker.json one.
op=$tmp/operator
mkdir -m 0700 "$op"
printf '{"version":1,"model":"gpt-5.5","reasoning_effort":"high","provider":"fake-openai"}\n' >"$op/codex.json"

mkdir -m 0700 "$tmp/repos" "$tmp/worktrees" "$tmp/runtime" "$tmp/state"
repo=$tmp/repos/demo
GIT_CONFIG_GLOBAL=/dev/null git init -q -b main "$repo"
printf 'demo repository\n' >"$repo/README.md"
# Repository configuration that must not change the run.
mkdir "$repo/.codex"
printf 'model = "repo-model"\nmodel_provider = "repo"\nsandbox_mode = "danger-full-access"\ndefault_permissions = ":danger-full-access"\n[model_providers.repo]\nname = "repo"\nbase_url = "http://127.0.0.1:9/v1"\nwire_api = "responses"\n[analytics]\nenabled = true\n[features]\nplugins = true\n' \
  >"$repo/.codex/config.toml"
seed_commit base
base=$(g rev-parse HEAD)

envs='["PATH","CODEX_BIN"]'
exec_policy='{"plugin_id":"codex","environment":'$envs',"plugin_timeout":"2m","check_timeout":"1m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}'
cat >"$tmp/gate.json" <<EOF
{"version":1,"listen":"127.0.0.1:0","database":"$tmp/state/forge.db","owner_token_env":"FORGE_OWNER_TOKEN",
 "recovery_interval":"200ms","lease_poll_interval":"100ms","default_pool":"local",
 "lifecycle":{"lease_ttl":"10s","retry_base":"200ms","max_attempts":2},
 "default_execution":$exec_policy,
 "workers":[{"id":"worker-1","pool":"local","token_env":"FORGE_WORKER_TOKEN","concurrency":2}],
 "repositories":[{"id":"demo","default_branch":"main","worker_pool":"local","execution":$exec_policy}]}
EOF
e2e_start_gate "$tmp/gate.log" "Gate did not start"

cat >"$tmp/worker.json" <<EOF
{"version":1,"gate_url":"ws://$addr","id":"worker-1","token_env":"FORGE_WORKER_TOKEN","heartbeat_interval":"500ms","concurrency":2,
 "repository_roots":["$tmp/repos"],"worktree_root":"$tmp/worktrees","runtime_root":"$tmp/runtime",
 "repositories":[{"id":"demo","path":"$repo"}],
 "plugins":[{"id":"codex","argv":["$bin/forge-codex-plugin","-profile","$op/codex.json"]}],
 "providers":[{"id":"fake-openai","kind":"openai-responses","base_url":"https://$fake_addr/v1","key_env":"CODEX_E2E_PROVIDER_KEY",
               "headers":{"X-Forge-Via":"$via"}}],
 "environment_allowlist":$envs,"check_environment_allowlist":["PATH"],
 "sandbox_read_paths":["$tmp/npm/node_modules","$op"],
 "ceilings":{"plugin_timeout":"15m","check_timeout":"10m","git_timeout":"1m","cleanup_timeout":"10s","plugin_output_bytes":1048576,"check_output_bytes":2048,"git_output_bytes":1048576}}
EOF
# The Worker (and so everything it starts) runs unprivileged when this
# script is root; only it trusts the fake's test authority.
agents_account "$tmp/repos" "$tmp/worktrees" "$tmp/runtime" "$op"
chmod 0644 "$(agents_fake_ca)"
SSL_CERT_FILE=$(agents_fake_ca) agents_start_worker
wait_log "$tmp/worker.log" "e.get('msg') == 'sandbox' and e.get('sandbox') == 'landlock'" >/dev/null ||
  fail "the Worker does not run Codex in its Landlock sandbox"
agents_gateway_port

submit() { # NAME INSTRUCTION: submit a job that must create NAME.txt
  python3 - "$base" "$1" "$2" >"$tmp/task-$1.json" <<'PY'
import json, sys
base, name, instruction = sys.argv[1:]
print(json.dumps({"repository_id": "demo", "base_sha": base, "instruction": instruction,
                  "tests": [["grep", "-qx", name + " from forge", name + ".txt"]],
                  "commit_author_name": "Ada Lovelace", "commit_author_email": "ada@example.org"}))
PY
  "$bin/forge" submit -file "$tmp/task-$1.json" | field id
}
create() { printf 'Create a file named %s.txt containing one line: %s from forge.\nfake-responses-mode: %s' "$1" "$1" "$2"; }
# check_success NAME: succeeded on attempt 1 with NAME.txt, the
# structured subject and the agent report.
check_success() { agents_check_success "$base" "$1"; }

# 3. Two jobs on two lanes at once, each Codex with its own CODEX_HOME.
job_a=$(submit alpha "$(create alpha slow)") || fail "submit alpha"
job_b=$(submit beta "$(create beta slow)") || fail "submit beta"
python3 - "$tmp/runtime" "$CODEX_E2E_PROVIDER_KEY" "$gateway_port" >"$tmp/homes.out" <<'PY' || fail "concurrent runs did not get two private CODEX_HOMEs: $(cat "$tmp/homes.out")"
import os, stat, sys, time
runtime, key, gateway_port = sys.argv[1:]
deadline = time.time() + 60
while time.time() < deadline:
    homes = []
    for root, dirs, _ in os.walk(runtime):
        if "codex-home" in dirs:
            homes.append(os.path.join(root, "codex-home"))
    if len(homes) == 2:
        break
    time.sleep(0.05)
else:
    sys.exit("saw %d CODEX_HOMEs at once" % len(homes))
time.sleep(0.5)  # let both Codex processes write their state
files = []
for h in homes:
    st = os.lstat(h)
    assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700, (h, oct(st.st_mode))
    inodes = set()
    for root, dirs, names in os.walk(h):
        for n in dirs + names:
            p = os.path.join(root, n)
            s = os.lstat(p)
            inodes.add((s.st_dev, s.st_ino))
            if stat.S_ISLNK(s.st_mode):
                t = os.path.realpath(p)
                assert t.startswith(os.path.realpath(h)), (p, "links outside its home")
    assert stat.S_IMODE(os.lstat(os.path.join(h, "config.toml")).st_mode) == 0o400, h
    assert not os.path.exists(os.path.join(h, "auth.json")), h
    config = open(os.path.join(h, "config.toml")).read()
    assert 'base_url = "http://127.0.0.1:%s/fake-openai"' % gateway_port in config and key not in config, config
    files.append(inodes)
assert len(files[0]) > 2 and len(files[1]) > 2, "Codex wrote no state"
assert not files[0] & files[1], "the two homes share a file"
ids = [open(os.path.join(h, "installation_id")).read() for h in homes if os.path.exists(os.path.join(h, "installation_id"))]
assert len(set(ids)) == len(ids), ids
print("two private CODEX_HOMEs, %d and %d entries, no shared file" % (len(files[0]), len(files[1])))
PY
cat "$tmp/homes.out"
# The key is in no process of the attempts (the Worker's own children:
# plugins, their reapers, Codex, its helpers, the commands it runs), and
# the scan finds it where it is (this script's children: the fake).
agents_proc_scan "$worker_pid" "$CODEX_E2E_PROVIDER_KEY" forge-codex-plugin,codex 3 >"$tmp/proc-scan.out" ||
  fail "$(cat "$tmp/proc-scan.out")"
cat "$tmp/proc-scan.out"
if agents_proc_scan $$ "$CODEX_E2E_PROVIDER_KEY" fake-responses 0.2 >"$tmp/proc-control.out" 2>&1; then
  fail "the /proc scan did not find the key in the fake's environment"
fi
wait_job "$job_a" alpha
wait_job "$job_b" beta
check_success alpha
check_success beta

# 4. The first model stream is cut mid-way; Codex retries within the attempt.
job_c=$(submit gamma "$(create gamma cut-first)") || fail "submit gamma"
wait_job "$job_c" gamma
check_success gamma
[ "$(count_in "$tmp/fake-requests.jsonl" 'e["mode"] == "cut-first" and e["turn"] == 1')" = 2 ] ||
  fail "the cut stream was not retried by Codex"

# 4b. The model has Codex run `env`, then the network probe: both run; the
#     first's output (what any command Codex runs sees) lacks the provider
#     key; the second writes the workspace and is refused its connection
#     (the fake logs no request from it), and the job still succeeds, so
#     Codex's own model requests were not refused.
job_z=$(submit zeta "$(create zeta env-probe,net-probe)") || fail "submit zeta"
wait_job "$job_z" zeta
check_success zeta
[ "$(count_in "$tmp/fake-requests.jsonl" 'e["mode"] == "env-probe,net-probe" and e["probe_ran"]')" -ge 1 ] ||
  fail "the env probe command did not run"
[ "$(count_in "$tmp/fake-requests.jsonl" 'e["probe_saw_key"]')" = 0 ] ||
  fail "a command Codex ran saw the provider key"
[ "$(count_in "$tmp/fake-requests.jsonl" 'e["net_probe_ran"] and e["net_probe_wrote"]')" -ge 1 ] ||
  fail "the network probe command did not run or could not write the workspace"
[ "$(count_in "$tmp/fake-requests.jsonl" 'e["net_probe_reached"] or e["path"] == "/net-probe"')" = 0 ] ||
  fail "a command Codex ran reached the network"

# 4c. The command of issue 35, which read the key from every process of
#     the attempt before the gateway: NOTE.txt holds environments (the
#     command ran and read /proc), never the key.
job_h=$(submit eta "$(create eta proc-environ)") || fail "submit eta"
wait_job "$job_h" eta
[ "$(count_in "$tmp/fake-requests.jsonl" 'e["mode"] == "proc-environ" and e["proc_ran"]')" -ge 1 ] ||
  fail "the /proc command did not run"
cand_h=$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); assert a["job"]["status"] == "succeeded", a["job"]; print(a["job"]["candidate_sha"])' "$tmp/agg-eta.json") ||
  fail "the /proc job did not succeed: $(head -c 600 "$tmp/agg-eta.json")"
[ "$(g diff --name-only "$base" "$cand_h" | tr '\n' ' ')" = "NOTE.txt eta.txt " ] || fail "the /proc candidate does not hold NOTE.txt and eta.txt"
g show "$cand_h:NOTE.txt" >"$tmp/note.txt"
grep -q '^PATH=' "$tmp/note.txt" || fail "NOTE.txt holds no environment"
if grep -q -F -e "$CODEX_E2E_PROVIDER_KEY" "$tmp/note.txt"; then fail "NOTE.txt holds the provider key"; fi
echo "issue 35's command: NOTE.txt holds $(grep -c '=' "$tmp/note.txt") variables of $(grep -c '^PATH=' "$tmp/note.txt") environments, no key"

# 4d. The model plants the key (handed to the fake, not to the agent) in
#     the task's file: refused before the commit, nothing for the Gate.
job_k=$(submit theta "$(create theta plant-key)") || fail "submit theta"
wait_job "$job_k" theta
python3 - "$tmp/agg-theta.json" <<'PY' || fail "the planted key was not refused: $(head -c 600 "$tmp/agg-theta.json")"
import json, sys
a = json.load(open(sys.argv[1]))
assert a["job"]["status"] == "failed" and a["job"]["failure_code"] == "secret_in_candidate" and not a["job"].get("candidate_sha"), a["job"]
assert len(a["attempts"]) == 1, a["attempts"]
assert a["attempts"][0]["evidence"] == [{"phase": "workspace_validation", "reason": "secret_in_candidate", "path": "theta.txt"}], a["attempts"][0]
PY
[ -z "$(g for-each-ref "refs/agent-forge/candidates/$job_k")" ] || fail "the planted key left a candidate"
if g rev-list --objects --all | cut -d' ' -f1 | g cat-file --batch | grep -a -q -F -e "$CODEX_E2E_PROVIDER_KEY"; then
  fail "an object reachable in the repository holds the planted key"
fi

# 5. The provider answers 400: a plugin failure, every attempt.
job_d=$(submit delta "$(create delta status-400)") || fail "submit delta"
wait_job "$job_d" delta
agents_check_failed delta 2 plugin_failed plugin-failed
[ "$(count_in "$tmp/fake-requests.jsonl" 'e["mode"] == "status-400"')" -ge 2 ] || fail "the 400 job did not reach the provider"

# 5b. The provider refuses the key (401): one attempt, terminal, named.
job_e=$(submit epsilon "$(create epsilon status-401)") || fail "submit epsilon"
wait_job "$job_e" epsilon
agents_check_failed epsilon 1 plugin_incompatible
[ "$(count_in "$tmp/fake-requests.jsonl" 'e["mode"] == "status-401"')" -le 2 ] || fail "Codex was not stopped at the first 401"

agents_stop_worker
stop Gate "$gate_pid"

# 6. Nothing left, nothing changed, nobody else contacted, nothing leaked.
[ -z "$(ls -A "$tmp/worktrees")" ] || fail "worktree left behind"
[ -z "$(ls -A "$tmp/runtime")" ] || fail "runtime directory (a CODEX_HOME) left behind"
python3 - "$tmp/fake-requests.jsonl" "$fake_addr" <<'PY' || fail "provider requests do not match the profile"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) >= 10, len(lines)
for e in lines:
    assert e["method"] == "POST" and e["path"] == "/v1/responses" and e["host"] == sys.argv[2], e
    # The real key, only from the gateway (TLS, its header), never a credential.
    assert e["tls"] and e["via_gateway"] and e["authorized"] and not e["credential"], e
    assert e["model"] == "gpt-5.5" and e["effort"] == "high", e
    assert "apply_patch" in e["tools"], e["tools"]
print("fake: %d requests, each over TLS from the gateway with the real key, none with a credential" % len(lines))
PY
agents_fake_peers "$tmp/strace.txt" "$fake_port" >"$tmp/peers.out" || fail "strace: $(cat "$tmp/peers.out")"
cat "$tmp/peers.out"
gate_port=${addr##*:}
agents_net_check "$tmp/strace.txt" "$gate_port" "$gateway_port:4:the gateway" "$fake_port:1:the fake provider" >"$tmp/net.out" ||
  fail "strace: a network call beyond the Gate, the gateway and the fake provider: $(cat "$tmp/net.out")"
cat "$tmp/net.out"
for f in "$tmp"/*.log "$tmp/state/forge.db"; do
  if grep -a -q -e "$CODEX_E2E_PROVIDER_KEY" -e "$FORGE_WORKER_TOKEN" "$f"; then
    fail "$(basename "$f") holds the provider key or a token"
  fi
done
echo "CODEX-E2E PASS"
