#!/usr/bin/env python3
"""LaunchDarkly's official Node server SDK against `flagsync serve`.

Installs `@launchdarkly/node-server-sdk` (pinned: SDK_VERSION) from npm into a scratch
folder (installing `nodejs` and `npm` with apt-get when they are missing), then, for
FDv1 streaming and FDv1 polling, starts `flagsync serve` (the built binary) on a free
127.0.0.1 port with a data file, an SDK key and an events log, runs node_sdk_test.mjs
with the SDK against it, and checks that the official client:

* initializes in under 1 s (waitForInitialization);
* evaluates every flag of the data file (targets, rules, segments, prerequisites, a
  percentage rollout, multi-contexts, `flagValues`) for three contexts to the values
  flagsync's own engine gives (`flagsync eval`);
* with streaming, sees an edit of the data file, pushed by serve, within 1 s (its
  `update:KEY` event), and then evaluates as `flagsync eval` does on the edited file;
* posts its events, which serve receives: the diagnostic-init event on /diagnostic, and
  index, feature, summary, custom and identify events on /bulk, with the SDK's
  User-Agent and, on /bulk, X-LaunchDarkly-Event-Schema 4 and a payload id.

With --relay the client talks to `flagsync serve --upstream` (relay mode) in front of
serve, whose events log must receive the events the relay forwards. With --relay-tls
the relay is `flagsync serve` configured by FLAGSYNC_ variables alone, serving HTTPS
with a certificate of a test CA on 127.0.0.2 and [::1]: the client, trusting that CA
(`tlsParams: { ca }`), runs the checks against each address, and the relay itself is
checked as serve_harness.Serve.check_tls_relay says. With --relay-filter the client is
configured with a payload filter (payloadFilterKey) and talks to a relay serving that
filter in front of serve, whose filtered data lacks a flag of its whole data: that flag
must evaluate to the default, every other to flagsync's value.

    python3 conformance/official/node_sdk_test.py [--flagsync target/debug/flagsync]
        [--sdk-dir DIR] [--mode fdv1-streaming|fdv1-polling ...]
        [--relay | --relay-tls | --relay-filter]

The scratch folder (default: target/official-node-sdk) is kept and reused when it
already holds SDK_VERSION. Exit status 0 when every mode passes, 1 otherwise.
"""

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile

from serve_harness import (
    ROOT,
    as_root,
    SDK_KEY,
    UNFILTERED_FLAG,
    Failure,
    Serve,
    add_relay_options,
    check_events,
    describe_kinds,
    describe_relay,
    describe_status,
    flagsync_eval,
    runs,
    write_json,
)

SDK_PACKAGE = "@launchdarkly/node-server-sdk"
SDK_VERSION = "9.13.7"
# The oldest Node.js the SDK supports.
NODE_MAJOR = 18
MODES = ("fdv1-streaming", "fdv1-polling")
USER_AGENT = f"NodeJSClient/{SDK_VERSION}"
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node_sdk_test.mjs")
# The limits the test enforces, in seconds.
INIT_LIMIT = 1.0
CHANGE_LIMIT = 1.0
# The flag the edit changes.
EDITED = "drop-in"

CONTEXTS = [
    {"kind": "user", "key": "ctx-a", "name": "Ann", "plan": "gold", "country": "NZ"},
    {"kind": "user", "key": "ctx-b", "plan": "silver", "email": "b@example.com"},
    {
        "kind": "multi",
        "user": {"key": "ctx-c", "plan": "gold"},
        "org": {"key": "org-1", "tier": "enterprise"},
    },
]


def data():
    """Flags that exercise the evaluation rules; `drop-in` tracks full feature events."""
    flags = {
        EDITED: {"on": True, "variations": [False, True], "offVariation": 0,
                 "fallthrough": {"variation": 1}, "trackEvents": True},
        "tier": {
            "on": True, "variations": ["basic", "plus", "premium"], "offVariation": 0,
            "fallthrough": {"variation": 0},
            "targets": [{"values": ["ctx-b"], "variation": 1}],
            "rules": [{"id": "gold", "variation": 2, "clauses": [
                {"attribute": "plan", "op": "in", "values": ["gold"]}]}],
        },
        "beta": {
            "on": True, "variations": [0, 1.5], "offVariation": 0,
            "fallthrough": {"variation": 0},
            "rules": [{"id": "testers", "variation": 1, "clauses": [
                {"attribute": "", "op": "segmentMatch", "values": ["testers"]}]}],
        },
        "gated": {
            "on": True, "variations": ["closed", "open"], "offVariation": 0,
            "fallthrough": {"variation": 1},
            "prerequisites": [{"key": "tier", "variation": 2}],
        },
        "rollout": {
            "on": True, "variations": ["red", "green", "blue"], "offVariation": 0,
            "salt": "rollout-salt",
            "fallthrough": {"rollout": {"variations": [
                {"variation": 0, "weight": 33000},
                {"variation": 1, "weight": 33000},
                {"variation": 2, "weight": 34000}]}},
        },
        "org-only": {
            "on": True, "variations": [{"n": 0}, {"n": 1, "list": [1, 2]}], "offVariation": 0,
            "fallthrough": {"variation": 0},
            "rules": [{"id": "orgs", "variation": 1, "clauses": [
                {"contextKind": "org", "attribute": "tier", "op": "in", "values": ["enterprise"]}]}],
        },
        "off": {"on": False, "variations": ["x", "y"], "offVariation": 1,
                "fallthrough": {"variation": 0}},
    }
    segments = {"testers": {"included": ["ctx-a"], "rules": [{"id": "mail", "clauses": [
        {"attribute": "email", "op": "endsWith", "values": ["@example.com"]}]}]}}
    return {"flags": flags, "segments": segments, "flagValues": {"motd": "hello"}}


def edited():
    d = copy.deepcopy(data())
    d["flags"][EDITED]["fallthrough"] = {"variation": 0}
    return d


# --- Node.js and the SDK. -----------------------------------------------------------


def ensure_node():
    """`node` and `npm` on the PATH (installed with apt-get when missing), new enough."""
    if not (shutil.which("node") and shutil.which("npm")):
        print("node or npm is missing: installing nodejs and npm with apt-get", flush=True)
        if not shutil.which("apt-get"):
            raise Failure("node and npm are missing, and there is no apt-get to install them")
        as_root(["apt-get", "update"])
        as_root(["apt-get", "install", "-y", "nodejs", "npm"])
    r = subprocess.run(["node", "--version"], capture_output=True, text=True)
    version = r.stdout.strip()
    try:
        major = int(version.lstrip("v").split(".")[0])
    except ValueError:
        raise Failure(f"`node --version` printed {version!r}") from None
    if major < NODE_MAJOR:
        raise Failure(f"node {version} is too old for {SDK_PACKAGE} {SDK_VERSION} (needs {NODE_MAJOR}+)")
    return version


def installed_version(sdk_dir):
    manifest = os.path.join(sdk_dir, "node_modules", *SDK_PACKAGE.split("/"), "package.json")
    try:
        with open(manifest, encoding="utf-8") as f:
            return json.load(f).get("version")
    except (OSError, ValueError):
        return None


def ensure_sdk(sdk_dir):
    """A scratch folder whose node_modules holds SDK_PACKAGE@SDK_VERSION."""
    if installed_version(sdk_dir) == SDK_VERSION:
        return
    shutil.rmtree(sdk_dir, ignore_errors=True)
    os.makedirs(sdk_dir)
    with open(os.path.join(sdk_dir, "package.json"), "w", encoding="utf-8") as f:
        json.dump({"name": "flagsync-official-node-test", "private": True}, f)
    r = subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--save-exact", "--prefix", sdk_dir,
         f"{SDK_PACKAGE}@{SDK_VERSION}"],
        capture_output=True,
        text=True,
        cwd=sdk_dir,
    )
    if r.returncode != 0:
        raise Failure(f"npm install {SDK_PACKAGE}@{SDK_VERSION} failed:\n{r.stdout}{r.stderr}")
    got = installed_version(sdk_dir)
    if got != SDK_VERSION:
        raise Failure(f"{sdk_dir} holds {SDK_PACKAGE} {got}, not {SDK_VERSION}")


# --- One mode. ------------------------------------------------------------------------


def compare(what, got, want):
    """Fail unless the SDK's values equal flagsync's, context by context."""
    for i, (g, w) in enumerate(zip(got, want)):
        diff = {k: (g.get(k), w[k]) for k in w if g.get(k) != w[k]}
        if diff:
            shown = ", ".join(f"{k}: SDK {a!r}, flagsync {b!r}" for k, (a, b) in diff.items())
            raise Failure(f"{what}, context {i + 1} ({json.dumps(CONTEXTS[i])}): {shown}")


def check_mode(mode, flagsync, sdk_dir, relay=None, host=None):
    """Run one mode (with a TLS relay, against its address on `host`); returns (SDK
    output, event kinds, the relay's /status or None)."""
    with tempfile.TemporaryDirectory(prefix="flagsync-official-node-") as tmp:
        serve = Serve(flagsync, tmp, data(), relay=relay, host=host)
        err = ""
        try:
            want = [flagsync_eval(flagsync, serve.data, c) for c in CONTEXTS]
            edited_path = os.path.join(tmp, "edited.json")
            write_json(edited_path, edited())
            want_after = [flagsync_eval(flagsync, edited_path, c) for c in CONTEXTS]
            if serve.payload_filter:
                # Outside the filter: unknown to the client, so its default (null).
                for values in want + want_after:
                    values[UNFILTERED_FLAG] = None
            config = {
                "sdkDir": sdk_dir, "url": serve.url, "sdkKey": SDK_KEY, "mode": mode,
                "contexts": CONTEXTS, "flags": sorted(want[0]), "dataPath": serve.data,
                "edited": edited(), "editedFlag": EDITED, "caPath": serve.ca,
                "payloadFilter": serve.payload_filter,
            }
            try:
                r = subprocess.run(["node", SCRIPT, json.dumps(config)],
                                   capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired:
                raise Failure("the Node script did not finish within 60 s") from None
            err = r.stderr
            lines = r.stdout.strip().splitlines()
            try:
                out = json.loads(lines[-1])
            except (IndexError, ValueError):
                raise Failure(f"the Node script printed no result:\n{r.stdout}") from None
            if "error" in out:
                raise Failure(f"the Node script failed: {out['error']}")
            if out["sdkVersion"] != SDK_VERSION:
                raise Failure(f"the SDK loaded is {out['sdkVersion']}, not {SDK_VERSION}")
            if out["initMs"] >= INIT_LIMIT * 1000:
                raise Failure(f"initialized in {out['initMs']:.0f} ms, not under {INIT_LIMIT} s")
            compare("values", out["values"], want)
            if mode == "fdv1-streaming":
                if out["changeMs"] >= CHANGE_LIMIT * 1000:
                    raise Failure(
                        f"the edit reached the client after {out['changeMs']:.0f} ms, "
                        f"not under {CHANGE_LIMIT} s"
                    )
                compare("values after the edit", out["valuesAfter"], want_after)
                if want_after[0][EDITED] == want[0][EDITED]:
                    raise Failure("the edit changed nothing flagsync evaluates")
            kinds = check_events(serve, USER_AGENT)
            return out, kinds, serve.check_tls_relay()
        except Failure as e:
            raise Failure(
                f"{e}\n-- the SDK's log:\n{err}\n-- serve's standard error:\n{serve.stderr()}"
            ) from None
        finally:
            serve.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--flagsync",
        default=os.environ.get("FLAGSYNC_BIN", os.path.join(ROOT, "target", "debug", "flagsync")),
        help="the flagsync binary (default: $FLAGSYNC_BIN or target/debug/flagsync)",
    )
    p.add_argument(
        "--sdk-dir",
        default=os.path.join(ROOT, "target", "official-node-sdk"),
        help="the scratch folder to install the SDK into (default: target/official-node-sdk)",
    )
    p.add_argument("--mode", action="append", choices=MODES, help="run only this mode (repeatable)")
    add_relay_options(p)
    args = p.parse_args()
    flagsync = os.path.abspath(args.flagsync)
    try:
        if not os.access(flagsync, os.X_OK):
            raise Failure(
                f"no flagsync binary at {flagsync}: build it with "
                "`cargo build -p flagsync-cli --bin flagsync` or pass --flagsync"
            )
        node = ensure_node()
        sdk_dir = os.path.abspath(args.sdk_dir)
        ensure_sdk(sdk_dir)
    except Failure as e:
        print(f"FAIL: {e}", file=sys.stderr)
        return 1
    through = describe_relay(args.relay)
    print(f"{SDK_PACKAGE} {SDK_VERSION} (node {node}) against {flagsync} serve{through}")
    failed = 0
    for name, mode, host in runs(args.mode or MODES, args.relay):
        try:
            out, kinds, status = check_mode(mode, flagsync, sdk_dir, args.relay, host)
        except Failure as e:
            failed += 1
            print(f"FAIL {name}: {e}")
            continue
        n = len(out["values"][0])
        change = "" if "changeMs" not in out else f", change seen in {out['changeMs']:.0f} ms"
        print(
            f"ok   {name}: initialized in {out['initMs']:.0f} ms, {n} flags x {len(CONTEXTS)} "
            f"contexts as flagsync evaluates{change}; events received: {describe_kinds(kinds)}"
            f"{describe_status(status)}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
