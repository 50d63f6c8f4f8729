#!/usr/bin/env python3
"""A service in a long outage: `503` with an empty body to every request, counted.

Every request is answered at once (`Connection: close`) and logged on stdout with its
time since the server started and its path, then the counts per path are printed when
the server stops (after --duration seconds, or Ctrl-C).

Usage (issue 42, BENCHMARKS.md "FDv2 retries under an outage"):
  python3 conformance/tools/outage_server.py --port 8043 --duration 62 &
  FLAGSYNC_SDK_KEY=x target/debug/flagsync watch --fdv2 streaming \
      --stream-uri http://127.0.0.1:8043 --duration 60

Measuring aid only; not used by the tests.
"""

import argparse
import collections
import http.server
import threading
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8043)
    ap.add_argument("--duration", type=float, default=None, help="stop after SECS")
    args = ap.parse_args()
    start = time.monotonic()
    counts = collections.Counter()
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            path = self.path.split("?", 1)[0]
            with lock:
                counts[path] += 1
                print(f"{time.monotonic() - start:7.2f} s  {path}", flush=True)
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

        do_POST = do_GET
        do_REPORT = do_GET

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    if args.duration is not None:
        threading.Timer(args.duration, server.shutdown).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    total = sum(counts.values())
    print(f"requests: {total} " + " ".join(f"{p}={n}" for p, n in sorted(counts.items())))


if __name__ == "__main__":
    main()
