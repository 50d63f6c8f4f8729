#!/usr/bin/env python3
"""A soak run: `flagsync serve` with its data file edited every 2 s, and N clients for D
minutes; every process's RSS sampled; at the end every client's view equals the served
data. Not part of CI (it takes D minutes); its result is recorded in
conformance/README.md with the date and the commit.

Clients, in turn until there are N of them:
  flagsync watch (FDv1 streaming), flagsync watch --fdv2 default, flagsync watch
  --polling, and LaunchDarkly's official Python SDK (FDv1 streaming, and the FDv2
  default data system), each a process of its own.

Each edit changes every flag of the data file (its fallthrough variation), so serve
raises every flag's version and every client must see every flag change. At the end
the edits stop, the clients get the last poll interval to catch up, and each one's
view (flag key -> version) is compared with serve's own (`GET /sdk/latest-all`).

Targets (issue 33): no client's RSS grows by more than 2 MB after its first minute; no
client misses the final state; nothing is logged at warn or error but what a test
like this expects (none).

    python3 conformance/soak/soak.py [--clients 20] [--minutes 30] \
        [--flagsync target/release/flagsync] [--venv target/official-python-venv]

Exit status 0 when every target is met. Needs the official Python SDK in a virtualenv:
`conformance/official/python_sdk_test.py` makes one (pass the same --venv).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

SDK_KEY = "sdk-flagsync-soak"
FLAGS = 20
EDIT_EVERY = 2.0
SAMPLE_EVERY = 5.0
# FDv1 polling clients poll every 30 s at the least.
CATCH_UP = 40.0
RSS_GROWTH_LIMIT_KB = 2048
KINDS = ("fdv1", "fdv2", "polling", "python-fdv1", "python-fdv2")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The official SDK client, run inside the virtualenv: it prints `ready`, then on each
# `dump` line from stdin the versions of every flag it holds, as one JSON line.
PYTHON_CLIENT = r"""
import json, sys, logging
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
import ldclient
from ldclient.config import Config
from ldclient import Context
url, key, fdv2 = sys.argv[1], sys.argv[2], sys.argv[3] == "fdv2"
kw = dict(sdk_key=key, base_uri=url, stream_uri=url, events_uri=url, send_events=False)
if fdv2:
    import ldclient.datasystem as ds
    kw["datasystem_config"] = ds.default().build()
client = ldclient.LDClient(config=Config(**kw), start_wait=10)
print("ready" if client.is_initialized() else "not-ready", flush=True)
ctx = Context.builder("soak").build()
for line in sys.stdin:
    state = client.all_flags_state(ctx).to_json_dict()
    meta = state.get("$flagsState", {})
    print(json.dumps({k: v.get("version") for k, v in meta.items()}), flush=True)
"""


def data(edit):
    """The data file of edit number `edit`: every flag's fallthrough moves each time."""
    flags = {}
    for i in range(FLAGS):
        flags[f"flag-{i}"] = {
            "key": f"flag-{i}",
            "on": True,
            "variations": ["a", "b", "c"],
            "fallthrough": {"variation": (edit + i) % 3},
            "offVariation": 0,
        }
    return {"flags": flags, "segments": {}}


def write(path, edit):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data(edit), f)
    os.replace(tmp, path)


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Client:
    """One client process; a thread reads its stdout and keeps its view."""

    def __init__(self, kind, index, url, args, tmp):
        self.kind, self.name = kind, f"{kind}-{index}"
        self.view, self.samples, self.dumps = {}, [], []
        self.stderr_path = os.path.join(tmp, f"{self.name}.stderr")
        stderr = open(self.stderr_path, "w", encoding="utf-8")
        if kind.startswith("python"):
            python = os.path.join(args.venv, "bin", "python")
            cmd = [python, "-c", PYTHON_CLIENT, url, SDK_KEY, kind.split("-")[1]]
        else:
            cmd = [args.flagsync, "watch", "--json", "--sdk-key", SDK_KEY,
                   "--stream-uri", url, "--polling-uri", url]
            cmd += {"fdv1": [], "fdv2": ["--fdv2", "default"], "polling": ["--polling"]}[kind]
        env = dict(os.environ, RUST_LOG="warn")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr, text=True, env=env)
        self.lock = threading.Lock()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            msg = json.loads(line)
            with self.lock:
                if msg.get("type") == "flag":
                    if msg.get("deleted"):
                        self.view.pop(msg["key"], None)
                    else:
                        self.view[msg["key"]] = msg.get("version")
                elif "type" not in msg:
                    self.dumps.append(msg)

    def final_view(self):
        if not self.kind.startswith("python"):
            with self.lock:
                return dict(self.view)
        self.proc.stdin.write("dump\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with self.lock:
                if self.dumps:
                    return self.dumps[-1]
            time.sleep(0.05)
        return None

    def sample(self, t):
        kb = rss_kb(self.proc.pid)
        if kb is not None:
            self.samples.append((t, kb))

    def warnings(self):
        with open(self.stderr_path, encoding="utf-8") as f:
            return [l for l in f if re.search(r"\b(WARN|ERROR|warn|error)\b", l)]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def served(url):
    req = urllib.request.Request(url + "/sdk/latest-all", headers={"Authorization": SDK_KEY})
    with urllib.request.urlopen(req, timeout=10) as r:
        body = json.load(r)
    return {k: v["version"] for k, v in body["flags"].items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--flagsync", default=os.path.join(ROOT, "target/release/flagsync"))
    p.add_argument("--venv", default=os.path.join(ROOT, "target/official-python-venv"))
    args = p.parse_args()
    args.flagsync, args.venv = os.path.abspath(args.flagsync), os.path.abspath(args.venv)
    tmp = tempfile.mkdtemp(prefix="flagsync-soak-")
    path = os.path.join(tmp, "flags.json")
    write(path, 0)
    serve = subprocess.Popen([args.flagsync, "serve", "--data", path, "--port", "0",
                              "--sdk-key", SDK_KEY], stdout=subprocess.PIPE,
                             stderr=open(os.path.join(tmp, "serve.stderr"), "w"), text=True)
    url = None
    for line in serve.stdout:
        m = re.search(r"serving on (http://127\.0\.0\.1:\d+)", line)
        if m:
            url = m.group(1)
            break
    if url is None:
        sys.exit("flagsync serve did not start")
    threading.Thread(target=serve.stdout.read, daemon=True).start()
    clients = [Client(KINDS[i % len(KINDS)], i, url, args, tmp) for i in range(args.clients)]
    start = time.monotonic()
    end = start + args.minutes * 60
    edit, next_edit, next_sample = 0, start + EDIT_EVERY, start
    while time.monotonic() < end:
        now = time.monotonic()
        if now >= next_edit:
            edit += 1
            write(path, edit)
            next_edit += EDIT_EVERY
        if now >= next_sample:
            for c in clients:
                c.sample(now - start)
            next_sample += SAMPLE_EVERY
        time.sleep(0.1)
    time.sleep(CATCH_UP)
    truth = served(url)
    failures, rows = [], []
    for c in clients:
        view = c.final_view()
        after = [kb for t, kb in c.samples if t >= 60]
        base = after[0] if after else None
        growth = (max(after) - base) if after else None
        warn = c.warnings()
        ok_view = view == truth
        rows.append((c.name, base, max(after) if after else None, growth, ok_view, len(warn)))
        if not ok_view:
            failures.append(f"{c.name}: final view differs from serve's")
        if growth is None or growth > RSS_GROWTH_LIMIT_KB:
            failures.append(f"{c.name}: RSS grew by {growth} kB after its first minute")
        if warn:
            failures.append(f"{c.name}: {len(warn)} warning/error lines, e.g. {warn[0].strip()}")
        c.stop()
    serve_rss = rss_kb(serve.pid)
    serve.terminate()
    print(f"{args.clients} clients, {args.minutes} min, {edit} edits of {FLAGS} flags; "
          f"serve RSS at the end {serve_rss} kB")
    print("client | RSS at 1 min (kB) | max after (kB) | growth (kB) | final view ok | warn lines")
    for r in rows:
        print(" | ".join(str(x) for x in r))
    for f in failures:
        print("FAIL:", f)
    print("soak:", "passed" if not failures else "failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
