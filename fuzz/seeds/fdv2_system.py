#!/usr/bin/env python3
"""Hand-made seeds for the `fdv2_system` fuzz target.

Writes `fuzz/corpus/fdv2_system/seed-*`, each the bytes that `arbitrary` 1.x decodes to
one scenario: enum variants are a little-endian u32 scaled by the variant count, bools
and `Option`s one byte, collections a `1` byte before each element and a `0` after the
last. The layout mirrors the types in `fuzz_targets/fdv2_system.rs`: if those change,
regenerate (a stale seed still decodes, to some other scenario).

    python3 fuzz/seeds/fdv2_system.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(__file__), "..", "corpus", "fdv2_system")


def variant(i, n):
    return struct.pack("<I", -(-(i << 32) // n))  # ceil(i * 2^32 / n)


def u8(x):
    return bytes([x])


def u16(x):
    return struct.pack("<H", x)


def u32(x):
    return struct.pack("<I", x)


def b(x):
    return u8(1 if x else 0)


def opt(x, enc):
    return b"\0" if x is None else b"\1" + enc(x)


def vec(items, enc):
    return b"".join(b"\1" + enc(i) for i in items) + b"\0"


# Setup
PRESETS = ["Default", "Streaming", "Polling", "Daemon", "Custom"]


def spec(s):
    name, d = s
    return variant(["Streaming", "Polling", "Fdv1Polling"].index(name), 3) + opt(d, u8)


def setup(preset, custom=None, timing=None, poll_ms=None, manual_start=False):
    out = variant(PRESETS.index(preset), 5)
    if preset == "Custom":
        init, sync, fb = custom
        out += vec(init, spec) + vec(sync, spec) + opt(fb, spec)
    out += opt(timing, bytes) + opt(poll_ms, u16) + u8(7) + b(manual_start)
    return out


# Heads, events, bodies
STATUS = ["Ok", "NotModified", "BadRequest", "Unauthorized", "NotFound", "TooMany",
          "ServerError", "Unavailable", "Other"]


def head(status="Ok", wrong_type=False, fallback=False, env_id=True, etag=False,
         content_length=False):
    return (variant(STATUS.index(status), 9) + b(wrong_type) + b(fallback) + b(env_id)
            + b(etag) + b(content_length))


KINDS = ["Flag", "Segment", "Unknown"]
CODES = ["Full", "Changes", "None", "Bogus", "TwoPayloads", "Missing"]
NAMES = ["Intent", "Put", "Delete", "Transferred", "Goodbye", "Error"]
EVS = ["Intent", "Put", "Delete", "Transferred", "Goodbye", "Error", "Heartbeat",
       "Comment", "Unknown", "Malformed", "WrongShape", "Payload"]


def ev(e):
    name, *args = e
    out = variant(EVS.index(name), len(EVS))
    if name == "Intent":
        out += variant(CODES.index(args[0]), 6)
    elif name == "Put":
        kind, key, version, deleted, refs = args
        out += variant(KINDS.index(kind), 3) + u8(key) + u8(version) + b(deleted) + u8(refs)
    elif name == "Delete":
        kind, key, version = args
        out += variant(KINDS.index(kind), 3) + u8(key) + u8(version)
    elif name == "Transferred":
        out += opt(args[0], u8)
    elif name == "Heartbeat":
        out += b(args[0])
    elif name in ("Malformed", "WrongShape"):
        out += variant(NAMES.index(args[0]), 6)
    elif name == "Payload":
        full, puts, sel = args
        out += b(full) + u8(puts) + opt(sel, u8)
    return out


def pick(p):
    return variant(0, 2) if p is None else variant(1, 2) + u8(p)


END = ["Open", "Eof", "Reset"]


def stream(events, conn=None, hd=None, no_head=False, advance=0, split=0, end="Open"):
    return (variant(2, 4) + u16(advance) + pick(conn) + (hd or head()) + b(no_head)
            + vec(events, ev) + u8(split) + variant(END.index(end), 3))


def body_events(events):
    return variant(0, 3) + vec(events, ev)


def body_fdv1(flags, segments):
    item = lambda t: u8(t[0]) + u8(t[1]) + b(t[2])
    return variant(1, 3) + vec(flags, item) + vec(segments, item)


def poll(body, conn=None, hd=None, advance=0, split=0, end="Eof"):
    return (variant(3, 4) + u16(advance) + pick(conn) + (hd or head()) + body + u16(split)
            + variant(END.index(end), 3))


FIRE = variant(1, 4)
SCRIPT = ["Start", "Stop", "Connected", "Head", "FallbackHead", "Data", "Closed", "Timeout"]


def raw(name, advance=0, *args):
    out = variant(0, 4) + u32(advance) + variant(SCRIPT.index(name), 8)
    if name == "Closed":
        out += u8(args[0]) + b(args[1])
    return out


def fuzz_input(s, ops):
    return s + b"".join(b"\1" + o for o in ops)


FULL = ("Payload", True, 3, None)
CHANGES = ("Payload", False, 2, None)

SEEDS = {
    # The stream: a full payload, changes, a put then payload-transferred, goodbye.
    "stream-payloads": fuzz_input(setup("Streaming"), [
        stream([FULL, CHANGES, ("Intent", "Changes"), ("Put", "Flag", 1, 5, False, 3),
                ("Delete", "Segment", 1, 6), ("Transferred", None)], split=9),
        stream([("Heartbeat", True), ("Goodbye",)], no_head=True),
        FIRE,
        stream([("Intent", "None"), CHANGES]),
        raw("Stop", 10), FIRE,
    ]),
    # Errors mid-payload, an unknown kind, malformed data, then recovery.
    "stream-errors": fuzz_input(setup("Streaming", timing=bytes([20, 40, 60, 100])), [
        stream([("Intent", "Full"), ("Put", "Flag", 0, 1, False, 0), ("Error",),
                ("Put", "Unknown", 2, 2, False, 0), ("Transferred", None),
                ("Put", "Flag", 2, 3, False, 0), ("Malformed", "Put")]),
        FIRE, stream([FULL], end="Eof"), FIRE, FIRE,
        stream([("WrongShape", "Intent")]), FIRE, FIRE, FIRE,
    ]),
    # The default preset: the polling initializer, then the stream.
    "default-init-then-stream": fuzz_input(setup("Default"), [
        poll(body_events([FULL])),
        stream([CHANGES, ("Transferred", 0)]),
        FIRE, FIRE,
    ]),
    # Polling: a payload, 304, then the server directs FDv1 fallback.
    "polling-fallback": fuzz_input(setup("Polling", poll_ms=50), [
        poll(body_events([FULL]), hd=head(etag=True, content_length=True)),
        FIRE, poll(body_events([]), hd=head("NotModified")),
        FIRE, poll(body_events([CHANGES]), hd=head(fallback=True), split=30),
        FIRE, poll(body_fdv1([(0, 1, False), (1, 2, True)], [(2, 3, False)])),
        FIRE, raw("Stop"),
    ]),
    # The stream's head directs FDv1 fallback; the payload is applied first.
    "stream-directed-fallback": fuzz_input(setup("Streaming"), [
        stream([FULL], hd=head(fallback=True)),
        poll(body_fdv1([(3, 4, False)], [])),
        FIRE, poll(body_fdv1([], [(1, 1, False)]), hd=head("ServerError")),
    ]),
    # Custom lists with short timings: FDv1 initializer, stream, then polling.
    "custom-lists": fuzz_input(
        setup("Custom", custom=([("Fdv1Polling", None)],
                                [("Streaming", 5), ("Polling", 20)],
                                ("Fdv1Polling", 30)),
              timing=bytes([2, 4, 6, 20])), [
            poll(body_fdv1([(0, 1, False)], [])),
            stream([("Intent", "Full")]),
            FIRE, FIRE, FIRE,
            poll(body_events([FULL])),
            FIRE, FIRE, FIRE, FIRE, FIRE, FIRE,
            stream([FULL]), FIRE, FIRE,
        ]),
    # An unrecoverable status removes the only synchronizer: OFF.
    "unrecoverable": fuzz_input(setup("Custom", custom=([], [("Streaming", None)], None)), [
        stream([], hd=head("Unauthorized"), end="Eof"), FIRE,
    ]),
    # Daemon mode: nothing to run.
    "daemon": fuzz_input(setup("Daemon"), [FIRE, raw("Stop")]),
}

os.makedirs(OUT, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(OUT, f"seed-{name}"), "wb") as f:
        f.write(data)
print(f"wrote {len(SEEDS)} seeds to {os.path.normpath(OUT)}")
