#!/usr/bin/env python3
"""Agent Forge plugin protocol v1: a dependency-free example plugin.

It implements the ``text`` operation by upper-casing its input with
Python's ``str.upper``, and reads the Worker's frames as strictly as the Go
implementation does:

* a frame is one compact JSON object in UTF-8 plus a single LF, at most
  1,048,576 bytes before the LF; blank lines, CR, missing final LF,
  invalid UTF-8, insignificant whitespace, duplicate keys, unknown or
  missing fields, null, wrong JSON types (a bool or float is never an
  integer), NaN/Infinity and lone surrogate escapes are invalid;
* every frame carries exactly version "v1", the session id (32 lowercase
  hex digits, equal in every frame) and type, plus exactly its own fields;
* initialize.limits must equal the v1 limits exactly.

Exit status: 0 after a complete session (result or failure frame written
and stdin at EOF); 1 when the session broke (nothing more is written:
an invalid initialize leaves stdout empty, an invalid execute leaves only
the initialized frame); 2 for command-line misuse.
"""

import json
import os
import re
import sys

VERSION = "v1"
FRAME_BYTES = 1048576
TEXT_BYTES = 65536
LIMITS = {
    "frame_bytes": 1048576,
    "progress_frames": 128,
    "text_bytes": 65536,
    "progress_text_bytes": 1024,
    "commit_subject_bytes": 256,
}
CAPABILITIES = ("text", "workspace_edit", "progress", "cancel", "commit_subject", "agent_report")
OPERATIONS = ("text", "workspace_edit")
SUPPORTED = ("text",)
ID_PATTERN = re.compile(r"[0-9a-f]{32}")


class Invalid(Exception):
    """A protocol violation. Its message is a fixed text, never frame content."""


def read_frame(stream):
    """Read one LF-terminated line; return its bytes, or None at clean EOF."""
    line = stream.readline(FRAME_BYTES + 1)
    if line == b"":
        return None
    if not line.endswith(b"\n"):
        if len(line) > FRAME_BYTES:
            raise Invalid("frame exceeds the frame size limit")
        raise Invalid("final frame lacks its LF")
    line = line[:-1]
    if not line:
        raise Invalid("blank line")
    if b"\r" in line:
        raise Invalid("carriage return in frame")
    return line


def reject_duplicates(pairs):
    obj = {}
    for key, value in pairs:
        if key in obj:
            raise Invalid("duplicate key")
        obj[key] = value
    return obj


def reject_constant(_name):
    raise Invalid("NaN and Infinity are not JSON")


def check_strings(value):
    """Reject lone surrogates anywhere (keys and values)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise Invalid("lone surrogate escape") from None
    elif isinstance(value, list):
        for item in value:
            check_strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_strings(key)
            check_strings(item)


def check_compact(text):
    """Reject whitespace outside strings (the text is valid JSON)."""
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in " \t\n\r":
            raise Invalid("frame is not compact JSON")


def decode(line):
    try:
        text = line.decode("utf-8", errors="strict")
    except UnicodeDecodeError:
        raise Invalid("frame is not valid UTF-8") from None
    try:
        obj = json.loads(text, object_pairs_hook=reject_duplicates, parse_constant=reject_constant)
    except Invalid:
        raise
    except (ValueError, RecursionError):
        raise Invalid("malformed JSON") from None
    if not isinstance(obj, dict):
        raise Invalid("frame is not a JSON object")
    check_compact(text)
    check_strings(obj)
    return obj


def is_int(value):
    return type(value) is int  # bool is a subclass of int and is rejected


def check_header(frame, want_type, session_id, fields):
    if set(frame) != {"version", "id", "type"} | set(fields):
        raise Invalid("frame has missing or foreign fields")
    if frame["version"] != VERSION:
        raise Invalid("unsupported version")
    ident = frame["id"]
    if not isinstance(ident, str) or not ID_PATTERN.fullmatch(ident):
        raise Invalid("id is not 32 lowercase hex digits")
    if session_id is not None and ident != session_id:
        raise Invalid("id does not match the session")
    if frame["type"] != want_type:
        raise Invalid("unexpected frame type")


def check_initialize(frame):
    check_header(frame, "initialize", None, ("capabilities", "limits"))
    offer = frame["capabilities"]
    if not isinstance(offer, list) or not offer:
        raise Invalid("capability offer is empty or not a list")
    for cap in offer:
        if not isinstance(cap, str) or cap not in CAPABILITIES:
            raise Invalid("unknown capability in offer")
    if len(set(offer)) != len(offer):
        raise Invalid("duplicate capability in offer")
    if not any(cap in OPERATIONS for cap in offer):
        raise Invalid("capability offer names no operation")
    limits = frame["limits"]
    if not isinstance(limits, dict) or set(limits) != set(LIMITS):
        raise Invalid("limits have missing or foreign fields")
    for key, want in LIMITS.items():
        if not is_int(limits[key]) or limits[key] != want:
            raise Invalid("limits differ from the v1 limits")
    return frame["id"], offer


def check_execute(frame, session_id, selection):
    if frame.get("type") != "execute":
        raise Invalid("expected execute")
    operation = frame.get("operation")
    if operation not in selection or operation not in OPERATIONS:
        raise Invalid("operation was not negotiated")
    # Only text can have been selected by this plugin.
    check_header(frame, "execute", session_id, ("operation", "input"))
    text = frame["input"]
    if not isinstance(text, str) or len(text.encode("utf-8")) > TEXT_BYTES:
        raise Invalid("input is not a string of at most 65536 bytes")
    return text


def encode(frame):
    return (json.dumps(frame, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def write(stream, frame):
    stream.write(encode(frame))
    stream.flush()


def session(stdin, stdout):
    line = read_frame(stdin)
    if line is None:
        raise Invalid("stdin ended before initialize")
    session_id, offer = check_initialize(decode(line))
    selection = [cap for cap in CAPABILITIES if cap in offer and cap in SUPPORTED]
    if not any(cap in OPERATIONS for cap in selection):
        raise Invalid("the offer names no operation this plugin supports")
    header = {"version": VERSION, "id": session_id}
    write(stdout, dict(header, type="initialized", capabilities=selection))

    line = read_frame(stdin)
    if line is None:
        raise Invalid("stdin ended before execute")
    text = check_execute(decode(line), session_id, selection)

    output = text.upper()
    if len(output.encode("utf-8")) > TEXT_BYTES:
        write(stdout, dict(header, type="failure", category="execution_failed"))
    else:
        write(stdout, dict(header, type="result", output=output))

    # The Worker closes stdin after the terminal frame; anything else is a
    # protocol violation.
    if stdin.read(1) != b"":
        raise Invalid("input after the terminal frame")


def main(argv):
    if len(argv) > 1:
        sys.stderr.write("usage: forge-plugin-v1.py\n")
        return 2
    try:
        session(sys.stdin.buffer, sys.stdout.buffer)
    except Invalid as err:
        sys.stderr.write("forge-plugin-v1.py: error: plugin protocol: %s\n" % err)
        return 1
    except OSError:
        sys.stderr.write("forge-plugin-v1.py: error: I/O failure\n")
        return 1
    return 0


def exit_now(status):
    """Exit at once, skipping the interpreter's teardown.

    The Worker allows 250 ms after closing stdin for stdout EOF and exit.
    Python's own teardown has no such bound: on a busy machine (load 20 on
    two cores) it alone often took longer. The frames are already flushed,
    so nothing is lost.
    """
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    os._exit(status)


if __name__ == "__main__":
    exit_now(main(sys.argv))
