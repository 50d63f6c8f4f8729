"""What the official-SDK tests share: `flagsync serve` on a free port with a data file
and an events log, optionally behind a relay (`serve --upstream`, over plaintext or,
configured by environment variables only, over TLS with a test CA), atomic edits of the
data file, flagsync's own evaluation (`flagsync eval`), and the check of the events an
SDK posted.
"""

import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SDK_KEY = "sdk-flagsync-official-test"
# The events every SDK must post: the diagnostic-init event (POST /diagnostic), and
# index, feature, summary, custom and identify events (POST /bulk).
EVENT_KINDS = ("diagnostic-init", "index", "feature", "summary", "custom", "identify")


# Where a TLS relay listens (each on a free port): a loopback address other than the
# default one, and IPv6 loopback. The SDKs' checks run once against each.
TLS_HOSTS = ("127.0.0.2", "::1")
# How long a request to the relay may take before it counts as a hang, in seconds.
REQUEST_TIMEOUT = 5
# The relay modes (the options that select them): None is serve alone.
RELAY_OPTIONS = {"http": "--relay", "tls": "--relay-tls", "filter": "--relay-filter"}
# With --relay-filter: the payload filter the SDK is configured with, and a flag the
# unfiltered environment holds beside the test's data, which the SDK must never see.
PAYLOAD_FILTER = "mobile"
UNFILTERED_FLAG = "unfiltered-only"


class Failure(Exception):
    """A check failed; the message says which and why."""


def as_root(cmd):
    """Run `cmd` as root (through sudo when not root), non-interactively; Failure if
    it fails."""
    if os.geteuid() != 0:
        if not shutil.which("sudo"):
            raise Failure(f"`{' '.join(cmd)}` needs root, and there is no sudo")
        cmd = ["sudo", *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    if r.returncode != 0:
        raise Failure(f"`{' '.join(cmd)}` failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")


def add_relay_options(parser):
    """--relay and --relay-tls; `args.relay` is then None, "http" or "tls"."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--relay", action="store_const", const="http", dest="relay",
        help="connect the SDK to a relay (`flagsync serve --upstream`) in front of serve",
    )
    group.add_argument(
        "--relay-tls", action="store_const", const="tls", dest="relay",
        help="the same with the relay configured by FLAGSYNC_ variables only, serving "
        f"HTTPS (a test CA's certificate) on {' and '.join(TLS_HOSTS)}; the SDK is "
        "checked against each address",
    )
    group.add_argument(
        "--relay-filter", action="store_const", const="filter", dest="relay",
        help=f"the SDK configured with payload filter {PAYLOAD_FILTER!r}, through a relay "
        "serving that filter (serve --upstream --payload-filters) in front of serve, whose "
        f"filtered data (--filter-data) lacks the flag {UNFILTERED_FLAG!r} of its whole data",
    )


def describe_relay(relay):
    """What the SDK talks to, after "against flagsync serve"."""
    if relay == "tls":
        return " through `serve` configured by FLAGSYNC_ variables (relay mode, TLS)"
    if relay == "filter":
        return (f" through `serve --upstream --payload-filters {PAYLOAD_FILTER}` (relay mode), "
                f"the SDK configured with payload filter {PAYLOAD_FILTER!r}")
    return " through `serve --upstream` (relay mode)" if relay else ""


def runs(modes, relay):
    """(name, mode, host) of each run of the checks: each mode, and with a TLS relay,
    each of its addresses (TLS_HOSTS) in turn."""
    for mode in modes:
        if relay != "tls":
            yield mode, mode, None
            continue
        for host in TLS_HOSTS:
            yield f"{mode} via {url_host(host)}", mode, host


def url_host(host):
    """`host` as a URL writes it: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def free_port(host):
    """A port free on `host` now (bound to port 0, then released)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class TestCA:
    """A certificate authority made with openssl in `folder`, and a server certificate
    it signed for the IP addresses TLS_HOSTS. `ca`: the CA's certificate (what clients
    trust); `cert`, `key`: the server's certificate and private key (PEM files)."""

    def __init__(self, folder):
        os.makedirs(folder)
        path = lambda name: os.path.join(folder, name)  # noqa: E731
        self.ca, self.cert, self.key = path("ca.pem"), path("server.pem"), path("server.key")
        ca_key, csr, ext = path("ca.key"), path("server.csr"), path("server.ext")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        self._openssl("req", "-x509", *ec, "-keyout", ca_key, "-out", self.ca, "-days", "2",
                      "-subj", "/CN=flagsync test CA",
                      "-addext", "basicConstraints=critical,CA:TRUE",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        self._openssl("req", *ec, "-keyout", self.key, "-out", csr, "-subj", "/CN=flagsync relay")
        with open(ext, "w", encoding="utf-8") as f:
            f.write(
                f"subjectAltName = {', '.join(f'IP:{h}' for h in TLS_HOSTS)}\n"
                "basicConstraints = critical, CA:FALSE\n"
                "keyUsage = critical, digitalSignature\n"
                "extendedKeyUsage = serverAuth\n"
                "subjectKeyIdentifier = hash\n"
                "authorityKeyIdentifier = keyid, issuer\n"
            )
        self._openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", ca_key,
                      "-CAcreateserial", "-out", self.cert, "-days", "2", "-sha256",
                      "-extfile", ext)

    @staticmethod
    def _openssl(*args):
        try:
            r = subprocess.run(["openssl", *args], capture_output=True, text=True)
        except FileNotFoundError:
            raise Failure("--relay-tls makes its certificates with openssl, which is missing") from None
        if r.returncode != 0:
            raise Failure(f"`openssl {' '.join(args)}` failed:\n{r.stderr}")


def write_json(path, value):
    """Write `value` to `path` atomically (serve never reads half a file)."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f)
    os.replace(tmp, path)


class Serve:
    """`flagsync serve` on a free port, with a data file and an events log in `tmp`."""

    def __init__(self, flagsync, tmp, data, relay=None, host=None, extra=()):
        """With `relay` ("http" or "tls"), SDKs talk to a second process, `flagsync
        serve --upstream` (relay mode), in front of this one: `url` is the relay's, and
        the events it forwards land in this one's events log. With "tls", the relay
        gets every setting from FLAGSYNC_ variables and serves HTTPS on each of
        TLS_HOSTS (`urls`); `url` is the one on `host`, and `ca` the CA file that
        SDKs must trust (None without TLS). `extra`: more arguments for serve (and for
        a plaintext relay)."""
        self.data = os.path.join(tmp, "flags.json")
        self.events = os.path.join(tmp, "events.jsonl")
        write_json(self.data, data)
        self.log_path = os.path.join(tmp, "serve.log")
        self.log = open(self.log_path, "w+", encoding="utf-8")
        self.procs = []
        self.ca = None
        # With a payload filter, `data` is the filtered data (the file edits go to) and
        # the whole environment has one flag more.
        self.payload_filter = PAYLOAD_FILTER if relay == "filter" else None
        argv = [flagsync, "serve", "--data", self.data, "--port", "0", "--sdk-key", SDK_KEY,
                "--events", self.events, *extra]
        if self.payload_filter:
            whole = os.path.join(tmp, "whole.json")
            everything = json.loads(json.dumps(data))
            everything.setdefault("flags", {})[UNFILTERED_FLAG] = {
                "on": True, "variations": ["unfiltered"], "offVariation": 0,
                "fallthrough": {"variation": 0}}
            write_json(whole, everything)
            argv[3] = whole
            argv += ["--filter-data", f"{self.payload_filter}={self.data}"]
        self.url = self._start(argv, r"serving on (http://127\.0\.0\.1:\d+)")
        self.upstream_url = self.url
        if relay == "tls":
            self._start_tls_relay(flagsync, os.path.join(tmp, "tls"), host)
        elif relay:
            argv = [flagsync, "serve", "--upstream", self.upstream_url, "--sdk-key", SDK_KEY,
                    "--upstream-events", self.upstream_url, "--port", "0"]
            if self.payload_filter:
                argv += ["--payload-filters", self.payload_filter]
            argv += extra
            self.url = self._start(argv, r"relaying on (http://127\.0\.0\.1:\d+)")
        if relay:
            self._wait_for_the_relay()

    def _wait_for_the_relay(self):
        """Wait until every environment of the relay holds its upstream's data (its
        `/status` says VALID): until then it answers SDKs `503` with `Retry-After: 1`,
        as LaunchDarkly's Relay Proxy does, and an SDK that comes first initializes a
        second later. The SDK checks time the SDK, not the relay's own start."""
        handlers = [urllib.request.ProxyHandler({})]
        if self.ca is not None:
            handlers.append(urllib.request.HTTPSHandler(
                context=ssl.create_default_context(cafile=self.ca)))
        opener = urllib.request.build_opener(*handlers)
        deadline = time.monotonic() + 30
        said = None
        while time.monotonic() < deadline:
            try:
                with opener.open(self.url + "/status", timeout=REQUEST_TIMEOUT) as r:
                    said = r.read().decode()
                envs = json.loads(said)["environments"]
                if envs and all(e["connectionStatus"]["state"] == "VALID"
                                for e in envs.values()):
                    return
            except urllib.error.HTTPError as e:
                said = f"{e.code}: {e.read().decode(errors='replace')}"
            except (OSError, ValueError, KeyError, TypeError) as e:
                said = repr(e)
            time.sleep(0.05)
        self.stop()
        raise Failure(f"the relay's environments were not all VALID within 30 s: {said}\n"
                      + self.stderr())

    def _start_tls_relay(self, flagsync, folder, host):
        """The relay as `flagsync serve` with no argument: upstream, SDK key, events,
        addresses and certificate from the environment."""
        try:
            tls = TestCA(folder)
            self.ports = {h: free_port(h) for h in TLS_HOSTS}
        except (Failure, OSError) as e:
            self.stop()
            raise Failure(f"cannot set up the TLS relay: {e}") from None
        self.ca = tls.ca
        self.urls = [f"https://{url_host(h)}:{p}" for h, p in self.ports.items()]
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLAGSYNC_")}
        env.update(
            FLAGSYNC_UPSTREAM=self.upstream_url,
            FLAGSYNC_SDK_KEY=SDK_KEY,
            FLAGSYNC_UPSTREAM_EVENTS=self.upstream_url,
            FLAGSYNC_LISTEN=",".join(f"{url_host(h)}:{p}" for h, p in self.ports.items()),
            FLAGSYNC_TLS_CERT=tls.cert,
            FLAGSYNC_TLS_KEY=tls.key,
        )
        self.relay_argv = [flagsync, "serve"]
        printed = self._start(self.relay_argv, r"relaying on (https://\S+)", env)
        if printed.rstrip("/") != self.urls[0]:
            self.stop()
            raise Failure(f"the relay printed {printed}, not its first address {self.urls[0]}")
        self.url = self.urls[TLS_HOSTS.index(host)]

    def check_tls_relay(self):
        """With a TLS relay, check it: its command line holds no SDK key; on each
        address, GET /status over TLS (trusting the test CA) answers 200 with JSON that
        lists the environment and holds no SDK key, and plaintext HTTP gets a 400
        within REQUEST_TIMEOUT. Returns what /status said, to show; None without TLS."""
        if self.ca is None:
            return None
        pid = self.procs[-1].pid
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
        if SDK_KEY.encode() in cmdline:
            raise Failure(f"the relay's command line (/proc/{pid}/cmdline) holds the SDK key")
        argv = cmdline.decode().split("\0")[:-1]
        if argv != self.relay_argv:
            raise Failure(f"the relay runs as {argv}, not {self.relay_argv}")
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({}),
            urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=self.ca)),
        )
        said = {url: self._check_status(opener, url + "/status") for url in self.urls}
        for host, port in self.ports.items():
            self._check_plaintext(host, port)
        if len(set(said.values())) == 1:
            return said[self.urls[0]]
        return "; ".join(f"{url}: {status}" for url, status in said.items())

    @staticmethod
    def _check_status(opener, url):
        """GET `url` (the relay's /status over TLS); what it says of its health."""
        try:
            with opener.open(url, timeout=REQUEST_TIMEOUT) as r:
                code, body = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            code, body = e.code, e.read().decode(errors="replace")
        except (OSError, ssl.SSLError) as e:
            raise Failure(f"GET {url} failed: {e}") from None
        if code != 200:
            raise Failure(f"GET {url} answered {code}, not 200: {body}")
        if SDK_KEY in body:
            raise Failure(f"GET {url} shows the SDK key: {body}")
        try:
            status = json.loads(body)
            env = status["environments"]["default"]
            state = env.get("connectionStatus", {}).get("state")
        except (ValueError, KeyError, TypeError, AttributeError):
            raise Failure(f"GET {url} answered no JSON listing the environment \"default\": {body}") from None
        # The SDK checks ran through the relay: its upstream connection is current.
        if (status.get("status"), env.get("status"), state) != ("healthy", "connected", "VALID"):
            raise Failure(f"GET {url}: the relay is not healthy after serving the SDK: {body}")
        return f"{status.get('status')} (default: {env.get('status')}, {state})"

    @staticmethod
    def _check_plaintext(host, port):
        """Plaintext HTTP to the TLS port must get a 400, not a hang."""
        url = f"http://{url_host(host)}:{port}/status"
        conn = http.client.HTTPConnection(host, port, timeout=REQUEST_TIMEOUT)
        try:
            conn.request("GET", "/status")
            r = conn.getresponse()
            code, body = r.status, r.read().decode(errors="replace")
        except (socket.timeout, TimeoutError):
            raise Failure(f"GET {url} (plaintext to the TLS port): no answer within {REQUEST_TIMEOUT} s") from None
        except (OSError, http.client.HTTPException) as e:
            raise Failure(f"GET {url} (plaintext to the TLS port) failed: {e!r}") from None
        finally:
            conn.close()
        if code != 400:
            raise Failure(f"GET {url} (plaintext to the TLS port) answered {code}, not 400: {body}")

    def _start(self, argv, pattern, env=None):
        """Start `argv` (with `env`, or this process's environment); the URL it prints
        (the first group of `pattern`)."""
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
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
        if not self.log.closed:  # stop() closes it
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


def describe_status(status):
    """What Serve.check_tls_relay returned, to append to a run's line."""
    return "" if status is None else f"; relay /status: {status}"
