#!/usr/bin/env python3
# A plugin-protocol v1 text plugin for scripts/hostile-e2e.sh. The execute
# input "<mode> <text>" selects how it answers: "ok <text>" is a correct
# answer (the text upper-cased); every other mode is a hostile one the
# Worker's plugin host must refuse without passing anything on, carrying
# <text> reversed (the script's marker, which so never appears in a task).
import json, sys

def out(b):
    sys.stdout.buffer.write(b)
    sys.stdout.buffer.flush()

def line(obj):
    out(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

init = json.loads(sys.stdin.readline())
fid = init["id"]
line({"version": "v1", "id": fid, "type": "initialized", "capabilities": ["text"]})
ex = json.loads(sys.stdin.readline())
mode, _, rest = ex["input"].partition(" ")
if mode != "ok":
    rest = rest[::-1]
res = '{"version":"v1","id":"%s","type":"result","output":' % fid

if mode == "ok":
    line({"version": "v1", "id": fid, "type": "result", "output": rest.upper()})
elif mode == "big-frame":
    out((res + json.dumps(rest + "x" * (2 << 20)) + "}\n").encode())
elif mode == "no-newline":
    out(b"{" + b"x" * (8 << 20))
elif mode == "bad-utf8":
    out((res + '"' + rest).encode() + b'\xff\xfe"}\n')
elif mode == "lone-surrogate":
    out((res + '"' + rest + '\\ud800"}\n').encode())
elif mode == "dup-key":
    out((res + '"' + rest + '","output":"x"}\n').encode())
elif mode == "case-key":
    out(('{"version":"v1","id":"%s","type":"result","Output":"%s"}\n' % (fid, rest)).encode())
elif mode == "unknown-field":
    out((res + '"' + rest + '","extra":1}\n').encode())
elif mode == "null":
    out((res + 'null,"note":"' + rest + '"}\n').encode())
elif mode == "worker-frame":
    line({"version": "v1", "id": fid, "type": "execute", "input": rest})
elif mode == "binary":
    out(b"\x00\x01\x02" + rest.encode() + b"\xff\n")
elif mode == "two-results":
    line({"version": "v1", "id": fid, "type": "result", "output": rest})
    line({"version": "v1", "id": fid, "type": "result", "output": rest})
else:
    line({"version": "v1", "id": fid, "type": "failure", "category": "invalid_request"})
sys.stdin.read()
