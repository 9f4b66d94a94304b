# Samples /proc for scripts/secrets-e2e.sh: every few milliseconds, until
# the file STOP exists, it reads /proc/<pid>/cmdline and environ of each
# root pid and of every descendant, and records which secret values
# (the JSON object {"NAME": "value"...} in the file SECRETS) each holds
# where. Usage:
#   python3 procsample.py STOP OUT SECRETS CHECK_MARK ROOT_NAME=PID...
# OUT gets one JSON object: {"samples": N, "procs": [{"pid", "root",
# "argv0", "cmd", "in_cmdline": [...], "in_environ": [...],
# "check": bool, "is_root": bool}...]}; is_root also marks a child seen
# between fork and exec (it still shows its parent's memory: cmdline and
# environ). where check marks a process whose own cmdline or an
# ancestor's names the marker CHECK_MARK (a scoped check and its children).
import json, os, sys, time

stop, out = sys.argv[1], sys.argv[2]
secrets = {n: v.encode() for n, v in json.load(open(sys.argv[3])).items()}
mark = sys.argv[4].encode()
roots = dict(a.split("=", 1) for a in sys.argv[5:])
roots = {int(v): k for k, v in roots.items()}


def ppid_map():
    m = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d, "rb") as f:
                s = f.read()
            m[int(d)] = int(s[s.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return m


def read(pid, what):
    try:
        with open("/proc/%d/%s" % (pid, what), "rb") as f:
            return f.read()
    except OSError:
        return None


seen = {}
root_cmd = {}
samples = 0
while not os.path.exists(stop):
    pm = ppid_map()
    kids = {}
    for p, pp in pm.items():
        kids.setdefault(pp, []).append(p)
    todo = [(r, name, False) for r, name in roots.items() if r in pm]
    while todo:
        pid, root, in_check = todo.pop()
        cmd, env = read(pid, "cmdline"), read(pid, "environ")
        if cmd is None or env is None:
            continue
        if pid in roots:
            root_cmd[root] = cmd
        check = in_check or (bool(mark) and mark in cmd)
        key = (pid, cmd)
        rec = seen.setdefault(key, {"pid": pid, "root": root, "argv0": os.path.basename(cmd.split(b"\0")[0]).decode(errors="replace"),
                                    "cmd": cmd.replace(b"\0", b" ")[:120].decode(errors="replace"), "in_cmdline": [], "in_environ": [], "check": check,
                                    "is_root": pid in roots or cmd == root_cmd.get(root)})
        for n, v in secrets.items():
            if v in cmd and n not in rec["in_cmdline"]:
                rec["in_cmdline"].append(n)
            if v in env and n not in rec["in_environ"]:
                rec["in_environ"].append(n)
        for k in kids.get(pid, []):
            todo.append((k, root, check))
    samples += 1
    time.sleep(0.005)
with open(out, "w") as f:
    json.dump({"samples": samples, "procs": list(seen.values())}, f)
