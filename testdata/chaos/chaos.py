# The soak of scripts/chaos-e2e.sh. Usage:
#   python3 chaos.py DIR SEED JOBS CODING_PERCENT SECONDS CGROUP
# DIR holds bin/, gate.json, worker-{a,b,c}.json, repos/demo-{a,b,c} (one
# clone per Worker), the state/ database and the logs; the tokens are in
# the environment. Worker w runs in the cgroup v2 directory CGROUP-w (a
# sandboxed Worker needs one of its own), every start again. While it submits JOBS jobs (CODING_PERCENT of them
# coding) over SECONDS, it repeatedly, at random moments drawn from SEED:
# SIGKILLs and restarts the Gate; SIGKILLs and restarts Worker a; SIGTERMs
# Worker b and restarts it when it has exited (a systemd restart); and
# SIGKILLs a running plugin of any Worker. Then it waits for every job to
# end, stops everything cleanly and checks, from the owner API and the
# SQLite file opened read-only, what chaos-e2e.sh promises. Last line:
#   jobs=N kills=K restarts=R lost=0 duplicated=0 burned=0 leaked_dirs=0 integrity=ok
# exit 0 only when every check holds.
import json, os, random, signal, subprocess, sys, threading, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "forgeclient"))
from forgeclient import http, owner_json, ro_db, wait_until  # noqa: E402

d, seed, njobs, coding_pct, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
cgroup = sys.argv[6]
owner = os.environ["FORGE_OWNER_TOKEN"]
base = open(os.path.join(d, "base")).read().strip()
addr = open(os.path.join(d, "addr")).read().strip()
lock = threading.Lock()
stats = {"kills": 0, "restarts": 0, "sigterms": 0, "plugin_kills": 0, "gate_kills": 0, "worker_kills": 0}
problems = []


def note(msg):
    with lock:
        problems.append(msg)


class Daemon:
    def __init__(self, name, argv, env):
        self.name, self.argv, self.env, self.p = name, argv, env, None
        self.log = open(os.path.join(d, name + ".log"), "ab")

    def start(self):
        self.p = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log, env=self.env)

    def kill(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def term(self, limit=60):
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(limit)
        except subprocess.TimeoutExpired:
            note("%s did not exit within %ds of SIGTERM" % (self.name, limit))
            self.kill()
            return None


def env_without(*names):
    e = dict(os.environ)
    for n in names:
        e.pop(n, None)
    return e


bind = os.path.join(d, "bin")
gate = Daemon("gate", [bind + "/forge-gate", "-config", d + "/gate.json"], env_without())
# The shell enters the Worker's cgroup, then becomes the Worker.
workers = {w: Daemon("worker-" + w, ["sh", "-c", 'echo $$ >"$0/cgroup.procs" && exec "$@"', cgroup + "-" + w,
                                     bind + "/forge-worker", "-config", "%s/worker-%s.json" % (d, w)], env_without("FORGE_OWNER_TOKEN"))
           for w in "abc"}


def ready():
    try:
        return http(addr, "GET", "/readyz", timeout=2)[0] == 200
    except OSError:
        return False


def start_gate():
    gate.start()
    if not wait_until(ready, 30):
        note("Gate not ready after a restart")


start_gate()
for w in workers.values():
    w.start()

rng = random.Random(seed)
plan = []  # (kind, seconds into the run, spec)
for i in range(njobs):
    coding = rng.randrange(100) < coding_pct
    plan.append((rng.uniform(0, seconds * 0.8), coding, i))
plan.sort()
submitted = {}  # job id -> kind
stop_chaos = threading.Event()


def submitter(t0):
    for at, coding, i in plan:
        time.sleep(max(0, t0 + at - time.time()))
        if coding:
            task = {"repository_id": "demo", "base_sha": base, "instruction": "write chaos/%d.txt job %d\nsubject chore: chaos %d" % (i, i, i),
                    "tests": [["sh", "-c", "sleep 0.%d; test -f chaos/%d.txt" % (rng.randrange(1, 6), i)]]}
        else:
            task = {"input": "%.2f chaos job %d" % (rng.uniform(0.1, 0.8), i)}
        deadline = time.time() + 60
        while True:
            try:
                st, j = owner_json(addr, owner, "POST", "/v1/jobs", task)
                if st == 201:
                    submitted[j["id"]] = "coding" if coding else "text"
                    break
                if st not in (503,):
                    note("submit answered %d" % st)
                    break
            except (OSError, EOFError, ValueError):
                pass  # the Gate is down (or died mid-answer): submit again
            if time.time() > deadline:
                note("a job could not be submitted within 60 s")
                break
            time.sleep(0.1)


def plugin_pids():
    """Running plugin processes below any Worker."""
    wpids = {w.p.pid for w in workers.values() if w.p and w.p.poll() is None}
    parent, cmds = {}, {}
    for e in os.listdir("/proc"):
        if not e.isdigit():
            continue
        try:
            stat = open("/proc/%s/stat" % e, "rb").read()
            parent[int(e)] = int(stat[stat.rindex(b")") + 2:].split()[1])
            cmds[int(e)] = open("/proc/%s/cmdline" % e, "rb").read()
        except (OSError, ValueError):
            continue
    out = []
    for pid, cmd in cmds.items():
        if b"slow-plugin.py" not in cmd and b"edit-plugin" not in cmd:
            continue
        p, hops = parent.get(pid), 0
        while p and p not in wpids and hops < 8:
            p, hops = parent.get(p), hops + 1
        if p in wpids:
            out.append(pid)
    return out


def chaos(t0):
    crng = random.Random(seed * 7919 + 1)
    actions = ["gate", "worker-kill", "worker-term", "plugin", "plugin"]
    first = actions[:4]
    crng.shuffle(first)  # every kind of fault at least once, then at random
    while not stop_chaos.is_set():
        stop_chaos.wait(crng.uniform(1.0, 4.0))
        if stop_chaos.is_set() or time.time() - t0 > seconds:
            return
        a = first.pop() if first else crng.choice(actions)
        if a == "gate":
            gate.kill()
            stats["kills"] += 1
            stats["gate_kills"] += 1
            time.sleep(crng.uniform(0.1, 1.5))
            start_gate()
            stats["restarts"] += 1
        elif a == "worker-kill":
            workers["a"].kill()
            stats["kills"] += 1
            stats["worker_kills"] += 1
            time.sleep(crng.uniform(0.1, 1.0))
            workers["a"].start()
            stats["restarts"] += 1
        elif a == "worker-term":
            rc = workers["b"].term()
            stats["sigterms"] += 1
            if rc not in (0, None):
                note("Worker b exited %s on SIGTERM" % rc)
            workers["b"].start()
            stats["restarts"] += 1
        else:
            deadline = time.time() + 3  # wait a little for a plugin to be running
            while time.time() < deadline:
                ps = plugin_pids()
                if ps:
                    try:
                        os.kill(crng.choice(ps), signal.SIGKILL)
                        stats["kills"] += 1
                        stats["plugin_kills"] += 1
                        break
                    except ProcessLookupError:
                        pass
                time.sleep(0.05)


t0 = time.time()
sub = threading.Thread(target=submitter, args=(t0,))
cha = threading.Thread(target=chaos, args=(t0,))
sub.start()
cha.start()
sub.join()
stop_chaos.set()
cha.join()
if gate.p.poll() is not None:
    start_gate()


def all_terminal():
    try:
        for jid in list(submitted):
            st, j = owner_json(addr, owner, "GET", "/v1/jobs/" + jid)
            if st != 200 or j["status"] not in ("succeeded", "failed"):
                return False
        return True
    except (OSError, EOFError, ValueError):
        return False


if not wait_until(all_terminal, 180, 0.5):
    note("jobs still running 180 s after the soak")
aggs = {}
for jid in submitted:
    st, a = owner_json(addr, owner, "GET", "/v1/jobs/%s/aggregate" % jid)
    aggs[jid] = a if st == 200 else None
for name, w in workers.items():
    rc = w.term()
    if rc != 0:
        note("Worker %s exited %s on its final SIGTERM" % (name, rc))
if gate.term() != 0:
    note("Gate did not exit 0 on SIGTERM")

# The checks.
worker_logs = "".join(open(os.path.join(d, "worker-%s.log" % w), errors="replace").read() for w in "abc")
started = set()
for line in worker_logs.splitlines():
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("msg") == "leased" and e.get("attempt"):
        started.add(e["attempt"])


def db_checks(path, started, aggs, say):
    """lost, duplicated, burned and integrity of the database at path; say(msg) reports each problem."""
    lost = duplicated = burned = 0
    db = ro_db(path)
    integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
    rows = {r[0]: r for r in db.execute("SELECT id, status, attempt_count, kind FROM jobs")}
    for jid in aggs:
        if jid not in rows:
            lost += 1
            say("job %s acknowledged but not stored" % jid)
    for jid, (_, status, count, kind) in rows.items():
        seq = db.execute("SELECT seq FROM jobs WHERE id = ?", (jid,)).fetchone()[0]
        atts = db.execute("SELECT id, ordinal, status, failure_code, candidate_sha, lane, outcome_digest FROM attempts WHERE job_seq = ? ORDER BY ordinal", (seq,)).fetchall()
        evs = db.execute("SELECT type, attempt, code FROM events WHERE job_seq = ? ORDER BY seq", (seq,)).fetchall()
        terminal = [e for e in evs if e[0] in ("succeeded", "failed")]
        if status not in ("succeeded", "failed") or len(terminal) == 0:
            lost += 1
            say("job %s is %s" % (jid, status))
        if len(terminal) > 1 or (terminal and evs[-1][0] not in ("succeeded", "failed")):
            duplicated += 1
            say("job %s ended %d times" % (jid, len(terminal)))
        wins = [a for a in atts if a[2] == "succeeded"]
        if len(wins) > 1 or (status == "succeeded") != (len(wins) == 1):
            duplicated += 1
            say("job %s: %d succeeded attempts, status %s" % (jid, len(wins), status))
        if wins and wins[0][1] != atts[-1][1]:
            duplicated += 1
            say("job %s: a result was accepted from attempt %d while a later attempt exists" % (jid, wins[0][1]))
        for a in atts:
            if a[2] in ("expired", "failed") and (a[4] is not None):
                duplicated += 1
                say("job %s attempt %d is %s yet holds a candidate" % (jid, a[1], a[2]))
        if [a[1] for a in atts] != list(range(1, len(atts) + 1)) or len(atts) != count:
            burned += 1
            say("job %s: ordinals %s, attempt_count %d" % (jid, [a[1] for a in atts], count))
        # Events agree with the attempts.
        leased = {}
        released = {}
        for t, k, _ in evs:
            if t == "leased":
                leased[k] = leased.get(k, 0) + 1
            if t == "released":
                released[k] = released.get(k, 0) + 1
        for a in atts:
            k, st_ = a[1], a[2]
            if leased.get(k, 0) != 1 + released.get(k, 0):
                burned += 1
                say("job %s attempt %d: %d leased and %d released events" % (jid, k, leased.get(k, 0), released.get(k, 0)))
            want = {"expired": ("expired",), "failed": ("attempt_failed", "failed"), "succeeded": ("succeeded",)}.get(st_, ())
            if st_ != "leased" and not any(t in want and ek in (k, None) for t, ek, _ in evs):
                burned += 1
                say("job %s attempt %d is %s without its event" % (jid, k, st_))
            if a[3] == "worker_shutdown" and a[0] not in started:
                burned += 1
                say("job %s attempt %d: worker_shutdown on a lease its Worker never started" % (jid, k))
        if set(leased) - {a[1] for a in atts}:
            burned += 1
            say("job %s: leased events for attempts that do not exist" % jid)
        # The aggregate (owner API) says the same.
        agg = aggs.get(jid)
        if jid in aggs and (agg is None or agg["job"]["status"] != status or [x["ordinal"] for x in agg["attempts"]] != [a[1] for a in atts]):
            say("job %s: the owner API disagrees with the database" % jid)
        # A coding success: its candidate ref exists in the clone that made it.
        if kind == "coding" and wins:
            aid, cand, lane = wins[0][0], wins[0][4], wins[0][5]
            clone = os.path.join(d, "repos", "demo-" + lane.split("#")[0][-1])
            ref = "refs/agent-forge/candidates/%s/%s" % (jid, aid)
            got = subprocess.run(["git", "-C", clone, "rev-parse", "--verify", "-q", ref], capture_output=True, text=True,
                                 env=dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")).stdout.strip()
            if got != cand:
                lost += 1
                say("job %s: candidate ref %s is %r, want %s" % (jid, ref, got, cand))
    db.close()
    return lost, duplicated, burned, integrity, rows

dbpath = os.path.join(d, "state", "forge.db")
lost, duplicated, burned, integrity, rows = db_checks(dbpath, started, aggs, note)


def self_check():
    """The checks are not vacuous: each tampering of a copy of this
    database must be caught by the check meant for it."""
    import shutil
    import sqlite3
    db = ro_db(dbpath)
    jid, seq = db.execute("SELECT id, seq FROM jobs WHERE status = 'succeeded' ORDER BY seq LIMIT 1").fetchone()
    aid = db.execute("SELECT id FROM attempts WHERE job_seq = ? ORDER BY ordinal DESC LIMIT 1", (seq,)).fetchone()[0]
    db.close()
    cases = [
        ("a terminal event removed", 0, "DELETE FROM events WHERE job_seq = %d AND type = 'succeeded'" % seq),
        ("a second terminal event", 1, "INSERT INTO events (job_seq, seq, type, at) SELECT job_seq, max(seq) + 1, 'succeeded', max(at) FROM events WHERE job_seq = %d" % seq),
        ("an ordinal gap", 2, "UPDATE attempts SET ordinal = ordinal + 1 WHERE job_seq = %d" % seq),
        ("worker_shutdown on an unstarted lease", 2, "UPDATE attempts SET failure_code = 'worker_shutdown' WHERE job_seq = %d AND id = '%s'" % (seq, aid)),
    ]
    missed = []
    for name, which, sql in cases:
        tdir = os.path.join(d, "tamper")
        shutil.rmtree(tdir, ignore_errors=True)
        os.makedirs(tdir)
        for suffix in ("", "-wal"):
            if os.path.exists(dbpath + suffix):
                shutil.copy(dbpath + suffix, os.path.join(tdir, "forge.db" + suffix))
        rw = sqlite3.connect(os.path.join(tdir, "forge.db"))
        rw.execute(sql)
        rw.commit()
        rw.close()
        got = db_checks(os.path.join(tdir, "forge.db"), started - {aid}, {jid: aggs.get(jid)}, lambda m: None)
        if got[which] == 0:
            missed.append(name)
    shutil.rmtree(os.path.join(d, "tamper"), ignore_errors=True)
    return missed


if rows and any(r[1] == "succeeded" for r in rows.values()):
    for m in self_check():
        note("self-check: the checks did not catch " + m)
leaked = 0
for w in "abc":
    for sub_ in ("worktrees-" + w, "runtime-" + w):
        p = os.path.join(d, sub_)
        if os.path.isdir(p):
            leaked += len(os.listdir(p))
    wl = subprocess.run(["git", "-C", os.path.join(d, "repos", "demo-" + w), "worktree", "list", "--porcelain"], capture_output=True, text=True).stdout
    leaked += max(0, wl.count("worktree ") - 1)
outcomes = {}
for (_, status, _, _) in rows.values():
    outcomes[status] = outcomes.get(status, 0) + 1
for p in problems:
    print("chaos: " + p, file=sys.stderr)
print("chaos: seed=%d jobs=%d submitted=%d outcomes=%s gate_kills=%d worker_kills=%d sigterms=%d plugin_kills=%d self_check=%s" %
      (seed, len(rows), len(submitted), json.dumps(outcomes, sort_keys=True), stats["gate_kills"], stats["worker_kills"], stats["sigterms"], stats["plugin_kills"], "ok" if not any(p.startswith("self-check") for p in problems) else "FAILED"))
print("jobs=%d kills=%d restarts=%d lost=%d duplicated=%d burned=%d leaked_dirs=%d integrity=%s" %
      (len(rows), stats["kills"], stats["restarts"], lost, duplicated, burned, leaked, integrity))
ok = lost == duplicated == burned == leaked == 0 and integrity == "ok" and not problems
sys.exit(0 if ok else 1)
