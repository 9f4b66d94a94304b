# Shared Python helpers (a module, not a program) for the e2e scripts that drive a running Gate by
# hand: raw HTTP on a socket, a minimal WebSocket client speaking
# forge-wire/v1 (docs/wire-protocol.md), and read-only SQLite access.
# Import with sys.path.insert(0, "<repo>/testdata/forgeclient"); stdlib only.
import base64
import json
import os
import socket
import sqlite3
import struct
import time


def http(addr, method, path, body=b"", headers=None, timeout=10):
    """One request on a fresh connection; returns (status, headers, body).
    headers is a list of (name, value) pairs, sent as given."""
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=timeout)
    try:
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: %s" % addr, "Connection: close"]
        names = {n.lower() for n, _ in headers or []}
        for n, v in headers or []:
            lines.append("%s: %s" % (n, v))
        if body and "content-length" not in names and "transfer-encoding" not in names:
            lines.append("Content-Length: %d" % len(body))
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        return read_response(s)
    finally:
        s.close()


def read_response(s):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError("connection closed before a response")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    hdrs = {}
    for line in lines[1:]:
        n, _, v = line.partition(":")
        hdrs[n.strip().lower()] = v.strip()
    n = int(hdrs.get("content-length", "-1"))
    while n >= 0 and len(rest) < n or n < 0 and hdrs.get("connection") == "close":
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, hdrs, rest[:n] if n >= 0 else rest


def owner_json(addr, token, method, path, body=None):
    hdrs = [("Authorization", "Bearer " + token)]
    if body is not None:
        hdrs.append(("Content-Type", "application/json"))
        body = json.dumps(body).encode()
    status, _, b = http(addr, method, path, body or b"", hdrs)
    return status, json.loads(b) if b else None


class WS:
    """A WebSocket client connection (RFC 6455, client frames masked)."""

    def __init__(self, addr, token, timeout=10, extra=None):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = ["GET /v1/worker/connect HTTP/1.1", "Host: " + addr, "Upgrade: websocket",
                 "Connection: Upgrade", "Sec-WebSocket-Key: " + key, "Sec-WebSocket-Version: 13"]
        if token is not None:
            lines.append("Authorization: Bearer " + token)
        lines += extra or []
        self.s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = self.s.recv(4096)
            if not chunk:
                raise EOFError("closed during handshake")
            data += chunk
        head, _, self.buf = data.partition(b"\r\n\r\n")
        self.status = int(head.split(b" ")[1])
        self.head = head

    def send_frame(self, payload, opcode=1, fin=True):
        mask = os.urandom(4)
        n = len(payload)
        b0 = (0x80 if fin else 0) | opcode
        if n < 126:
            hdr = struct.pack("!BB", b0, 0x80 | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", b0, 0x80 | 126, n)
        else:
            hdr = struct.pack("!BBQ", b0, 0x80 | 127, n)
        masked = bytes(c ^ mask[i % 4] for i, c in enumerate(payload)) if n < 65536 else _mask_big(payload, mask)
        self.s.sendall(hdr + mask + masked)

    def send(self, obj):
        self.send_frame(json.dumps(obj, separators=(",", ":")).encode())

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("closed")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv_frame(self):
        b0, b1 = self._read(2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        return b0 & 0x0F, self._read(n)

    def recv(self):
        """The next text message as an object; EOFError when the Gate closed."""
        while True:
            op, payload = self.recv_frame()
            if op == 8:
                raise EOFError("close frame")
            if op == 1:
                return json.loads(payload)

    def closed_without_reply(self, wait=10):
        """True when the Gate ends the connection sending no text message."""
        self.s.settimeout(wait)
        try:
            while True:
                op, _ = self.recv_frame()
                if op == 1:
                    return False
                if op == 8:
                    return True
        except (EOFError, ConnectionError):
            return True
        except socket.timeout:
            return False

    def hello(self, worker, slot, plugins=("reference",)):
        self.send({"type": "hello", "hello": {"protocol": "forge-wire/v1", "worker_id": worker, "slot": slot,
                                              "plugins": list(plugins), "repositories": []}})
        return self.recv()

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def _mask_big(payload, mask):
    n = len(payload)
    m = (mask * (n // 4 + 1))[:n]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big")


def ro_db(path):
    """The Gate's SQLite file opened read-only (never written, never created)."""
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=10)
    db.execute("PRAGMA query_only = ON")
    return db


def row_counts(path):
    db = ro_db(path)
    try:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {n: db.execute('SELECT count(*) FROM "%s"' % n).fetchone()[0] for n in names}
    finally:
        db.close()


def wait_until(pred, limit=30, step=0.05):
    deadline = time.time() + limit
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return None
