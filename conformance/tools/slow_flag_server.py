#!/usr/bin/env python3
"""A flag server that sends a data set in writes of a chosen size, for memory tests.

Serves one data set file ({"flags":{...},"segments":{...}}, as gen_payload.py writes):

  GET /all          FDv1 stream: one `put` event, written WRITE bytes at a time
                    (TCP_NODELAY, so a 1-byte write is a 1-byte segment), then the
                    stream stays open and quiet
  GET /sdk/stream   FDv2 stream: server-intent, one put-object per item,
                    payload-transferred, written the same way
  GET /sdk/poll     FDv2 poll body with the same events, sent at once (no ETag: every
                    poll is a full 200)
  GET /sdk/latest-all  FDv1 poll body (the data set), sent at once

Usage:
  python3 conformance/tools/slow_flag_server.py --data medium.json --port 8041 --write 1
  /usr/bin/time -v target/release/flagsync snapshot --sdk-key K \
      --stream-uri http://127.0.0.1:8041 > /dev/null

Measuring aid only (issue 42, BENCHMARKS.md); not used by the tests.
"""

import argparse
import json
import socket
import threading
import time


def fdv2_events(data):
    """The FDv2 events of a full transfer of `data`, as (name, data-JSON) pairs."""
    yield "server-intent", json.dumps(
        {"payloads": [{"id": "p", "target": 1, "intentCode": "xfer-full", "reason": "payload-missing"}]}
    )
    for kind, plural in (("flag", "flags"), ("segment", "segments")):
        for key, item in data[plural].items():
            yield "put-object", json.dumps(
                {"version": 1, "kind": kind, "key": key, "object": item}, separators=(",", ":")
            )
    yield "payload-transferred", json.dumps({"state": "s1", "version": 1})


def build(path):
    with open(path, "rb") as f:
        raw = f.read()
    data = json.loads(raw)
    put = b'event: put\ndata: {"path":"/","data":' + raw.strip() + b"}\n\n"
    events = list(fdv2_events(data))
    stream = b"".join(f"event: {n}\ndata: {d}\n\n".encode() for n, d in events)
    poll = (
        '{"events":['
        + ",".join(f'{{"event":"{n}","data":{d}}}' for n, d in events)
        + "]}"
    ).encode()
    return {"/all": put, "/sdk/stream": stream, "/sdk/poll": poll, "/sdk/latest-all": raw}


def send_slowly(conn, body, write):
    view = memoryview(body)
    for i in range(0, len(view), write):
        conn.sendall(view[i : i + write])


def serve(conn, bodies, write):
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with conn:
        head = b""
        while b"\r\n\r\n" not in head:
            got = conn.recv(4096)
            if not got:
                return
            head += got
        path = head.split(b" ", 2)[1].decode().split("?", 1)[0]
        body = bodies.get(path)
        if body is None:
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        if path in ("/all", "/sdk/stream"):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
            start = time.monotonic()
            send_slowly(conn, body, write)
            print(f"{path}: {len(body)} bytes in {write}-byte writes, {time.monotonic() - start:.1f} s", flush=True)
            try:
                while conn.recv(4096):
                    pass
            except OSError:
                pass
        else:
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
            )
            conn.sendall(body)
            print(f"{path}: {len(body)} bytes", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="data set JSON file")
    p.add_argument("--port", type=int, default=8041)
    p.add_argument("--write", type=int, default=1, help="bytes per write on the streams")
    args = p.parse_args()
    bodies = build(args.data)
    srv = socket.create_server(("127.0.0.1", args.port))
    print(
        "ready: " + ", ".join(f"{k} {len(v)} bytes" for k, v in bodies.items()),
        flush=True,
    )
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, bodies, args.write), daemon=True).start()


if __name__ == "__main__":
    main()
