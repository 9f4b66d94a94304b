#!/usr/bin/env python3
"""A plugin that leaves a setsid descendant behind, for the suite's tests.

Usage: leftover-plugin.py MODE PIDFILE PLUGIN [ARGS...]

It starts `sleep 300` in a new session (setsid), appends that process's pid
to PIDFILE, then replaces itself with the conforming PLUGIN, which keeps the
same pid and so answers every scenario. MODE says what the descendant holds:
"detached" gives it the null device for stdin, stdout and stderr; "stdout"
lets it inherit the plugin's stdout and stderr, so stdout only ends when
the descendant is gone.
"""
import os
import subprocess
import sys


def main():
    mode, pidfile, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
    out = subprocess.DEVNULL if mode == "detached" else None
    child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL,
                             stdout=out, stderr=out, start_new_session=True)
    with open(pidfile, "a") as f:
        f.write("%d\n" % child.pid)
    os.execv(argv[0], argv)


main()
