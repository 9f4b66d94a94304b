#!/usr/bin/env python3
# A protocol v1 text plugin written independently of the Go SDK. The
# execute input selects a behaviour: "ok <text>" is correct (upper-cases
# <text>); the other words are subtly broken ways to answer.
#
# It runs inside the Worker's sandbox (docs/sandbox.md), so it writes
# nothing the test can read. The words that leave processes behind
# (children, daemon, block) start them as "sleep <marker>", a unique
# fractional duration GNU sleep accepts: the test finds them, and through
# their parent the plugin, by that exact argument in /proc/<pid>/cmdline.
# Where the plugin must wait for the test, it polls for a flag file the
# test creates in a directory the Worker lists in sandbox_read_paths.
import json, os, subprocess, sys, time

def out(s):
    sys.stdout.write(s)
    sys.stdout.flush()

def frame(obj, sep=(",", ":")):
    out(json.dumps(obj, separators=sep, ensure_ascii=False) + "\n")

sys.stderr.write("scenario plugin starting: PLUGIN-STDERR-NOISE\n" * 50)
init = json.loads(sys.stdin.readline())
fid = init["id"]
offer = init["capabilities"]
caps = ["text"] + (["progress"] if "progress" in offer else [])
frame({"version": "v1", "id": fid, "type": "initialized", "capabilities": caps})
ex = json.loads(sys.stdin.readline())
word, _, rest = ex["input"].partition(" ")

def result(output, **extra):
    d = {"version": "v1", "id": fid, "type": "result", "output": output}
    d.update(extra)
    return d

def progress(n):
    for i in range(1, n + 1):
        frame({"version": "v1", "id": fid, "type": "progress", "sequence": i,
               "stage": "working", "text": "P" * 1024})

def wait_flag(path):
    # Polls (bounded) until path can be opened for reading: the test
    # creates it in a sandbox_read_paths directory.
    for _ in range(6000):
        try:
            open(path).close()
            return
        except OSError:
            time.sleep(0.02)
    sys.exit(4)

def finish():
    # Drain stdin to EOF, then exit 0 at once: the interpreter's teardown
    # alone can outlast the Worker's 250 ms exit window on a busy machine.
    sys.stdin.read()
    os._exit(0)

if word == "ok":
    if "progress" in caps:
        progress(128)
    sys.stderr.write("PLUGIN-STDERR-NOISE " + rest + "\n")
    frame(result(rest.upper()))
    finish()
elif word == "too-many-progress":
    progress(129)
    frame(result("X"))
    finish()
elif word == "exact-output":
    frame(result("x" * 65536))
    finish()
elif word == "big-output":
    frame(result("x" * 65537))
    finish()
elif word == "extra-field":
    frame(result("X", extra=1))
    finish()
elif word == "non-compact":
    frame(result("X"), sep=(", ", ": "))
    finish()
elif word == "crlf":
    out(json.dumps(result("X"), separators=(",", ":")) + "\r\n")
    finish()
elif word == "no-lf":
    out(json.dumps(result("X"), separators=(",", ":")))
    sys.exit(0)  # stdout ends without LF
elif word == "exit1":
    frame(result("X"))
    sys.stdin.read()
    sys.exit(1)
elif word == "write-after":
    frame(result("X"))
    frame(result("X"))
    finish()
elif word == "linger":
    frame(result("X"))
    time.sleep(60)
elif word == "sleep":
    # rest: "<seconds> <text>"
    secs, _, text = rest.partition(" ")
    time.sleep(float(secs))
    frame(result(text.upper()))
    finish()
elif word == "stderr-flood":
    chunk = "E" * 65536 + "\n"
    for _ in range(40):
        sys.stderr.write(chunk)
    sys.stderr.flush()
    frame(result("X"))
    finish()
elif word == "die-mid-frame":
    out('{"version":"v1","id":"' + fid + '","type":"res')
    os.kill(os.getpid(), 9)
elif word == "bad-sequence":
    frame({"version": "v1", "id": fid, "type": "progress", "sequence": 2, "stage": "working", "text": "x"})
    frame(result("X"))
    finish()
elif word == "env":
    frame(result(",".join(sorted(k + ("=" + v if k != "PATH" else "") for k, v in os.environ.items()))))
    finish()
elif word == "big-progress-text":
    frame({"version": "v1", "id": fid, "type": "progress", "sequence": 1, "stage": "working", "text": "P" * 1025})
    frame(result("X"))
    finish()
elif word == "unknown-stage":
    frame({"version": "v1", "id": fid, "type": "progress", "sequence": 1, "stage": "thinking", "text": "x"})
    frame(result("X"))
    finish()
elif word == "hang":
    time.sleep(60)
elif word == "failure":
    frame({"version": "v1", "id": fid, "type": "failure", "category": "execution_failed"})
    finish()
elif word == "wrong-id":
    d = result("X")
    d["id"] = "0" * 32 if fid != "0" * 32 else "1" * 32
    frame(d)
    finish()
elif word == "children":
    # rest: "<marker> <flag>". Leaves an ordinary and a setsid descendant
    # behind, each running "sleep <marker>", and answers once <flag> can
    # be read (the test creates it after it has found both).
    marker, _, flag = rest.partition(" ")
    subprocess.Popen(["sleep", marker], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.Popen(["sleep", marker], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_flag(flag)
    frame(result("CHILDREN"))
    finish()
elif word == "daemon":
    # rest: "<marker> <flag>". A background "sleep <marker>" that inherits
    # stdout and stderr and outlives us; answers once <flag> can be read.
    marker, _, flag = rest.partition(" ")
    subprocess.Popen(["sleep", marker], stdin=subprocess.DEVNULL)
    wait_flag(flag)
    frame(result("DAEMON"))
    finish()
elif word == "block":
    # rest: "<marker>". Starts a "sleep <marker>" child, then blocks
    # forever without reading stdin.
    subprocess.Popen(["sleep", rest], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(300)
else:
    frame({"version": "v1", "id": fid, "type": "failure", "category": "invalid_request"})
    finish()
