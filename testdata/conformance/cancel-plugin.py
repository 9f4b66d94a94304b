#!/usr/bin/env python3
"""A plugin for the session-cancel scenario only, for the suite's tests.

Usage: cancel-plugin.py MODE

It negotiates text and cancel, reads the execute frame and then the cancel
frame, and answers failure{cancelled}: at once when MODE is "prompt", after
two seconds (far beyond the Worker's 250 ms cancel window) when MODE is
"slow". Then it reads stdin to its end and exits 0.
"""
import json
import os
import sys
import time


def frame(obj):
    os.write(1, json.dumps(obj, separators=(",", ":")).encode() + b"\n")


def main():
    mode = sys.argv[1]
    inp = sys.stdin.buffer
    init = json.loads(inp.readline())
    sid = init["id"]
    selected = [c for c in ("text", "cancel") if c in init["capabilities"]]
    frame({"version": "v1", "id": sid, "type": "initialized", "capabilities": selected})
    inp.readline()  # execute
    inp.readline()  # cancel
    if mode == "slow":
        time.sleep(2)
    frame({"version": "v1", "id": sid, "type": "failure", "category": "cancelled"})
    inp.read()
    os._exit(0)


main()
