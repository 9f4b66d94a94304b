#!/usr/bin/env python3
# A protocol v1 workspace_edit plugin written independently of the Go SDK.
# The instruction's first word selects the behaviour.
#
# It runs inside the Worker's sandbox (docs/sandbox.md): the words that
# write Git state outside the workspace (commit writes objects, git-config
# the repository's config, new-ref its refs) are refused there, git fails
# and the plugin exits non-zero without a result. Only a Worker with
# "sandbox": "none" lets them through to the Worker's own workspace checks.
# slow-write blocks on a "sleep <marker>" child the test finds in /proc,
# until a flag file the test creates (in a sandbox_read_paths directory)
# can be read.
import json, os, subprocess, sys, time

def frame(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")
    sys.stdout.flush()

init = json.loads(sys.stdin.readline())
fid = init["id"]
offer = init["capabilities"]
caps = ["workspace_edit"] + [c for c in ("commit_subject", "agent_report") if c in offer]
frame({"version": "v1", "id": fid, "type": "initialized", "capabilities": caps})
ex = json.loads(sys.stdin.readline())
ws = ex["workspace"]
word, _, rest = ex["instruction"].partition(" ")

def git(*args):
    env = {"PATH": os.environ.get("PATH", ""), "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "p", "GIT_AUTHOR_EMAIL": "p@example.invalid",
           "GIT_COMMITTER_NAME": "p", "GIT_COMMITTER_EMAIL": "p@example.invalid"}
    subprocess.run(["git", "-C", ws] + list(args), check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def write(name, content):
    with open(os.path.join(ws, name), "w") as f:
        f.write(content)

def finish():
    # Read stdin to its end, then exit 0 at once: the interpreter's
    # teardown alone can outlast the Worker's 250 ms exit window on a busy
    # machine (frames are flushed as they are written).
    sys.stdin.read()
    os._exit(0)

res = {"version": "v1", "id": fid, "type": "result"}
if word == "write":
    write("notes.txt", rest + "\n")
    res["commit_subject"] = "feat: add notes"
    if "agent_report" in caps:
        res["summary"] = "Added notes.txt."
        res["changes"] = ["notes.txt: new file"]
elif word == "nothing":
    pass
elif word == "commit":
    write("notes.txt", "x\n")
    git("add", "-A")
    git("commit", "-q", "-m", "sneaky")
elif word == "git-config":
    write("notes.txt", "x\n")
    git("config", "core.hooksPath", "/tmp/hooks")
elif word == "fsmonitor":
    write("notes.txt", "x\n")
    git("config", "core.fsmonitor", rest)
elif word == "move-main":
    write("notes.txt", "x\n")
    git("add", "-A")
    git("commit", "-q", "-m", "sneaky")
    git("update-ref", "refs/heads/main", "HEAD")
elif word == "symlink-out":
    os.symlink("/etc/passwd", os.path.join(ws, "link"))
elif word == "symlink-dir-out":
    os.symlink("../../../..", os.path.join(ws, "up"))
elif word == "dotgit":
    write("notes.txt", "x\n")
    with open(os.path.join(ws, ".git")) as f:
        content = f.read()
    with open(os.path.join(ws, ".git"), "w") as f:
        f.write(content.rstrip("\n") + "\n")
        f.write("")
    os.utime(os.path.join(ws, ".git"), None)
elif word == "dotgit-other":
    write("notes.txt", "x\n")
    other = rest
    with open(os.path.join(ws, ".git"), "w") as f:
        f.write("gitdir: " + other + "/.git\n")
elif word == "nested-git":
    os.makedirs(os.path.join(ws, "sub", ".git"))
    with open(os.path.join(ws, "sub", ".git", "config"), "w") as f:
        f.write("[core]\n\tfsmonitor = /bin/false\n")
    write("notes.txt", "x\n")
elif word == "slow-write":
    # rest: "<marker> <flag>". While <flag> cannot be read (the first
    # attempt) it waits on a "sleep <marker>" child; then (the retry) it
    # writes at once.
    marker, _, flag = rest.partition(" ")
    try:
        open(flag).close()
    except OSError:
        subprocess.run(["sleep", marker], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    write("notes.txt", "slow\n")
    res["commit_subject"] = "feat: slow"
elif word == "new-ref":
    write("notes.txt", "x\n")
    git("update-ref", "refs/heads/sneaky", "HEAD")
elif word == "bad-subject":
    write("notes.txt", "x\n")
    res["commit_subject"] = "feat: one\nsecond line"
elif word == "report-unselected":
    write("notes.txt", "x\n")
    if "agent_report" not in caps:
        sys.exit(3)
    res["summary"] = " untrimmed "
    res["changes"] = ["x"]
else:
    frame({"version": "v1", "id": fid, "type": "failure", "category": "invalid_request"})
    finish()
frame(res)
finish()
