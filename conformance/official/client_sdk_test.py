#!/usr/bin/env python3
"""Client-side SDKs against `flagsync serve`: LaunchDarkly's browser SDK and OpenFeature's
OFREP web provider in headless Chromium, and LaunchDarkly's client-side SDK for Node.js.

Installs the pinned packages (PACKAGES) from npm into a scratch folder, bundles the test
page's script (browser_entry.mjs) with esbuild, installs Debian's `chromium` with apt-get
when it is missing, starts `flagsync serve --client-side-id ENV_ID` on a free 127.0.0.1
port with a data file and an events log (and a second one with `--secure-mode`), and
checks that:

* `launchdarkly-node-client-sdk`, polling and then streaming, initializes for three
  contexts in under 1 s, holds exactly the flags available to client-side SDKs, with the
  values flagsync's own engine gives (`flagsync eval`); streaming, an edit of the data
  file reaches its change listener within 1 s and every client then holds the edited
  values; its events (index or identify, feature, summary, custom) reach serve on the
  client-side events endpoint;
* `@launchdarkly/js-client-sdk` in Chromium, on a page served from another origin (so
  every request is a CORS request): the same values for the three contexts, the edit
  seen by its change listener within 1 s, its events received by serve; in secure mode
  a client with the right hash starts and one with a wrong hash does not;
* `@openfeature/ofrep-web-provider` with `@openfeature/web-sdk` in Chromium, authorized
  by the SDK key: every flag's value, reason, variant (and `FLAG_NOT_FOUND` for a flag
  the data lacks) as flagsync evaluates and flagsync-openfeature maps them; the second
  bulk request, polling, sends the first one's ETag and gets 304; with the bulk
  response's event stream, an edit reaches the provider within 1 s.

    python3 conformance/official/client_sdk_test.py [--flagsync target/debug/flagsync]
        [--sdk-dir DIR] [--relay]

With --relay the SDKs talk to `flagsync serve --upstream` (relay mode) in front of
serve, configured with the same client-side ID, and the events must reach serve through
it. Exit status 0 when every check passes, 1 otherwise.
"""

import argparse
import copy
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from serve_harness import ROOT, SDK_KEY, Failure, Serve, as_root, flagsync_eval, write_json

PACKAGES = {
    "launchdarkly-node-client-sdk": "3.4.3",
    "@launchdarkly/js-client-sdk": "4.10.3",
    "@openfeature/web-sdk": "1.10.0",
    "@openfeature/core": "1.12.0",
    "@openfeature/ofrep-web-provider": "0.4.3",
    "playwright-core": "1.65.2",
    "esbuild": "0.28.2",
}
HERE = os.path.dirname(os.path.abspath(__file__))
ENV_ID = "flagsync-client-side-id"
MOBILE_KEY = "mob-flagsync-test"
INIT_LIMIT = 1.0
CHANGE_LIMIT = 1.0
EDITED = "banner-on"
CHROMIUM = "/usr/bin/chromium"

CONTEXTS = [
    {"kind": "user", "key": "ctx-a", "name": "Ann", "plan": "gold"},
    {"kind": "user", "key": "ctx-b", "plan": "silver", "email": "b@example.com"},
    {"kind": "multi", "user": {"key": "ctx-c", "plan": "gold"},
     "org": {"key": "org-1", "tier": "enterprise"}},
]
# What each availability makes of a flag.
CLIENT = {"usingEnvironmentId": True, "usingMobileKey": True}
MOBILE_ONLY = {"usingEnvironmentId": False, "usingMobileKey": True}
SERVER_ONLY = {"usingEnvironmentId": False, "usingMobileKey": False}


def data():
    flags = {
        EDITED: {"on": True, "variations": [False, True], "offVariation": 0,
                 "fallthrough": {"variation": 1}, "trackEvents": True,
                 "clientSideAvailability": CLIENT},
        "tier": {"on": True, "variations": ["basic", "plus", "premium"], "offVariation": 0,
                 "fallthrough": {"variation": 0},
                 "targets": [{"values": ["ctx-b"], "variation": 1}],
                 "rules": [{"id": "gold", "variation": 2, "clauses": [
                     {"attribute": "plan", "op": "in", "values": ["gold"]}]}],
                 "clientSideAvailability": CLIENT},
        "beta": {"on": True, "variations": [0, 1.5], "offVariation": 0,
                 "fallthrough": {"variation": 0},
                 "rules": [{"id": "testers", "variation": 1, "clauses": [
                     {"attribute": "", "op": "segmentMatch", "values": ["testers"]}]}],
                 "clientSideAvailability": CLIENT},
        "rollout": {"on": True, "variations": ["red", "green", "blue"], "offVariation": 0,
                    "salt": "rollout-salt",
                    "fallthrough": {"rollout": {"variations": [
                        {"variation": 0, "weight": 33000}, {"variation": 1, "weight": 33000},
                        {"variation": 2, "weight": 34000}]}},
                    "clientSideAvailability": CLIENT},
        "org-only": {"on": True, "variations": [{"n": 0}, {"n": 1, "list": [1, 2]}],
                     "offVariation": 0, "fallthrough": {"variation": 0},
                     "rules": [{"id": "orgs", "variation": 1, "clauses": [
                         {"contextKind": "org", "attribute": "tier", "op": "in",
                          "values": ["enterprise"]}]}],
                     "clientSideAvailability": CLIENT},
        "gated": {"on": True, "variations": ["closed", "open"], "offVariation": 0,
                  "fallthrough": {"variation": 1},
                  "prerequisites": [{"key": "tier", "variation": 2}],
                  "clientSideAvailability": CLIENT},
        "off": {"on": False, "variations": ["x", "y"], "offVariation": 1,
                "fallthrough": {"variation": 0}, "clientSideAvailability": CLIENT},
        # The older form of availability: `clientSide` alone.
        "legacy": {"on": True, "variations": [1, 2], "offVariation": 0,
                   "fallthrough": {"variation": 1}, "clientSide": True},
        "mobile-only": {"on": True, "variations": ["m"], "offVariation": 0,
                        "fallthrough": {"variation": 0}, "clientSideAvailability": MOBILE_ONLY},
        "server-only": {"on": True, "variations": ["s"], "offVariation": 0,
                        "fallthrough": {"variation": 0}, "clientSideAvailability": SERVER_ONLY},
    }
    segments = {"testers": {"included": ["ctx-a"], "rules": [{"id": "mail", "clauses": [
        {"attribute": "email", "op": "endsWith", "values": ["@example.com"]}]}]}}
    return {"flags": flags, "segments": segments}


def client_side(flags):
    d = data()["flags"]
    return sorted(k for k, f in d.items()
                  if f.get("clientSideAvailability", {}).get("usingEnvironmentId", f.get("clientSide")))


def edited():
    d = copy.deepcopy(data())
    d["flags"][EDITED]["fallthrough"] = {"variation": 0}
    return d


def edited_again():
    d = edited()
    d["flags"]["off"]["offVariation"] = 0
    return d


# --- Node.js, the packages, the bundle, Chromium. ------------------------------------


def ensure_tools():
    missing = []
    if not (shutil.which("node") and shutil.which("npm")):
        missing += ["nodejs", "npm"]
    if not os.access(CHROMIUM, os.X_OK):
        missing.append("chromium")
    if missing:
        print(f"installing {' '.join(missing)} with apt-get", flush=True)
        as_root(["apt-get", "update"])
        as_root(["apt-get", "install", "-y", *missing])
    r = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True)
    return r.stdout.strip()


def installed(sdk_dir, package):
    manifest = os.path.join(sdk_dir, "node_modules", *package.split("/"), "package.json")
    try:
        with open(manifest, encoding="utf-8") as f:
            return json.load(f).get("version")
    except (OSError, ValueError):
        return None


def ensure_packages(sdk_dir):
    """A scratch folder whose node_modules holds PACKAGES, and the page's bundle."""
    if any(installed(sdk_dir, p) != v for p, v in PACKAGES.items()):
        shutil.rmtree(sdk_dir, ignore_errors=True)
        os.makedirs(sdk_dir)
        with open(os.path.join(sdk_dir, "package.json"), "w", encoding="utf-8") as f:
            json.dump({"name": "flagsync-client-side-test", "private": True}, f)
        r = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--save-exact", "--prefix", sdk_dir,
             *(f"{p}@{v}" for p, v in PACKAGES.items())],
            capture_output=True, text=True, cwd=sdk_dir)
        if r.returncode != 0:
            raise Failure(f"npm install failed:\n{r.stdout}{r.stderr}")
        for p, v in PACKAGES.items():
            if installed(sdk_dir, p) != v:
                raise Failure(f"{sdk_dir} holds {p} {installed(sdk_dir, p)}, not {v}")
    bundle = os.path.join(sdk_dir, "bundle.js")
    entry = os.path.join(sdk_dir, "entry.mjs")
    shutil.copyfile(os.path.join(HERE, "browser_entry.mjs"), entry)
    esbuild = os.path.join(sdk_dir, "node_modules", ".bin", "esbuild")
    r = subprocess.run([esbuild, entry, "--bundle", "--format=iife", "--platform=browser",
                        f"--outfile={bundle}", "--log-level=warning"],
                       capture_output=True, text=True, cwd=sdk_dir)
    if r.returncode != 0:
        raise Failure(f"esbuild failed:\n{r.stdout}{r.stderr}")
    return bundle


# --- The checks. ----------------------------------------------------------------------


def secure_hash(key):
    return hmac.new(SDK_KEY.encode(), key.encode(), hashlib.sha256).hexdigest()


def expected(flagsync, path):
    """flagsync's values of the client-side flags, one object per context."""
    keys = client_side(None)
    return [{k: v for k, v in flagsync_eval(flagsync, path, c).items() if k in keys}
            for c in CONTEXTS]


def compare(what, got, want):
    if len(got) != len(want):
        raise Failure(f"{what}: {len(got)} clients' flags, not {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            extra = sorted(set(g) - set(w))
            missing = sorted(set(w) - set(g))
            diff = {k: (g[k], w[k]) for k in w if k in g and g[k] != w[k]}
            raise Failure(f"{what}, context {i + 1} ({json.dumps(CONTEXTS[i])}): "
                          f"flags not client-side {extra}, missing {missing}, "
                          f"values (SDK, flagsync) {diff}")


def node(script, config, timeout=120):
    try:
        r = subprocess.run(["node", os.path.join(HERE, script), json.dumps(config)],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure(f"{script} did not finish within {timeout} s") from None
    lines = r.stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise Failure(f"{script} printed no result:\n{r.stdout}\n{r.stderr}") from None
    if "error" in out:
        raise Failure(f"{script} failed: {out['error']}\n{r.stderr}")
    return out, r.stderr


def client_events(serve, what, custom, kinds=("feature", "summary", "custom"), wait=5.0):
    """The events serve received on the client-side events endpoints: each of `kinds`
    must be there (within `wait` s), and a custom event `custom`."""
    deadline = time.monotonic() + wait
    while True:
        seen = {}
        for line in serve.event_lines():
            if ENV_ID not in line.get("endpoint", ""):
                continue
            kind = line["event"].get("kind")
            if kind == "custom" and line["event"].get("key") != custom:
                continue
            seen[kind] = seen.get(kind, 0) + 1
        missing = [k for k in kinds if k not in seen]
        if not missing:
            return seen
        if time.monotonic() >= deadline:
            raise Failure(f"{what}: serve received no {', '.join(missing)} event on the "
                          f"client-side endpoints within {wait} s (received: {seen or 'nothing'})")
        time.sleep(0.05)


def check_node(flagsync, sdk_dir, serve, tmp, streaming):
    want = expected(flagsync, serve.data)
    config = {"sdkDir": sdk_dir, "url": serve.url, "envId": ENV_ID, "streaming": streaming,
              "contexts": CONTEXTS, "hashes": None, "dataPath": serve.data,
              "edited": edited(), "editedFlag": EDITED, "storage": os.path.join(tmp, "storage")}
    os.makedirs(config["storage"], exist_ok=True)
    out, _ = node("client_sdk_test.mjs", config)
    if out["initMs"] >= INIT_LIMIT * 1000:
        raise Failure(f"initialized in {out['initMs']:.0f} ms, not under {INIT_LIMIT} s")
    compare("values", out["values"], want)
    if streaming:
        want_after = expected(flagsync, write_edited(tmp, edited()))
        if out["changeMs"] >= CHANGE_LIMIT * 1000:
            raise Failure(f"the edit reached the client after {out['changeMs']:.0f} ms")
        compare("values after the edit", out["valuesAfter"], want_after)
    return out


def write_edited(tmp, value):
    digest = hashlib.sha1(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]
    path = os.path.join(tmp, f"expected-{digest}.json")
    write_json(path, value)
    return path


def ofrep_expected(flagsync, path, context):
    """What the OFREP provider must give for every flag: value, reason, variant."""
    r = subprocess.run([flagsync, "eval", "--data", path, "--context", json.dumps(context)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise Failure(f"flagsync eval failed: {r.stderr}")
    reasons = {"OFF": "DISABLED", "TARGET_MATCH": "TARGETING_MATCH"}
    out = {}
    for key, d in json.loads(r.stdout).items():
        kind = d["reason"]["kind"]
        variant = None if d["variationIndex"] is None else str(d["variationIndex"])
        out[key] = {"value": d["value"], "reason": reasons.get(kind, kind), "variant": variant,
                    "errorCode": None}
    return out


def flag_types(d):
    types = {}
    for key, f in d["flags"].items():
        v = f["variations"][0]
        types[key] = ("boolean" if isinstance(v, bool) else "string" if isinstance(v, str)
                      else "number" if isinstance(v, (int, float)) else "object")
    types["no-such-flag"] = "boolean"
    return types


def ofrep_context(context):
    """The OpenFeature context for a LaunchDarkly single-kind user context."""
    c = dict(context)
    c.pop("kind", None)
    c["targetingKey"] = c.pop("key")
    return c


def compare_ofrep(what, got, want):
    for key, w in want.items():
        g = got.get(key)
        if g is None or any(g[f] != w[f] for f in ("value", "reason", "variant", "errorCode")):
            raise Failure(f"{what}: flag {key}: provider {g}, expected {w}")
    miss = got.get("no-such-flag", {})
    if miss.get("errorCode") != "FLAG_NOT_FOUND":
        raise Failure(f"{what}: a flag the data lacks gave {miss}, not FLAG_NOT_FOUND")


def check_browser(flagsync, sdk_dir, bundle, serve, secure, tmp):
    want = expected(flagsync, serve.data)
    after_path = write_edited(tmp, edited())
    want_after = expected(flagsync, after_path)
    single = [c for c in CONTEXTS if c["kind"] == "user"]
    ofrep_ctx = ofrep_context(CONTEXTS[0])
    config = {
        "sdkDir": sdk_dir, "bundle": bundle, "chromium": CHROMIUM, "dataPath": serve.data,
        "edits": [edited(), edited_again()],
        "ld": {"url": serve.url, "envId": ENV_ID, "contexts": CONTEXTS, "hashes": None,
               "streaming": True, "editedFlag": EDITED, "before": want[0][EDITED]},
        "secure": {"url": secure.url, "envId": ENV_ID, "contexts": single,
                   "good": [secure_hash(c["key"]) for c in single],
                   "bad": [secure_hash(c["key"] + "-not") for c in single]},
        "ofrep": {"url": serve.url, "sdkKey": SDK_KEY, "context": ofrep_ctx,
                  "flags": flag_types(data())},
    }
    out, err = node("browser_test.mjs", config, timeout=180)
    ld = out["ld"]
    if ld["statuses"] != ["complete"] * len(CONTEXTS):
        raise Failure(f"browser SDK start: {ld['statuses']}; page console: {out['console']}")
    if ld["initMs"] >= INIT_LIMIT * 1000:
        raise Failure(f"browser SDK initialized in {ld['initMs']:.0f} ms, not under {INIT_LIMIT} s")
    compare("browser SDK values", ld["values"], want)
    if ld["changeMs"] is None or not 0 <= ld["changeMs"] < CHANGE_LIMIT * 1000:
        raise Failure(f"the edit reached the browser SDK's change listener after {ld['changeMs']} ms; "
                      f"page console: {out['console']}")
    compare("browser SDK values after the edit", ld["valuesAfter"], want_after)
    if out["secureGood"]["statuses"] != ["complete"] * len(single):
        raise Failure(f"secure mode, right hashes: {out['secureGood']['statuses']}")
    if "complete" in out["secureBad"]["statuses"]:
        raise Failure(f"secure mode, wrong hashes: {out['secureBad']['statuses']} (a client started)")
    # OFREP: every flag of the data (not only client-side ones: the SDK key sees all).
    compare_ofrep("OFREP, polling", out["ofrepPolling"], ofrep_expected(flagsync, after_path, CONTEXTS[0]))
    reqs = out["ofrepRequests"]
    if not any(status == 304 and etag for status, etag in reqs[1:]):
        raise Failure(f"OFREP polling: no bulk request got 304 on its ETag: {reqs}")
    compare_ofrep("OFREP", out["ofrep"], ofrep_expected(flagsync, after_path, CONTEXTS[0]))
    if out["ofrepChangeMs"] is None or not 0 <= out["ofrepChangeMs"] < CHANGE_LIMIT * 1000:
        raise Failure(f"the edit reached the OFREP provider after {out['ofrepChangeMs']} ms; "
                      f"page console: {out['console']}")
    again = write_edited(tmp, edited_again())
    compare_ofrep("OFREP after the edit", out["ofrepAfter"], ofrep_expected(flagsync, again, CONTEXTS[0]))
    return out


def run(flagsync, sdk_dir, bundle, relay):
    with tempfile.TemporaryDirectory(prefix="flagsync-client-side-") as tmp:
        extra = ["--client-side-id", ENV_ID, "--mobile-key", MOBILE_KEY]
        serve = Serve(flagsync, os.path.join(tmp), data(), relay="http" if relay else None,
                      extra=extra)
        secure_dir = os.path.join(tmp, "secure")
        os.makedirs(secure_dir)
        secure = Serve(flagsync, secure_dir, data(), extra=[*extra, "--secure-mode"])
        lines = []
        try:
            polling = check_node(flagsync, sdk_dir, serve, tmp, streaming=False)
            lines.append(f"node client SDK, polling: {len(polling['values'][0])} flags x "
                         f"{len(CONTEXTS)} contexts as flagsync evaluates, "
                         f"initialized in {polling['initMs']:.0f} ms")
            streaming = check_node(flagsync, sdk_dir, serve, tmp, streaming=True)
            lines.append(f"node client SDK, streaming: edit seen in {streaming['changeMs']:.0f} ms")
            kinds = client_events(serve, "node client SDK", "flagsync-client-custom")
            lines.append(f"node client SDK events received: {kinds}")
            write_json(serve.data, data())
            b = check_browser(flagsync, sdk_dir, bundle, serve, secure, tmp)
            kinds = client_events(serve, "browser SDK", "flagsync-browser-custom")
            lines.append(f"browser SDK (page on {b['origin']}): values as flagsync's, edit seen "
                         f"in {b['ld']['changeMs']:.0f} ms; secure mode: right hash starts, "
                         f"wrong hash refused; events received: {kinds}")
            lines.append(f"OFREP web provider: {len(b['ofrep'])} flags as flagsync's, 304 on "
                         f"its ETag, edit seen through the event stream in {b['ofrepChangeMs']:.0f} ms")
            return lines
        except Failure as e:
            raise Failure(f"{e}\n-- serve's standard error:\n{serve.stderr()}") from None
        finally:
            serve.stop()
            secure.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--flagsync", default=os.environ.get(
        "FLAGSYNC_BIN", os.path.join(ROOT, "target", "debug", "flagsync")))
    p.add_argument("--sdk-dir", default=os.path.join(ROOT, "target", "official-client-sdk"))
    p.add_argument("--relay", action="store_true",
                   help="through `flagsync serve --upstream` (relay mode) in front of serve")
    args = p.parse_args()
    flagsync = os.path.abspath(args.flagsync)
    try:
        if not os.access(flagsync, os.X_OK):
            raise Failure(f"no flagsync binary at {flagsync}")
        browser = ensure_tools()
        sdk_dir = os.path.abspath(args.sdk_dir)
        bundle = ensure_packages(sdk_dir)
        print(f"{', '.join(f'{p} {v}' for p, v in PACKAGES.items())}; {browser}")
        for line in run(flagsync, sdk_dir, bundle, args.relay):
            print(f"ok   {line}")
    except Failure as e:
        print(f"FAIL: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
