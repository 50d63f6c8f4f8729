#!/usr/bin/env python3
"""The README stays a front page that is true: at most 350 lines, its workspace table
names every crate of the workspace (with its folder), and its fuzzing section names
every fuzz target. Exit 1, saying what is missing, otherwise 0.

Every Rust example in the READMEs compiles: each crate includes its README (and the
SDK the repository's) as doc tests (`ReadmeDoctests`), run by `cargo test`.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LINES = 350


def members():
    text = open(os.path.join(ROOT, "Cargo.toml"), encoding="utf-8").read()
    listed = re.search(r"^members\s*=\s*\[(.*?)\]", text, re.M | re.S).group(1)
    for folder in re.findall(r'"([^"]+)"', listed):
        manifest = open(os.path.join(ROOT, folder, "Cargo.toml"), encoding="utf-8").read()
        name = re.search(r'^\[package\][^\[]*?^name\s*=\s*"([^"]+)"', manifest, re.M | re.S)
        yield folder, name.group(1)


def main():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    problems = []
    lines = readme.count("\n")
    if lines > MAX_LINES:
        problems.append(f"README.md has {lines} lines, more than {MAX_LINES}")
    rows = [l for l in readme.splitlines() if l.startswith("| `")]
    for folder, name in members():
        if not any(f"`{folder}/`" in r and f"`{name}`" in r for r in rows):
            problems.append(f"the workspace table has no row for `{folder}/` (`{name}`)")
    fuzz = readme.split("## Fuzzing", 1)
    section = fuzz[1] if len(fuzz) == 2 else ""
    targets = os.path.join(ROOT, "fuzz", "fuzz_targets")
    for file in sorted(os.listdir(targets)):
        target = file.removesuffix(".rs")
        if file.endswith(".rs") and f"`{target}`" not in section:
            problems.append(f"the fuzzing section does not name the fuzz target `{target}`")
    for p in problems:
        print(f"readme-check: {p}")
    print(f"readme-check: {'FAILED' if problems else 'ok'} ({lines} lines)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
