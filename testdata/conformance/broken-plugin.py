#!/usr/bin/env python3
"""A deliberately broken plugin for the conformance suite's own tests.

Usage: broken-plugin.py MODE PLUGIN [ARGS...]

It runs a conforming plugin as its child, passes stdin and stdout through,
and breaks exactly one protocol rule, named by MODE. The suite must fail the
scenarios that rule is about.
"""
import os
import signal
import subprocess
import sys
import threading
import time



def pump_stdin(mode, child):
    at_line_start = True
    pending = b""
    forwarded_execute = False
    try:
        while True:
            data = os.read(0, 65536)
            if not data:
                break
            if mode == "lenient-blank":
                out = bytearray()
                for b in data:
                    if b == 0x0A and at_line_start:
                        continue
                    out.append(b)
                    at_line_start = b == 0x0A
                data = bytes(out)
            if mode == "ignore-after-execute":
                # Forward through the end of the first execute line and
                # drop everything after it; pump_stdout ends the child's
                # input after its terminal frame, like a plugin that exits
                # without reading the rest of stdin.
                if forwarded_execute:
                    continue
                stop = False
                while data:
                    nl = data.find(b"\n")
                    part = data if nl < 0 else data[: nl + 1]
                    data = b"" if nl < 0 else data[nl + 1:]
                    child.stdin.write(part)
                    pending += part
                    if nl >= 0:
                        stop = b'"type":"execute"' in pending
                        pending = b""
                        if stop:
                            break
                child.stdin.flush()
                forwarded_execute = stop
                continue
            child.stdin.write(data)
            child.stdin.flush()
    except (OSError, ValueError):
        pass
    try:
        child.stdin.close()
    except OSError:
        pass


def other_id(line):
    at = line.find(b'"id":"')
    if at < 0:
        return line
    i = at + len('"id":"') + 31
    flipped = b"1" if line[i:i + 1] == b"0" else b"0"
    return line[:i] + flipped + line[i + 1:]


def session_id(line):
    at = line.find(b'"id":"') + len('"id":"')
    return line[at:at + 32]


def is_terminal(line):
    return b'"type":"result"' in line or b'"type":"failure"' in line


def progress(sid, seq, text=b"extra"):
    return (b'{"version":"v1","id":"' + sid + b'","type":"progress","sequence":' +
            str(seq).encode() + b',"stage":"working","text":"' + text + b'"}\n')


def pump_stdout(mode, child):
    out = sys.stdout.buffer
    wrote = False
    seq = 0
    for line in child.stdout:
        if b'"type":"progress"' in line:
            seq += 1
        if mode == "progress-flood" and is_terminal(line):
            for n in range(seq + 1, 131):
                out.write(progress(session_id(line), n))
        elif mode == "progress-long-text" and is_terminal(line):
            out.write(progress(session_id(line), seq + 1, b"x" * 1025))
        elif mode == "result-extra-field" and b'"type":"result"' in line:
            line = line.replace(b"}\n", b',"commit_subject":"feat: x"}\n')
        elif mode == "failure-on-valid" and b'"type":"result"' in line:
            line = (b'{"version":"v1","id":"' + session_id(line) +
                    b'","type":"failure","category":"execution_failed"}\n')
        elif mode == "select-unoffered" and b'"type":"initialized"' in line:
            line = line.replace(b'"]}', b'","agent_report"]}')
        if mode == "noncompact":
            line = line.replace(b'":', b'": ', 1)
        elif mode == "wrong-id":
            line = other_id(line)
        elif mode == "extra-progress" and is_terminal(line):
            out.write(b'{"version":"v1","id":"' + session_id(line) +
                      b'","type":"progress","sequence":1,"stage":"working","text":"extra"}\n')
        out.write(line)
        if mode == "trailing-frame" and is_terminal(line):
            out.write(line)
        out.flush()
        if mode == "ignore-after-execute" and is_terminal(line):
            try:
                child.stdin.close()
            except OSError:
                pass
        wrote = True
    return wrote


def main():
    mode, argv = sys.argv[1], sys.argv[2:]
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    threading.Thread(target=pump_stdin, args=(mode, child), daemon=True).start()
    wrote = pump_stdout(mode, child)
    code = child.wait()
    if mode == "exit-zero":
        code = 0
    elif mode == "slow-exit":
        time.sleep(1.0)
    elif mode == "stdout-on-bad-init" and code != 0 and not wrote:
        sys.stdout.buffer.write(b'{"version":"v1","id":"00000000000000000000000000000000",'
                                b'"type":"failure","category":"invalid_request"}\n')
        sys.stdout.buffer.flush()
    elif mode == "hang-on-invalid" and code != 0:
        time.sleep(600)
    elif mode == "crash-on-invalid" and code != 0:
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
