#!/usr/bin/env python3
# A plugin-protocol v1 text plugin for e2e scripts (chaos, restart): the input
# "<seconds> <text>" is answered, after sleeping that long (so that kills
# land mid-run), with <text> upper-cased.
import json, sys, time

def line(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()

init = json.loads(sys.stdin.readline())
fid = init["id"]
line({"version": "v1", "id": fid, "type": "initialized", "capabilities": ["text"]})
ex = json.loads(sys.stdin.readline())
secs, _, text = ex["input"].partition(" ")
time.sleep(float(secs))
line({"version": "v1", "id": fid, "type": "result", "output": text.upper()})
sys.stdin.read()
