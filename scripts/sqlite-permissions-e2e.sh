#!/usr/bin/env bash
# SQLITE-PERMISSIONS: the Gate's SQLite DSN handling and file-permission
# preflight, proved against the real forge-gate binary.
#
# Accepted: a private 0700 parent with a missing database (pre-created
# 0600; -wal/-shm 0600 while running; data survives a restart), the
# equivalent file: URI, a missing immediate parent (created 0700), and a
# memory DSN. Refused (startup fails, nothing logged names the path, and
# no file, directory, mode, owner or content changes): invalid DSNs, a
# second Gate on the same database, two missing directory levels, symlink
# ancestors/parents/databases/companions, group- or world-writable
# ancestors, parents with group/world bits, database/-journal/-wal/-shm
# modes other than 0600, objects owned by another user, a missing database
# beside any existing -wal/-shm/-journal, a database that is not Agent
# Forge's (no "AFRG" application id) or is from a newer build,
# non-canonical database paths, and a repeated -config flag.
# Everything lives in a private temp dir; a trap ends every process.
# Final line: SQLITE-PERMISSIONS PASS.
set -euo pipefail
cd "$(dirname "$0")/.."

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "sqlite-permissions-e2e: FAIL: $*" >&2
  for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "--- $(basename "$f")" >&2; tail -n 20 "$f" >&2; }; done
  exit 1
}

bin=$tmp/bin
mkdir -p "$bin"
go build -o "$bin/forge-gate" ./cmd/forge-gate || fail "build forge-gate"

rand() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }
FORGE_OWNER_TOKEN=owner-$(rand)
FORGE_WORKER_TOKEN=worker-$(rand)
export FORGE_OWNER_TOKEN FORGE_WORKER_TOKEN

cases=$tmp/cases
mkdir -m 0700 "$cases"

# write_config NAME DATABASE: a gate.json whose database field is DATABASE.
write_config() {
  python3 - "$tmp/$1.json" "$2" <<'PY'
import json, sys
cfg = {"version": 1, "listen": "127.0.0.1:0", "database": sys.argv[2],
       "owner_token_env": "FORGE_OWNER_TOKEN", "recovery_interval": "1s",
       "lease_poll_interval": "100ms", "default_pool": "local",
       "lifecycle": {"lease_ttl": "30s", "retry_base": "1s", "max_attempts": 3},
       "default_execution": {"plugin_id": "reference", "environment": ["PATH"],
           "plugin_timeout": "1m", "check_timeout": "1m", "git_timeout": "1m",
           "cleanup_timeout": "1s", "plugin_output_bytes": 1048576,
           "check_output_bytes": 2048, "git_output_bytes": 1048576},
       "workers": [{"id": "worker-1", "pool": "local", "token_env": "FORGE_WORKER_TOKEN", "concurrency": 1}],
       "repositories": []}
open(sys.argv[1], "w").write(json.dumps(cfg))
PY
}

# wait_ready LOG PID: wait for the listening event and /readyz 200; prints
# the address. Fails if the Gate exits first.
wait_ready() {
  python3 - "$1" "$2" <<'PY'
import json, os, sys, time, urllib.request
path, pid = sys.argv[1], int(sys.argv[2])
deadline = time.time() + 30
addr = None
while time.time() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("gate exited")
    if addr is None:
        for line in open(path).read().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("msg") == "listening":
                addr = e["addr"]
    if addr:
        try:
            with urllib.request.urlopen("http://%s/readyz" % addr, timeout=2) as r:
                if r.status == 200:
                    print(addr)
                    sys.exit(0)
        except Exception:
            pass
    time.sleep(0.05)
sys.exit("gate not ready")
PY
}

# start_gate NAME DATABASE: start a Gate that must become ready; sets
# gate_pid and addr.
start_gate() {
  write_config "$1" "$2"
  "$bin/forge-gate" -config "$tmp/$1.json" 2>"$tmp/$1.log" &
  gate_pid=$!
  pids+=("$gate_pid")
  addr=$(wait_ready "$tmp/$1.log" "$gate_pid") || fail "$1: Gate did not become ready"
}

stop_gate() {
  kill -TERM "$gate_pid"
  wait "$gate_pid" || fail "Gate did not exit 0 on SIGTERM"
  pids=("${pids[@]/$gate_pid}")
}

# owner_api METHOD PATH [BODY]: prints the response body; fails on non-2xx.
owner_api() {
  python3 - "$addr" "$@" <<'PY'
import os, sys, urllib.request
addr, method, path = sys.argv[1:4]
body = sys.argv[4].encode() if len(sys.argv) > 4 else None
req = urllib.request.Request("http://%s%s" % (addr, path), data=body, method=method,
    headers={"Authorization": "Bearer " + os.environ["FORGE_OWNER_TOKEN"], "Content-Type": "application/json"})
with urllib.request.urlopen(req, timeout=10) as r:
    sys.stdout.write(r.read().decode())
PY
}

# snapshot DIR: type, mode, owner, size, link target and content hash of
# every object under DIR, sorted. The content of a live Gate's -shm (its
# shared-memory index, rewritten by readers) is left out.
snapshot() {
  find "$1" -printf '%p %y %m %U:%G %s %l\n' | sort
  find "$1" -type f ! -name '*-shm' -print0 | sort -z | xargs -0 -r sha256sum
}

mode_of() { stat -c '%a' "$1"; }

# expect_refused NAME DATABASE PATTERN: the Gate must exit nonzero without
# becoming ready, log PATTERN, never log the case directory, and change
# nothing under the case directory.
expect_refused() {
  local name=$1 db=$2 pattern=$3 rc=0
  write_config "$name" "$db"
  local before
  before=$(snapshot "$cases")
  timeout 30 "$bin/forge-gate" -config "$tmp/$name.json" 2>"$tmp/$name.log" || rc=$?
  [ "$rc" -ne 0 ] || fail "$name: Gate accepted an insecure or invalid database"
  [ "$rc" -ne 124 ] || fail "$name: Gate hung instead of refusing"
  if grep -q '"msg":"listening"' "$tmp/$name.log"; then fail "$name: Gate started listening"; fi
  grep -q -- "$pattern" "$tmp/$name.log" || fail "$name: log does not say \"$pattern\""
  if grep -q -F "$cases" "$tmp/$name.log"; then fail "$name: log names the database path"; fi
  [ "$before" = "$(snapshot "$cases")" ] || fail "$name: refused startup changed the filesystem"
  echo "refused: $name"
}

# --- accepted layouts ------------------------------------------------------

# 1. Private parent, missing database: pre-created 0600; companions 0600;
#    data survives a restart; the file: URI form opens the same database.
mkdir -m 0700 "$cases/ok"
start_gate ok "$cases/ok/forge.db"
for f in forge.db forge.db-wal forge.db-shm; do
  [ "$(mode_of "$cases/ok/$f")" = 600 ] || fail "ok: $f mode $(mode_of "$cases/ok/$f"), want 600"
done
job_id=$(owner_api POST /v1/jobs '{"input":"permissions probe"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])') ||
  fail "ok: submit failed"
stop_gate
start_gate ok-uri "file://$cases/ok/forge.db?mode=rwc&cache=private"
owner_api GET "/v1/jobs/$job_id" >/dev/null || fail "ok-uri: job lost across restart or URI form opened another file"
[ "$(mode_of "$cases/ok/forge.db")" = 600 ] || fail "ok-uri: database mode changed"

# 2. A second Gate on the same database is refused while the first runs,
#    and the first keeps serving.
expect_refused second-gate "$cases/ok/forge.db" "in use"
owner_api GET "/v1/jobs/$job_id" >/dev/null || fail "second-gate: first Gate stopped serving"
stop_gate

# 3. Only the immediate parent missing: created 0700, database 0600.
mkdir -m 0755 "$cases/fresh"
start_gate fresh "$cases/fresh/state/forge.db"
[ "$(mode_of "$cases/fresh/state")" = 700 ] || fail "fresh: parent mode $(mode_of "$cases/fresh/state"), want 700"
[ "$(mode_of "$cases/fresh/state/forge.db")" = 600 ] || fail "fresh: database mode, want 600"
stop_gate

# 4. A memory database works (no files).
start_gate memory ":memory:"
stop_gate

# --- refused layouts -------------------------------------------------------

# 5. DSNs outside the supported forms; the path is never echoed.
expect_refused dsn-mode-ro "file:$cases/ok/forge.db?mode=ro" "invalid database DSN"
expect_refused dsn-vfs "file:$cases/ok/forge.db?vfs=unix-none" "invalid database DSN"
expect_refused dsn-dup "file:$cases/ok/forge.db?cache=shared&cache=shared" "invalid database DSN"
expect_refused dsn-authority "file://localhost$cases/ok/forge.db" "invalid database DSN"
expect_refused dsn-pragma "file:$cases/ok/forge.db?_pragma=journal_mode(DELETE)" "invalid database DSN"

# 6. Two missing levels: nothing is created.
mkdir -m 0755 "$cases/deep"
expect_refused two-levels "$cases/deep/a/b/forge.db" "ancestor directory"

# 7. Symlinks: ancestor, parent, database (also dangling), companions.
mkdir -m 0700 "$cases/real" "$cases/real/state"
ln -s "$cases/real" "$cases/link"
expect_refused symlink-ancestor "$cases/link/state/forge.db" "ancestor directory is a symlink"
ln -s "$cases/real/state" "$cases/state-link"
expect_refused symlink-parent "$cases/state-link/forge.db" "database parent directory is a symlink"
mkdir -m 0700 "$cases/dbl"
: >"$cases/dbl/target.db"; chmod 0600 "$cases/dbl/target.db"
ln -s target.db "$cases/dbl/forge.db"
expect_refused symlink-database "$cases/dbl/forge.db" "database is a symlink"
mkdir -m 0700 "$cases/dangling"
ln -s "$cases/nowhere.db" "$cases/dangling/forge.db"
expect_refused dangling-symlink "$cases/dangling/forge.db" "database is a symlink"
[ ! -e "$cases/nowhere.db" ] || fail "dangling-symlink: symlink target was created"
for suffix in -journal -wal -shm; do
  d=$cases/sym$suffix
  mkdir -m 0700 "$d"
  : >"$d/forge.db"; chmod 0600 "$d/forge.db"
  : >"$d/other"; chmod 0600 "$d/other"
  ln -s other "$d/forge.db$suffix"
  expect_refused "symlink$suffix" "$d/forge.db" "$suffix file is a symlink"
done

# 8. Group- or world-writable ancestors (no sticky bit) are untrusted; a
#    sticky world-writable ancestor (like /tmp) is trusted.
for m in 0775 0757; do
  mkdir "$cases/anc$m"; chmod "$m" "$cases/anc$m"
  mkdir -m 0700 "$cases/anc$m/state"
  expect_refused "ancestor-$m" "$cases/anc$m/state/forge.db" "ancestor directory is group- or world-writable"
done
mkdir "$cases/sticky"; chmod 1777 "$cases/sticky"
mkdir -m 0700 "$cases/sticky/state"
start_gate sticky "$cases/sticky/state/forge.db"
stop_gate

# 9. The immediate parent must have no group/world bits.
for m in 0750 0705 0701 0770; do
  mkdir "$cases/parent$m"; chmod "$m" "$cases/parent$m"
  expect_refused "parent-$m" "$cases/parent$m/forge.db" "database parent directory has group or world permission bits"
done

# 10. Database and companion modes must be exactly 0600; nothing is chmod-ed.
for m in 0644 0640 0604 0400 0700; do
  d=$cases/db$m
  mkdir -m 0700 "$d"
  : >"$d/forge.db"; chmod "$m" "$d/forge.db"
  expect_refused "database-$m" "$d/forge.db" "database does not have mode 0600"
done
for suffix in -journal -wal -shm; do
  d=$cases/mode$suffix
  mkdir -m 0700 "$d"
  : >"$d/forge.db"; chmod 0600 "$d/forge.db"
  : >"$d/forge.db$suffix"; chmod 0644 "$d/forge.db$suffix"
  expect_refused "mode$suffix" "$d/forge.db" "$suffix file does not have mode 0600"
done
mkdir -m 0700 "$cases/dirdb" "$cases/dirdb/forge.db"
expect_refused database-directory "$cases/dirdb/forge.db" "database is not a regular file"

# 11a. A missing database beside an existing -wal/-shm/-journal: refused
#      before the database is created, so nothing is left behind, whether
#      the sibling is insecure, a symlink, a directory or a private file.
orphan() { mkdir -m 0700 "$cases/orphan-$1"; echo "$cases/orphan-$1"; }
d=$(orphan wal0644); : >"$d/forge.db-wal"; chmod 0644 "$d/forge.db-wal"
expect_refused orphan-wal-0644 "$d/forge.db" "-wal file does not have mode 0600"
d=$(orphan journal0666); : >"$d/forge.db-journal"; chmod 0666 "$d/forge.db-journal"
expect_refused orphan-journal-0666 "$d/forge.db" "-journal file does not have mode 0600"
d=$(orphan shmlink); ln -s "$cases/nowhere-shm" "$d/forge.db-shm"
expect_refused orphan-shm-symlink "$d/forge.db" "-shm file is a symlink"
d=$(orphan waldir); mkdir -m 0700 "$d/forge.db-wal"
expect_refused orphan-wal-directory "$d/forge.db" "-wal file is not a regular file"
d=$(orphan wal0600); : >"$d/forge.db-wal"; chmod 0600 "$d/forge.db-wal"
expect_refused orphan-wal-0600 "$d/forge.db" "-wal file exists while the database is missing"
for d in "$cases"/orphan-*; do
  [ ! -e "$d/forge.db" ] || fail "$(basename "$d"): database created by a refused start"
done

# 11b. Identity: a database the Gate created carries SQLite application_id
#      "AFRG"; a non-empty file without it (another program's SQLite
#      database in rollback or WAL mode, one with a colliding jobs table,
#      non-SQLite bytes) is refused byte for byte unchanged, and so is a
#      Gate database from a newer build.
python3 - "$cases/ok/forge.db" <<'PY' || fail "ok: database header lacks the Agent Forge application id"
import sys
hdr = open(sys.argv[1], "rb").read(100)
sys.exit(0 if hdr[:16] == b"SQLite format 3\0" and hdr[68:72] == b"AFRG" else 1)
PY
# make_sqlite DIR SQL...: DIR/forge.db built by Python's sqlite3, mode 0600.
make_sqlite() {
  local d=$1; shift
  mkdir -m 0700 "$d"
  python3 - "$d/forge.db" "$@" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
for q in sys.argv[2:]:
    con.execute(q)
con.close()
PY
  chmod 0600 "$d/forge.db"
}
make_sqlite "$cases/foreign-table" "CREATE TABLE customers (name TEXT)" "INSERT INTO customers VALUES ('alice')"
expect_refused foreign-table "$cases/foreign-table/forge.db" "not an Agent Forge database"
make_sqlite "$cases/foreign-jobs" "CREATE TABLE jobs (x)" "INSERT INTO jobs VALUES (1)"
expect_refused foreign-jobs "$cases/foreign-jobs/forge.db" "not an Agent Forge database"
make_sqlite "$cases/foreign-wal" "PRAGMA journal_mode = WAL" "CREATE TABLE customers (name TEXT)"
expect_refused foreign-wal "$cases/foreign-wal/forge.db" "not an Agent Forge database"
mkdir -m 0700 "$cases/garbage"
python3 -c 'import sys; open(sys.argv[1], "wb").write(bytes(range(256)) * 32)' "$cases/garbage/forge.db"
chmod 0600 "$cases/garbage/forge.db"
expect_refused garbage "$cases/garbage/forge.db" "not an Agent Forge database"
mkdir -m 0700 "$cases/newer"
cp "$cases/ok/forge.db" "$cases/newer/forge.db"; chmod 0600 "$cases/newer/forge.db"
python3 - "$cases/newer/forge.db" <<'PY'
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("UPDATE schema_version SET version = version + 1")
con.close()
PY
expect_refused newer-schema "$cases/newer/forge.db" "newer than this build"

# 11c. Non-canonical spellings of an existing, valid database path are
#      refused at config load, naming the field (plain and file: forms).
expect_refused noncanonical-dot "$cases/ok/./forge.db" "config: database: invalid database DSN: path is not canonical"
expect_refused noncanonical-slashes "$cases/ok//forge.db" "config: database: invalid database DSN: path is not canonical"
expect_refused noncanonical-dotdot "$cases/missing/../ok/forge.db" "config: database: invalid database DSN: path is not canonical"
expect_refused noncanonical-uri "file://$cases/ok/./forge.db?mode=rwc" "config: database: invalid database DSN: path is not canonical"

# 11d. Exactly one -config: a repeated flag is a usage error (exit 2), even
#      when both name a valid config.
write_config dup "$cases/ok/forge.db"
rc=0
timeout 30 "$bin/forge-gate" -config "$tmp/dup.json" -config "$tmp/dup.json" 2>"$tmp/dup.log" || rc=$?
[ "$rc" -eq 2 ] || fail "dup-config: exit $rc, want 2"
grep -q "usage:" "$tmp/dup.log" || fail "dup-config: no usage message"
echo "refused: dup-config"

# 11. Ownership: objects owned by another user are refused.
if [ "$(id -u)" = 0 ]; then
  other=65534
  mkdir -m 0700 "$cases/own-parent"; chown "$other:$other" "$cases/own-parent"
  expect_refused owner-parent "$cases/own-parent/forge.db" "database parent directory is not owned by the effective user"
  mkdir -m 0700 "$cases/own-db"
  : >"$cases/own-db/forge.db"; chmod 0600 "$cases/own-db/forge.db"; chown "$other:$other" "$cases/own-db/forge.db"
  expect_refused owner-database "$cases/own-db/forge.db" "database is not owned by the effective user"
  mkdir -m 0700 "$cases/own-wal"
  : >"$cases/own-wal/forge.db"; chmod 0600 "$cases/own-wal/forge.db"
  : >"$cases/own-wal/forge.db-wal"; chmod 0600 "$cases/own-wal/forge.db-wal"; chown "$other:$other" "$cases/own-wal/forge.db-wal"
  expect_refused owner-wal "$cases/own-wal/forge.db" "-wal file is not owned by the effective user"
  mkdir -m 0755 "$cases/own-anc"; mkdir -m 0700 "$cases/own-anc/state"; chown "$other:$other" "$cases/own-anc"
  expect_refused owner-ancestor "$cases/own-anc/state/forge.db" "ancestor directory is not owned by root or the effective user"
else
  # Without root no foreign-owned object can be made here; a database under
  # a root-owned directory exercises the parent-owner rule instead.
  expect_refused owner-parent "/root/forge.db" "database parent directory is not owned by the effective user"
fi

for f in "$tmp"/*.log; do
  if grep -q -e "$FORGE_OWNER_TOKEN" -e "$FORGE_WORKER_TOKEN" -e "permissions probe" "$f"; then
    fail "$(basename "$f") contains a token or task text"
  fi
done
echo "SQLITE-PERMISSIONS PASS"
