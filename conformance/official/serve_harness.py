"""What the official-SDK tests share: `flagsync serve` on a free port with a data file
and an events log, atomic edits of the data file, flagsync's own evaluation
(`flagsync eval`), and the check of the events an SDK posted.
"""

import json
import os
import re
import subprocess
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SDK_KEY = "sdk-flagsync-official-test"
# The events every SDK must post: the diagnostic-init event (POST /diagnostic), and
# index, feature, summary, custom and identify events (POST /bulk).
EVENT_KINDS = ("diagnostic-init", "index", "feature", "summary", "custom", "identify")


class Failure(Exception):
    """A check failed; the message says which and why."""


def write_json(path, value):
    """Write `value` to `path` atomically (serve never reads half a file)."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f)
    os.replace(tmp, path)


class Serve:
    """`flagsync serve` on a free port, with a data file and an events log in `tmp`."""

    def __init__(self, flagsync, tmp, data, relay=False):
        """With `relay`, SDKs talk to a second process, `flagsync serve --upstream`
        (relay mode), in front of this one: `url` is the relay's, and the events it
        forwards land in this one's events log."""
        self.data = os.path.join(tmp, "flags.json")
        self.events = os.path.join(tmp, "events.jsonl")
        write_json(self.data, data)
        self.log_path = os.path.join(tmp, "serve.log")
        self.log = open(self.log_path, "w+", encoding="utf-8")
        self.procs = []
        self.url = self._start(
            [flagsync, "serve", "--data", self.data, "--port", "0", "--sdk-key", SDK_KEY,
             "--events", self.events],
            r"serving on (http://127\.0\.0\.1:\d+)",
        )
        self.upstream_url = self.url
        if relay:
            self.url = self._start(
                [flagsync, "serve", "--upstream", self.upstream_url, "--sdk-key", SDK_KEY,
                 "--upstream-events", self.upstream_url, "--port", "0"],
                r"relaying on (http://127\.0\.0\.1:\d+)",
            )

    def _start(self, argv, pattern):
        """Start `argv`; the URL it prints (the first group of `pattern`)."""
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.procs.append(proc)
        deadline = time.monotonic() + 10
        lines = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(pattern, line)
            if m:
                # Keep reading its output so that it never blocks on a full pipe.
                threading.Thread(target=proc.stdout.read, daemon=True).start()
                return m.group(1)
        self.stop()
        raise Failure(f"{' '.join(argv[:2])} did not print its URL:\n" + "".join(lines) + self.stderr())

    def stderr(self):
        self.log.flush()
        with open(self.log_path, encoding="utf-8") as f:
            return f.read()

    def event_lines(self):
        """The events received so far, as `serve --events` wrote them."""
        try:
            with open(self.events, encoding="utf-8") as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def stop(self):
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.log.close()


def flagsync_eval(flagsync, data_path, context):
    """flagsync's own evaluation of every flag in `data_path` for `context`:
    {key: value}."""
    r = subprocess.run(
        [flagsync, "eval", "--data", data_path, "--context", json.dumps(context)],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise Failure(f"flagsync eval failed: {r.stderr.strip()}")
    return {k: v["value"] for k, v in json.loads(r.stdout).items()}


def check_events(serve, user_agent, wait=5.0):
    """Wait (at most `wait` s) until serve has received every kind in EVENT_KINDS, then
    check the SDK's headers on each: `user_agent` (a prefix) everywhere, and on /bulk
    payloads `X-LaunchDarkly-Event-Schema: 4` and a payload id. Returns the counts of
    each kind received."""
    deadline = time.monotonic() + wait
    while True:
        lines = serve.event_lines()
        kinds = {}
        for line in lines:
            kind = line["event"].get("kind")
            kinds[kind] = kinds.get(kind, 0) + 1
        missing = [k for k in EVENT_KINDS if k not in kinds]
        if not missing:
            break
        if time.monotonic() >= deadline:
            raise Failure(
                f"serve received no {', '.join(missing)} event within {wait} s "
                f"(received: {kinds or 'nothing'})"
            )
        time.sleep(0.05)
    for line in lines:
        kind = line["event"].get("kind")
        what = f"{line['endpoint']} {kind} event"
        ua = line.get("userAgent") or ""
        if not ua.startswith(user_agent):
            raise Failure(f"{what} came with User-Agent {ua!r}, not {user_agent}…")
        diagnostic = kind in ("diagnostic-init", "diagnostic")
        if diagnostic != (line["endpoint"] == "/diagnostic"):
            raise Failure(f"{what}: diagnostic events go to /diagnostic, the others to /bulk")
        if diagnostic:
            continue
        if line.get("schema") != "4":
            raise Failure(f"{what} came with X-LaunchDarkly-Event-Schema {line.get('schema')!r}, not '4'")
        if not line.get("payloadId"):
            raise Failure(f"{what} came without X-LaunchDarkly-Payload-ID")
    return kinds


def describe_kinds(kinds):
    return ", ".join(f"{kinds[k]} {k}" for k in EVENT_KINDS)
