#!/usr/bin/env python3
"""LaunchDarkly's official Python server SDK against `flagsync serve`.

Installs `launchdarkly-server-sdk` (pinned: SDK_VERSION) from PyPI into a virtualenv,
then, for each data-system mode -- FDv1 streaming, FDv1 polling and the FDv2 default
data system -- starts `flagsync serve` (the built binary) on a free 127.0.0.1 port with
a data file and an SDK key, and checks that the official client:

* initializes in under 1 s (LDClient's constructor returns initialized),
* evaluates the flag the data file holds,
* in the streaming modes, sees an edit of the data file, pushed by serve, within 1 s
  (a flag-tracker listener fires and the new value is evaluated). FDv1 polling cannot
  see a change that fast: the SDK polls every 30 s at the least;
* posts its events, which serve receives (`serve --events`): the diagnostic-init event
  on /diagnostic, and index, feature, summary, custom and identify events on /bulk,
  with the SDK's User-Agent and, on /bulk, X-LaunchDarkly-Event-Schema 4 and a
  payload id (serve_harness.check_events).

With --relay the client talks to `flagsync serve --upstream` (relay mode) in front of
serve, whose events log must receive the events the relay forwards. With --relay-tls
the relay is `flagsync serve` configured by FLAGSYNC_ variables alone (its command line
holds no SDK key), serving HTTPS with a certificate of a test CA (made with openssl) on
127.0.0.2 and [::1]: the client, trusting that CA (HTTPConfig(ca_certs=...)), runs the
checks against each address; the relay's GET /status must answer over TLS without an
SDK key, and plaintext HTTP to its port must get a 400 (serve_harness.Serve). With
--relay-filter the client is configured with a payload filter (payload_filter_key) and
talks to a relay serving that filter (`serve --upstream --payload-filters`) in front of
serve, whose filtered data lacks a flag of its whole data: the client must have exactly
the filtered flags (the FDv1 modes only: this SDK sends no filter on FDv2 requests, as
its documentation says).

Every failure fails the run, with the reason: a missing `python3 -m venv` or pip, a
failed install, a serve that does not start, a slow or failed initialization.

    python3 conformance/official/python_sdk_test.py [--flagsync target/debug/flagsync]
        [--venv DIR] [--mode fdv1-streaming|fdv1-polling|fdv2-default ...]
        [--relay | --relay-tls | --relay-filter]

The virtualenv (default: target/official-python-venv) is kept and reused when it
already holds SDK_VERSION. Exit status 0 when every mode passes, 1 otherwise.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from serve_harness import ROOT, SDK_KEY, Failure, Serve, check_events, describe_kinds, write_json
from serve_harness import RELAY_OPTIONS, UNFILTERED_FLAG, add_relay_options, describe_relay
from serve_harness import describe_status, runs

SDK_VERSION = "9.20.0"
MODES = ("fdv1-streaming", "fdv1-polling", "fdv2-default")
# The modes in which the SDK sends its payload filter.
FILTER_MODES = ("fdv1-streaming", "fdv1-polling")
FLAG = "drop-in"
USER_AGENT = f"PythonClient/{SDK_VERSION}"
# The limits the test enforces, in seconds.
INIT_LIMIT = 1.0
CHANGE_LIMIT = 1.0


def flag(value):
    """A boolean flag that serves `value` to everyone, with full feature events."""
    return {
        "key": FLAG,
        "on": True,
        "variations": [False, True],
        "fallthrough": {"variation": 1 if value else 0},
        "offVariation": 0,
        "trackEvents": True,
    }


def data(value):
    return {"flags": {FLAG: flag(value)}, "segments": {}}


# --- The outer run: the virtualenv, then the checks inside it. ---------------------


def venv_python(venv):
    return os.path.join(venv, "bin", "python")


def installed_version(python):
    probe = "import importlib.metadata as m; print(m.version('launchdarkly-server-sdk'))"
    r = subprocess.run([python, "-c", probe], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def ensure_venv(venv):
    """A virtualenv at `venv` holding launchdarkly-server-sdk==SDK_VERSION."""
    python = venv_python(venv)
    if os.path.exists(python) and installed_version(python) == SDK_VERSION:
        return python
    shutil.rmtree(venv, ignore_errors=True)
    r = subprocess.run(
        [sys.executable, "-m", "venv", venv], capture_output=True, text=True
    )
    if r.returncode != 0 or not os.path.exists(python):
        raise Failure(
            f"`{sys.executable} -m venv {venv}` failed (on Debian/Ubuntu: apt-get "
            f"install python3-venv): {r.stderr.strip() or r.stdout.strip()}"
        )
    r = subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            f"launchdarkly-server-sdk=={SDK_VERSION}",
        ],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise Failure(
            f"pip install launchdarkly-server-sdk=={SDK_VERSION} failed:\n"
            f"{r.stdout}{r.stderr}"
        )
    got = installed_version(python)
    if got != SDK_VERSION:
        raise Failure(f"the virtualenv holds launchdarkly-server-sdk {got}, not {SDK_VERSION}")
    return python


def outer(args):
    flagsync = os.path.abspath(args.flagsync)
    if not os.access(flagsync, os.X_OK):
        raise Failure(
            f"no flagsync binary at {flagsync}: build it with "
            "`cargo build -p flagsync-cli --bin flagsync` or pass --flagsync"
        )
    python = ensure_venv(os.path.abspath(args.venv))
    cmd = [python, os.path.abspath(__file__), "--inside", "--flagsync", flagsync]
    for m in args.mode or []:
        cmd += ["--mode", m]
    if args.relay:
        cmd.append(RELAY_OPTIONS[args.relay])
    return subprocess.run(cmd).returncode


# --- The inner run: inside the virtualenv, with ldclient importable. ---------------


def config_for(mode, url, ca=None, payload_filter=None):
    """The SDK's configuration for `mode`, every service at `url`, trusting the CA
    certificates in the file `ca` (default: the system's), with `payload_filter`."""
    from ldclient.config import Config, HTTPConfig

    common = dict(
        sdk_key=SDK_KEY,
        base_uri=url,
        stream_uri=url,
        events_uri=url,
        http=HTTPConfig(ca_certs=ca),
        payload_filter_key=payload_filter,
    )
    if mode == "fdv1-streaming":
        return Config(stream=True, **common)
    if mode == "fdv1-polling":
        return Config(stream=False, **common)
    if mode == "fdv2-default":
        from ldclient import datasystem

        return Config(datasystem_config=datasystem.default().build(), **common)
    raise ValueError(mode)


class Captured:
    """The SDK's log records (INFO and above) of one mode, shown when it fails."""

    def __init__(self):
        import logging

        self.lines = []
        self.handler = logging.Handler(logging.INFO)
        self.handler.emit = lambda r: self.lines.append(
            f"{r.created - self.start:7.3f} s {r.levelname}: {r.getMessage()}"
        )
        self.start = time.time()
        self.logger = logging.getLogger("ldclient")
        self.logger.setLevel(logging.INFO)
        self.logger.propagate = False
        self.logger.addHandler(self.handler)

    def close(self):
        self.logger.removeHandler(self.handler)

    def text(self):
        return "\n".join(self.lines)


def check_mode(mode, flagsync, relay=None, host=None):
    """Run one mode (with a TLS relay, against its address on `host`); returns (init
    seconds, change seconds or None, event kinds, the relay's /status or None)."""
    from ldclient import Context
    from ldclient.client import LDClient

    ctx = Context.builder("official-sdk-user").build()
    log = Captured()
    with tempfile.TemporaryDirectory(prefix="flagsync-official-") as tmp:
        serve = Serve(flagsync, tmp, data(True), relay=relay, host=host)
        client = None
        try:
            started = time.monotonic()
            config = config_for(mode, serve.url, serve.ca, serve.payload_filter)
            client = LDClient(config, start_wait=5)
            init = time.monotonic() - started
            if not client.is_initialized():
                raise Failure(f"not initialized after {init:.2f} s")
            if init >= INIT_LIMIT:
                raise Failure(f"initialized in {init:.3f} s, not under {INIT_LIMIT} s")
            value = client.variation(FLAG, ctx, None)
            if value is not True:
                raise Failure(f"{FLAG} evaluated to {value!r}, expected True")
            if serve.payload_filter:
                check_filtered(client, ctx)
            seen = None if mode == "fdv1-polling" else check_edit(client, serve, ctx)
            # The events: identify and custom (feature, index and summary came above).
            client.identify(ctx)
            client.track("flagsync-custom", ctx, {"n": 1}, 2.5)
            client.close()  # flushes
            client = None
            kinds = check_events(serve, USER_AGENT)
            return init, seen, kinds, serve.check_tls_relay()
        except Failure as e:
            raise Failure(
                f"{e}\n-- the SDK's log:\n{log.text()}\n-- serve's standard error:\n{serve.stderr()}"
            ) from None
        finally:
            if client is not None:
                client.close()
            serve.stop()
            log.close()


def check_filtered(client, ctx):
    """The client holds exactly the filtered data: the flag only the whole environment
    has is unknown to it."""
    detail = client.variation_detail(UNFILTERED_FLAG, ctx, "absent")
    if detail.value != "absent" or detail.reason.get("errorKind") != "FLAG_NOT_FOUND":
        raise Failure(
            f"{UNFILTERED_FLAG} (outside the payload filter) evaluated to {detail.value!r} "
            f"({detail.reason}): the client got the unfiltered data"
        )
    flags = sorted(client.all_flags_state(ctx).to_values_map())
    if flags != [FLAG]:
        raise Failure(f"the client holds the flags {flags}, expected only [{FLAG!r}]")


def check_edit(client, serve, ctx):
    """Edit the data file; the seconds until the client saw the change."""
    changed = threading.Event()
    client.flag_tracker.add_listener(lambda change: change.key == FLAG and changed.set())
    edited = time.monotonic()
    write_json(serve.data, data(False))
    if not changed.wait(5):
        raise Failure("the edit of the data file never reached the client")
    seen = time.monotonic() - edited
    if seen >= CHANGE_LIMIT:
        raise Failure(f"the edit reached the client after {seen:.3f} s, not under {CHANGE_LIMIT} s")
    value = client.variation(FLAG, ctx, None)
    if value is not False:
        raise Failure(f"after the edit {FLAG} evaluated to {value!r}, expected False")
    return seen


def inside(args):
    import ldclient.version

    through = describe_relay(args.relay)
    print(f"launchdarkly-server-sdk {ldclient.version.VERSION} against {args.flagsync} serve{through}")
    failed = 0
    modes = args.mode or (FILTER_MODES if args.relay == "filter" else MODES)
    for name, mode, host in runs(modes, args.relay):
        try:
            init, seen, kinds, status = check_mode(mode, args.flagsync, args.relay, host)
        except Failure as e:
            failed += 1
            print(f"FAIL {name}: {e}")
            continue
        change = "" if seen is None else f", change seen in {seen * 1000:.0f} ms"
        print(
            f"ok   {name}: initialized in {init * 1000:.0f} ms{change}; "
            f"events received: {describe_kinds(kinds)}{describe_status(status)}"
        )
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--flagsync",
        default=os.environ.get("FLAGSYNC_BIN", os.path.join(ROOT, "target", "debug", "flagsync")),
        help="the flagsync binary (default: $FLAGSYNC_BIN or target/debug/flagsync)",
    )
    p.add_argument(
        "--venv",
        default=os.path.join(ROOT, "target", "official-python-venv"),
        help="the virtualenv to create or reuse (default: target/official-python-venv)",
    )
    p.add_argument("--mode", action="append", choices=MODES, help="run only this mode (repeatable)")
    add_relay_options(p)
    p.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    try:
        return inside(args) if args.inside else outer(args)
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
