# The table of scripts/hostile-e2e.sh, phase "gate": hostile HTTP and
# WebSocket input against a running Gate. Usage:
#   python3 hostile.py gate ADDR DB MARKER
#   python3 hostile.py plugin ADDR DB MARKER
# Tokens come from FORGE_OWNER_TOKEN, FORGE_WORKER_TOKEN (the real
# Worker "worker-1") and FORGE_RAW_TOKEN (Worker "raw", concurrency 2,
# driven by hand here). Every row must get its bounded, value-free error,
# change no row of the SQLite file (read read-only) and leave the Gate
# ready. Prints one JSON line per failed row on stderr and the last line
#   tried=N rejected=N stored=N
# exiting 0 only when every row was rejected and nothing stored.
import json, os, socket, sys, threading, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "forgeclient"))
from forgeclient import http, read_response, WS, row_counts, wait_until, owner_json, ro_db  # noqa: E402

phase, addr, db, marker = sys.argv[1:5]
owner = os.environ["FORGE_OWNER_TOKEN"]
worker = os.environ["FORGE_WORKER_TOKEN"]
raw = os.environ["FORGE_RAW_TOKEN"]
tried = rejected = stored = 0
SHA = "0123456789abcdef0123456789abcdef01234567"


def bad(name, why):
    print(json.dumps({"row": name, "failed": why}), file=sys.stderr)


def api_error(status, hdrs, body, want_status, want_code):
    """None when body is exactly the documented, bounded, value-free error."""
    if status != want_status:
        return "status %d, want %d" % (status, want_status)
    if len(body) > 512 or marker.encode() in body:
        return "error body unbounded or echoes input"
    try:
        e = json.loads(body)
    except ValueError:
        return "error body is not JSON"
    if not body.endswith(b"}\n") or list(e) != ["error"] or sorted(e["error"]) != ["code", "message"]:
        return "error body shape"
    if want_code and e["error"]["code"] != want_code:
        return "code %s, want %s" % (e["error"]["code"], want_code)
    if hdrs.get("content-type") != "application/json":
        return "error content type"
    return None


def ready():
    try:
        return http(addr, "GET", "/readyz")[0] == 200
    except OSError:
        return False


def row(name, fn):
    """Runs one hostile case: fn returns None when rejected as documented."""
    global tried, rejected, stored
    tried += 1
    before = row_counts(db)
    try:
        why = fn()
    except Exception as e:  # a crash of the case itself is a failure of the row
        why = "case raised %s" % type(e).__name__
    after = row_counts(db)
    if after != before:
        stored += 1
        why = why or "rows changed"
    if not wait_until(ready, 10):
        why = why or "Gate stopped serving"
    if why:
        bad(name, why)
    else:
        rejected += 1


OWN = [("Authorization", "Bearer " + owner)]
JSONCT = [("Content-Type", "application/json")]


def submit(body, headers=None, want=(400, None)):
    def fn():
        h = OWN + JSONCT if headers is None else headers
        st, hd, b = http(addr, "POST", "/v1/jobs", body if isinstance(body, bytes) else body.encode(), h)
        return api_error(st, hd, b, *want)
    return fn


def short_body():
    """Content-Length 4096, 30 bytes sent, then the client stops writing."""
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=15)
    try:
        s.sendall(("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"
                   "Content-Length: 4096\r\n\r\n{\"input\":\"%s" % (owner, marker)).encode())
        s.shutdown(socket.SHUT_WR)
        try:
            st, hd, b = read_response(s)
        except EOFError:
            return None  # closed without an answer: nothing to leak
        return api_error(st, hd, b, 400, "invalid_json")
    finally:
        s.close()


def get(path, headers, want):
    def fn():
        st, hd, b = http(addr, "GET", path, b"", headers)
        return api_error(st, hd, b, *want)
    return fn


def ws_refused(token, want):
    def fn():
        w = WS(addr, token)
        try:
            return None if w.status == want else "upgrade status %d, want %d" % (w.status, want)
        finally:
            w.close()
    return fn


def ws_closed(frames, hello_first=False, slot=0):
    """A raw lane (after a valid hello when hello_first) sends frames; the
    Gate must close the connection without replying."""
    def fn():
        w = WS(addr, raw)
        try:
            if w.status != 101:
                return "no upgrade (%d)" % w.status
            if hello_first:
                wel = w.hello("raw", slot)
                if wel.get("type") != "welcome":
                    return "no welcome"
            for payload, opcode in frames:
                try:
                    w.send_frame(payload, opcode)
                except (BrokenPipeError, ConnectionResetError):
                    break
            return None if w.closed_without_reply(15) else "Gate replied or kept the connection"
        finally:
            w.close()
    return fn


def ws_hello_rejected(hello):
    def fn():
        w = WS(addr, raw)
        try:
            w.send({"type": "hello", "hello": hello})
            try:
                r = w.recv()
            except EOFError:
                return None  # closed without a welcome: refused
            if r.get("type") == "welcome":
                return "welcomed"
            return None if r.get("type") == "reject" and "seq" not in r else "unexpected %s" % r.get("type")
        finally:
            w.close()
    return fn


def gate_table():
    long_arg = "a" * 4097
    rows = [
        ("oversized body (declared)", submit('{"input":"' + marker + "x" * (1 << 20) + '"}', want=(413, "too_large"))),
        ("oversized body (chunked)", submit(b"%x\r\n" % ((1 << 20) + 64) + b'{"input":"' + marker.encode() + b"x" * ((1 << 20) + 64 - 12 - len(marker)) + b'"}\r\n0\r\n\r\n',
                                             headers=OWN + JSONCT + [("Transfer-Encoding", "chunked")], want=(413, "too_large"))),
        ("truncated JSON", submit('{"input":"' + marker)),
        ("body shorter than declared", short_body),
        ("empty body", submit("")),
        ("content type text/plain", submit('{"input":"' + marker + '"}', OWN + [("Content-Type", "text/plain")], (415, "unsupported_media_type"))),
        ("content type form", submit('{"input":"' + marker + '"}', OWN + [("Content-Type", "application/x-www-form-urlencoded")], (415, "unsupported_media_type"))),
        ("content type multipart", submit('{"input":"' + marker + '"}', OWN + [("Content-Type", "multipart/form-data; boundary=x")], (415, "unsupported_media_type"))),
        ("content type json latin1", submit('{"input":"' + marker + '"}', OWN + [("Content-Type", "application/json; charset=latin1")], (415, "unsupported_media_type"))),
        ("content type twice", submit('{"input":"' + marker + '"}', OWN + JSONCT + JSONCT, (415, "unsupported_media_type"))),
        ("no content type, bad body", submit('{"input":"' + marker + '","input":"y"}', OWN, (400, "invalid_json"))),
        ("duplicate key", submit('{"input":"' + marker + '","input":"b"}', want=(400, "invalid_json"))),
        ("case-variant key", submit('{"Input":"' + marker + '"}', want=(400, "invalid_json"))),
        ("case-variant coding key", submit('{"repository_id":"demo","Base_SHA":"%s","instruction":"%s"}' % (SHA, marker), want=(400, "invalid_json"))),
        ("unknown field", submit('{"input":"' + marker + '","priority":1}', want=(400, "invalid_json"))),
        ("null value", submit('{"input":null,"x":"' + marker + '"}', want=(400, "invalid_json"))),
        ("null tests", submit('{"repository_id":"demo","base_sha":"%s","instruction":"%s","tests":null}' % (SHA, marker), want=(400, "invalid_json"))),
        ("null top level", submit("null")),
        ("invalid UTF-8", submit(b'{"input":"' + marker.encode() + b'\xff\xfe"}', want=(400, "invalid_json"))),
        ("invalid UTF-8 in key", submit(b'{"inp\xc3ut":"' + marker.encode() + b'"}', want=(400, "invalid_json"))),
        ("lone surrogate", submit('{"input":"' + marker + '\\ud800"}')),
        ("lone low surrogate", submit('{"input":"\\udc00' + marker + '"}')),
        ("33 tests", submit(json.dumps({"repository_id": "demo", "base_sha": SHA, "instruction": marker, "tests": [["true"]] * 33}), want=(400, "invalid_task"))),
        ("65-entry argv", submit(json.dumps({"repository_id": "demo", "base_sha": SHA, "instruction": marker, "tests": [["echo"] + [marker] * 64]}), want=(400, "invalid_task"))),
        ("4097-byte argument", submit(json.dumps({"repository_id": "demo", "base_sha": SHA, "instruction": marker, "tests": [["echo", marker + long_arg]]}), want=(400, "invalid_task"))),
        ("argv over 64 KiB total", submit(json.dumps({"repository_id": "demo", "base_sha": SHA, "instruction": marker, "tests": [["echo"] + ["b" * 4000] * 17]}), want=(400, "invalid_task"))),
        ("huge tests array", submit(json.dumps({"repository_id": "demo", "base_sha": SHA, "instruction": marker, "tests": [["true"]] * 20000}), want=(400, "invalid_task"))),
        ("empty argv", submit(json.dumps({"repository_id": "demo", "base_sha": SHA, "instruction": marker, "tests": [[]]}), want=(400, "invalid_task"))),
        ("NUL in argument", submit(json.dumps({"repository_id": "demo", "base_sha": SHA, "instruction": marker, "tests": [["echo", "a\u0000b"]]}), want=(400, "invalid_task"))),
        ("NUL in instruction", submit(json.dumps({"repository_id": "demo", "base_sha": SHA, "instruction": marker + "\u0000"}), want=(400, "invalid_task"))),
        ("input over 64 KiB", submit(json.dumps({"input": marker + "x" * 65536}), want=(400, "invalid_task"))),
        ("author with control char", submit(json.dumps({"repository_id": "demo", "base_sha": SHA, "instruction": "x", "commit_author_name": marker + "\u0007", "commit_author_email": "a@b.c"}), want=(400, "invalid_task"))),
        ("author email with display name", submit(json.dumps({"repository_id": "demo", "base_sha": SHA, "instruction": "x", "commit_author_name": "A", "commit_author_email": marker + " <a@b.c>"}), want=(400, "invalid_task"))),
        ("uppercase base_sha", submit(json.dumps({"repository_id": "demo", "base_sha": SHA.upper(), "instruction": marker}), want=(400, "invalid_task"))),
    ]
    for rid in ["../" + marker, "demo/../x", marker + "/x", "demo\u0000", "demo\n", "Demo", ".demo", "x" * 65, "demo\u202e"]:
        rows.append(("repository_id %r" % rid[:12], submit(json.dumps({"repository_id": rid, "base_sha": SHA, "instruction": marker}), want=(400, "invalid_task"))))
    for jid in ["..%2f..%2fetc%2fpasswd", "%2e%2e", "..", "a%00b", "a%0ab", "a%20b", "%ff", "x" * 65, "0" * 32 + "%2f", marker]:
        for tmpl in ("/v1/jobs/%s", "/v1/jobs/%s/events", "/v1/jobs/%s/aggregate", "/v1/debug/jobs/%s", "/v1/debug/jobs/%s/activity"):
            rows.append(("id %s in %s" % (jid[:12], tmpl), get(tmpl % jid, OWN, (404, None))))

    def control_path():
        # Refused by net/http itself, before any route: a plain 400.
        st, _, b = http(addr, "GET", "/v1/jobs/a\x01" + marker, b"", OWN)
        return None if st == 400 and marker.encode() not in b and len(b) < 512 else "status %d" % st
    rows.append(("raw control char in path", control_path))
    owner_routes = [("POST", "/v1/jobs"), ("GET", "/v1/jobs/" + "0" * 32), ("GET", "/v1/jobs/" + "0" * 32 + "/events"),
                    ("GET", "/v1/jobs/" + "0" * 32 + "/aggregate"), ("GET", "/v1/debug/jobs"), ("GET", "/v1/debug/workers"),
                    ("GET", "/v1/debug/jobs/" + "0" * 32), ("GET", "/v1/debug/jobs/" + "0" * 32 + "/activity")]
    auths = [("no token", []), ("wrong token", [("Authorization", "Bearer " + marker)]),
             ("worker token", [("Authorization", "Bearer " + worker)]), ("raw worker token", [("Authorization", "Bearer " + raw)]),
             ("owner token twice", OWN + OWN), ("basic scheme", [("Authorization", "Basic " + owner)]),
             ("token with suffix", [("Authorization", "Bearer " + owner + "x")]), ("empty bearer", [("Authorization", "Bearer ")]),
             ("huge token", [("Authorization", "Bearer " + "t" * 8192)])]
    for method, path in owner_routes:
        for label, hdrs in auths:
            def fn(method=method, path=path, hdrs=hdrs):
                body = ('{"input":"%s"}' % marker).encode() if method == "POST" else b""
                st, hd, b = http(addr, method, path, body, hdrs + (JSONCT if method == "POST" else []))
                return api_error(st, hd, b, 401, "unauthorized")
            rows.append(("%s %s: %s" % (method, path[:20], label), fn))
    for label, tok in [("no token", None), ("wrong token", marker), ("owner token", owner)]:
        rows.append(("worker route: " + label, ws_refused(tok, 401)))
    rows.append(("worker route without upgrade", get("/v1/worker/connect", [("Authorization", "Bearer " + raw)], (400, "not_websocket"))))
    big = b'{"type":"heartbeat","seq":1,"heartbeat":{"job_id":"' + b"j" * ((1 << 20) + 16) + b'","attempt_id":"a"}}'
    heartbeat = json.dumps({"type": "heartbeat", "seq": 1, "heartbeat": {"job_id": "j", "attempt_id": marker}}).encode()
    rows += [
        ("ws frame over 1 MiB", ws_closed([(big, 1)], hello_first=True)),
        ("ws binary frame", ws_closed([(heartbeat, 2)], hello_first=True)),
        ("ws binary hello", ws_closed([(json.dumps({"type": "hello", "hello": {"protocol": "forge-wire/v1", "worker_id": "raw", "slot": 0, "plugins": [], "repositories": []}}).encode(), 2)])),
        ("ws message before hello", ws_closed([(heartbeat, 1)])),
        ("ws malformed JSON", ws_closed([(b'{"type":"heartbeat",' + marker.encode(), 1)], hello_first=True)),
        ("ws invalid UTF-8", ws_closed([(b'{"type":"heartbeat","seq":1,"heartbeat":{"job_id":"\xff","attempt_id":"a"}}', 1)], hello_first=True)),
        ("ws duplicate key", ws_closed([(b'{"type":"heartbeat","seq":1,"seq":2,"heartbeat":{"job_id":"j","attempt_id":"a"}}', 1)], hello_first=True)),
        ("ws unknown field", ws_closed([(b'{"type":"heartbeat","seq":1,"heartbeat":{"job_id":"j","attempt_id":"a","x":1}}', 1)], hello_first=True)),
        ("ws null payload", ws_closed([(b'{"type":"heartbeat","seq":1,"heartbeat":null}', 1)], hello_first=True)),
        ("ws second hello", ws_closed([(json.dumps({"type": "hello", "hello": {"protocol": "forge-wire/v1", "worker_id": "raw", "slot": 0, "plugins": [], "repositories": []}}).encode(), 1)], hello_first=True)),
        ("ws Gate-only message", ws_closed([(json.dumps({"type": "lease", "lease": {}}).encode(), 1)], hello_first=True)),
        ("ws id with traversal", ws_closed([(json.dumps({"type": "heartbeat", "seq": 1, "heartbeat": {"job_id": "../" + marker, "attempt_id": "a"}}).encode(), 1)], hello_first=True)),
        ("ws truncated message", ws_closed([(b'{"type":', 1)], hello_first=True)),
        ("hello for another worker", ws_hello_rejected({"protocol": "forge-wire/v1", "worker_id": "worker-1", "slot": 0, "plugins": ["hostile"], "repositories": []})),
        ("hello slot over concurrency", ws_hello_rejected({"protocol": "forge-wire/v1", "worker_id": "raw", "slot": 2, "plugins": ["hostile"], "repositories": []})),
        ("hello bad protocol", ws_hello_rejected({"protocol": "forge-wire/v0", "worker_id": "raw", "slot": 0, "plugins": ["hostile"], "repositories": []})),
        ("hello plugin id with control char", ws_hello_rejected({"protocol": "forge-wire/v1", "worker_id": "raw", "slot": 0, "plugins": ["a\u0001"], "repositories": []})),
        ("hello repository traversal", ws_hello_rejected({"protocol": "forge-wire/v1", "worker_id": "raw", "slot": 0, "plugins": ["hostile"], "repositories": ["../x"]})),
        ("hello duplicate plugins", ws_hello_rejected({"protocol": "forge-wire/v1", "worker_id": "raw", "slot": 0, "plugins": ["hostile", "hostile"], "repositories": []})),
        ("hello 65 plugins", ws_hello_rejected({"protocol": "forge-wire/v1", "worker_id": "raw", "slot": 0, "plugins": ["p%d" % i for i in range(65)], "repositories": []})),
    ]
    # The lanes a hand-driven lane uses are registered once (a valid
    # connection), so that later rows start from a settled row count.
    for slot in (0, 1):
        w = WS(addr, raw)
        assert w.hello("raw", slot, ("hostile",))["type"] == "welcome"
        w.close()
    for name, fn in rows:
        row(name, fn)


def slow_headers(n, hold):
    """n connections send a request header one byte at a time; returns the
    list of seconds after which the Gate closed each (None: still open)."""
    closed = [None] * n

    def one(i):
        host, port = addr.rsplit(":", 1)
        s = socket.create_connection((host, int(port)))
        start = time.time()
        req = b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10000
        try:
            for c in req:
                s.sendall(bytes([c]))
                time.sleep(0.5)
                if time.time() - start > hold:
                    return
        except OSError:
            closed[i] = time.time() - start
        finally:
            s.close()
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    return ts, closed


def slow_body(hold):
    """One submit that announces a body and trickles it; the Gate must end
    it within its whole-request bound (60 s) and store nothing."""
    result = {}

    def run():
        host, port = addr.rsplit(":", 1)
        s = socket.create_connection((host, int(port)))
        start = time.time()
        body = ('{"input":"%s' % marker).encode() + b"x" * 5000 + b'"}'
        s.sendall(("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (owner, len(body))).encode())
        try:
            for c in body:
                s.sendall(bytes([c]))
                s.settimeout(0.5)
                try:
                    if s.recv(4096) == b"":
                        break
                except socket.timeout:
                    pass
                if time.time() - start > hold:
                    result["open"] = True
                    return
        except OSError:
            pass
        result["closed_after"] = time.time() - start
        s.close()
    t = threading.Thread(target=run)
    t.start()
    return t, result


def connection_rows():
    # Slowloris: slow headers and a slow body are ended by the Gate's
    # bounds while it keeps serving; many idle connections too.
    def slowloris():
        ts, closed = slow_headers(20, 25)
        time.sleep(1)
        if not ready():
            return "Gate not serving during slow headers"
        for t in ts:
            t.join()
        late = [c for c in closed if c is None or c > 15]
        return "slow headers held open past 15 s" if late else None
    row("slow headers x20", slowloris)

    def idle():
        host, port = addr.rsplit(":", 1)
        socks = [socket.create_connection((host, int(port))) for _ in range(300)]
        try:
            if not ready():
                return "Gate not serving with 300 idle connections"
            st, _ = owner_json(addr, owner, "GET", "/v1/debug/workers")
            if st != 200:
                return "owner read failed with idle connections"
            deadline = time.time() + 20
            open_ = list(socks)
            while open_ and time.time() < deadline:
                still = []
                for s in open_:
                    s.settimeout(0.01)
                    try:
                        if s.recv(1) != b"":
                            still.append(s)
                    except socket.timeout:
                        still.append(s)
                    except OSError:
                        pass
                open_ = still
                time.sleep(0.2)
            return "%d idle connections never closed" % len(open_) if open_ else None
        finally:
            for s in socks:
                s.close()
    row("300 idle connections", idle)

    def idle_ws():
        ws = [WS(addr, raw) for _ in range(4)]
        try:
            over = WS(addr, raw)
            over_status = over.status
            over.close()
            if over_status != 429:
                return "connection over the Worker's limit answered %d" % over_status
            if not all(w.closed_without_reply(20) for w in ws):
                return "silent WebSocket kept past the hello bound"
            return None
        finally:
            for w in ws:
                w.close()
    row("idle WebSockets without hello", idle_ws)


def replay_rows():
    a = WS(addr, raw)
    b = WS(addr, raw)
    try:
        assert a.hello("raw", 0, ("hostile",))["type"] == "welcome"
        assert b.hello("raw", 1, ("hostile",))["type"] == "welcome"
        st, job = owner_json(addr, owner, "POST", "/v1/jobs", {"input": "ok replay"})
        assert st == 201, st
        leased = []
        for w in (a, b):
            w.s.settimeout(0.5)
        deadline = time.time() + 10
        while not leased and time.time() < deadline:
            for w in (a, b):
                try:
                    m = w.recv()
                    if m["type"] == "lease":
                        leased.append((w, m["lease"]))
                except socket.timeout:
                    pass
        assert leased, "no lease"
        holder, lease = leased[0]
        other = b if holder is a else a
        for w in (a, b):
            w.s.settimeout(10)
        ids = {"job_id": lease["job_id"], "attempt_id": lease["attempt_id"]}
        forged = {"type": "result", "seq": 1, "result": dict(ids, outcome="succeeded", output=marker)}

        def replay(msg, want):
            def fn():
                other.send(msg)
                r = other.recv()
                if r.get("type") != "reject" or r["reject"]["code"] not in want:
                    return "answered %s" % json.dumps(r)[:80]
                return None
            return fn
        row("result for another lane's attempt", replay(forged, ("stale",)))
        row("heartbeat for another lane's attempt", replay({"type": "heartbeat", "seq": 2, "heartbeat": ids}, ("stale",)))
        row("evidence for another lane's attempt", replay({"type": "evidence", "seq": 3, "evidence": dict(ids, batch=1, records=[{"phase": "plugin", "reason": "spawn_failed"}])}, ("stale", "invalid")))
        row("result for an unknown attempt", replay({"type": "result", "seq": 4, "result": {"job_id": lease["job_id"], "attempt_id": "f" * 32, "outcome": "succeeded", "output": marker}}, ("stale",)))
        # The holder finishes; a later replay from the other lane, and a
        # conflicting one from the holder, change nothing.
        holder.send({"type": "result", "seq": 1, "result": dict(ids, outcome="succeeded", output="REPLAY")})
        assert holder.recv()["type"] == "ack"
        row("replay after the holder's result", replay(dict(forged, seq=5), ("stale",)))

        def conflict():
            holder.send({"type": "result", "seq": 2, "result": dict(ids, outcome="succeeded", output=marker)})
            r = holder.recv()
            return None if r.get("type") == "reject" and r["reject"]["code"] in ("conflict", "stale") else "answered %s" % r.get("type")
        row("conflicting result from the holder", conflict)
        st, j = owner_json(addr, owner, "GET", "/v1/jobs/" + job["id"])
        if st != 200 or j.get("status") != "succeeded" or j.get("result") != "REPLAY":
            bad("replayed job", "status %s result %r" % (j.get("status"), j.get("result")))
            global stored
            stored += 1
    finally:
        a.close()
        b.close()


def marker_in_db():
    dbh = ro_db(db)
    try:
        for (name,) in dbh.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            cols = [r[1] for r in dbh.execute('PRAGMA table_info("%s")' % name)]
            for c in cols:
                q = 'SELECT count(*) FROM "%s" WHERE instr(CAST("%s" AS BLOB), CAST(? AS BLOB)) > 0' % (name, c)
                if dbh.execute(q, (marker,)).fetchone()[0]:
                    return "%s.%s" % (name, c)
    finally:
        dbh.close()
    return None


def plugin_rows():
    modes = ["big-frame", "no-newline", "bad-utf8", "lone-surrogate", "dup-key", "case-key", "unknown-field",
             "null", "worker-frame", "binary", "two-results"]
    jobs = {}
    for m in modes:
        st, j = owner_json(addr, owner, "POST", "/v1/jobs", {"input": "%s %s" % (m, marker[::-1])})
        assert st == 201, st
        jobs[m] = j["id"]
    for m in modes:
        def fn(m=m):
            def done():
                st, a = owner_json(addr, owner, "GET", "/v1/jobs/%s/aggregate" % jobs[m])
                return a if a["job"]["status"] in ("succeeded", "failed") else None
            a = wait_until(done, 60, 0.1)
            if a is None:
                return "job never ended"
            job = a["job"]
            if job["status"] != "failed" or "result" in job:
                return "plugin answer accepted"
            codes = {x.get("failure_code") for x in a["attempts"]}
            if not codes <= {"plugin_protocol_violation", "plugin_output_limit"}:
                return "attempt codes %s" % sorted(map(str, codes))
            if marker in json.dumps(a):
                return "marker reached the aggregate"
            return None
        global tried, rejected
        tried += 1
        why = fn()
        if why:
            bad("plugin " + m, why)
        else:
            rejected += 1


if phase == "gate":
    body_t, body_r = slow_body(75)
    gate_table()
    connection_rows()
    replay_rows()
    body_t.join()
    tried += 1
    if body_r.get("open") or body_r.get("closed_after", 99) > 65:
        bad("slow body", "held open %s" % body_r)
    else:
        rejected += 1
elif phase == "plugin":
    plugin_rows()
where = marker_in_db()
if where:
    bad("database", "marker stored in " + where)
    stored += 1
print("tried=%d rejected=%d stored=%d" % (tried, rejected, stored))
sys.exit(0 if tried == rejected and stored == 0 else 1)
