#!/usr/bin/env python3
"""Find import circles between the .rs files of each crate of the workspace.

Crates: folders with a Cargo.toml holding [package] and a src/ folder (not under
target/, fuzz/, peers/).  Roots: src/lib.rs, src/main.rs, src/bin/*.rs and
src/bin/*/main.rs, each its own module tree (in a bin, the library's name, e.g.
`flagsync::`, is the library's root).  Modules map to files as rustc maps them:
a/b.rs or a/b/mod.rs, #[path], inline `mod x { }` blocks belong to their file.

Edge A -> B: file A names an item DEFINED in file B (struct, enum, union, trait,
fn, const, static, type, macro_rules!) through a `use` anywhere in A (groups,
`as`, `pub use`, `pub(crate) use`; paths from crate::, super::, self:: or a name
in scope) or through a path in code (`crate::a::f()`, `super::X`, `m::Item` with
`m` a module in scope).  Re-exports are followed to the defining file.  No edge:
`mod child;`, importing a module (its `m::Item` uses are edges), and a pure
re-export: a `pub use`/`pub(..) use` whose name the file never mentions again,
or a `pub use m::*` (--count-reexports counts those).  A glob `use m::*` is an
edge to m's file.
Names outside the crate (std, dependencies, generics, locals) are ignored.

Test code is skipped: files tests.rs, *_tests.rs, files under a tests/ folder of
src/, and items under #[cfg(test)] / #[cfg(all(test, ..))] (modules, fns, uses).

A circle is a strongly connected component of more than one file (self-edges
ignored).  Edges into a crate root count by default (a module importing
`crate::Client` while lib.rs imports from it is a circle); --allow-root drops
them.  Exit 1 if there is a circle, else 0.
"""
import argparse
import bisect
import os
import re
import sys
from collections import defaultdict

SKIP_DIRS = {"target", "fuzz", "peers", ".git"}
ITEM_KINDS = {"struct", "enum", "union", "trait", "fn", "const", "static", "type"}
QUALIFIERS = {"unsafe", "async", "default", "auto", "safe"}
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
TOKEN = re.compile(r"r#[A-Za-z_]\w*|[A-Za-z_]\w*|::|\"[^\"]*\"|'[A-Za-z_]\w*(?!')|\S")
OPEN = {"(": ")", "[": "]", "{": "}"}
LITERAL = re.compile(r"""//[^\n]*|/\*|(?<!\w)[bc]?r(#*)".*?"\1|(?:(?<!\w)[bc])?"(?:\\.|[^"\\])*"|"""
                     r"""(?<!\w)b?'(?:\\[^']*|[^'\\])'""", re.S)


def blank(src):
    """Same-length copy of src: comments blanked, each literal a `"   "` token."""
    out, i, n = [], 0, len(src)
    while i < n:
        m = LITERAL.search(src, i)
        if not m:
            out.append(src[i:])
            break
        out.append(src[i:m.start()])
        j = m.end()
        if m.group() == "/*":                       # block comments nest
            depth = 1
            while depth and j < n:
                k = re.compile(r"/\*|\*/").search(src, j)
                j = k.end() if k else n
                depth += (1 if k.group() == "/*" else -1) if k else -depth
        text = re.sub(r"[^\n]", " ", src[m.start():j])
        out.append(text if m.group().startswith("/") else '"' + text[1:-1] + '"')
        i = j
    return "".join(out)


class Mod:
    def __init__(self, file, parent, root=None):
        self.file, self.parent = file, parent
        self.root = root or self
        self.defs = {}                      # name -> kind
        self.mods = {}                      # name -> Mod
        self.imports = defaultdict(list)    # binding -> [path segments]
        self.globs = []                     # [path segments]


class File:
    def __init__(self, path, root_mod):
        self.path, self.mod = path, root_mod
        self.src = open(path, encoding="utf-8", errors="replace").read()
        text = blank(self.src)
        self.lines = [m.start() for m in re.finditer(r"\n", text)]
        found = [(m.group(), m.start()) for m in TOKEN.finditer(text)]
        self.toks = [t for t, _ in found] + [";"]
        self.pos = [p for _, p in found] + [len(text)]
        self.match, stack = {}, []
        for k, t in enumerate(self.toks):
            if t in OPEN:
                stack.append(k)
            elif t in (")", "]", "}") and stack:
                self.match[stack.pop()] = k
        self.spans = []     # (start, end, Mod) of inline modules
        self.tests = []     # (start, end) of test-only items
        self.reexports = set()  # token of each `pub use` / `pub(..) use` of a module

    def line(self, k):
        return bisect.bisect_left(self.lines, self.pos[k]) + 1

    def close(self, k):
        return self.match.get(k, len(self.toks) - 1)

    def module_at(self, k):
        inner = [(a, m) for a, b, m in self.spans if a <= k <= b]
        return max(inner, key=lambda x: x[0])[1] if inner else self.mod

    def in_test(self, k):
        return any(a <= k <= b for a, b in self.tests)


def is_test_file(path, src_dir):
    name = os.path.basename(path)
    parts = os.path.relpath(path, src_dir).split(os.sep)[:-1]
    return name == "tests.rs" or name.endswith("_tests.rs") or "tests" in parts


def test_attr(text):
    t = re.sub(r"\s+", "", text)
    return t == "cfg(test)" or (t.startswith("cfg(all(") and re.search(r"[(,]test[,)]", t) is not None)


class Crate:
    def __init__(self, folder, name):
        self.folder, self.name = folder, name
        self.src = os.path.join(folder, "src")
        self.files = {}      # path -> File
        self.roots = []      # root files

    def load(self, path, mod, child_dir):
        f = File(path, mod)
        self.files[path] = f
        self.items(f, 0, len(f.toks) - 1, mod, child_dir, os.path.dirname(path))
        return f

    def items(self, f, i, end, mod, child_dir, path_base):
        """Read the items of one module body: f.toks[i:end]."""
        toks = f.toks
        while i < end:
            start, attrs = i, []
            while toks[i] == "#":
                j = i + 2 if toks[i + 1] == "!" else i + 1
                if toks[j] != "[":
                    break
                attrs.append(f.src[f.pos[j] + 1:f.pos[f.close(j)]])
                i = f.close(j) + 1
            test = any(test_attr(a) for a in attrs)
            public = toks[i] == "pub"
            if public:
                i = f.close(i + 1) + 1 if toks[i + 1] == "(" else i + 1
            while toks[i] in QUALIFIERS or toks[i].startswith('"') or (
                    toks[i] in ("const", "extern") and toks[i + 1] in ("fn", "unsafe", "async", "extern")
                    or toks[i] == "extern" and toks[i + 1].startswith('"')):
                i += 1
            kw = toks[i]
            if kw == "union" and not (WORD.fullmatch(toks[i + 1]) and toks[i + 2] in "{<"):
                kw = ""
            j = i
            while j < end and toks[j] != ";":
                if toks[j] in OPEN:
                    j = f.close(j)
                    if toks[j] == "}" and kw not in ("use", "const", "static", "type"):
                        break
                j += 1
            if test:
                f.tests.append((start, j))
            elif kw == "use":
                if public:
                    f.reexports.add(i)
                for segs, bind, _ in use_leaves(f, i + 1, j):
                    if bind == "*":
                        mod.globs.append(segs)
                    elif bind:
                        mod.imports[bind].append(segs)
            elif kw == "mod":
                name = toks[i + 1]
                if toks[i + 2] == "{":
                    sub = Mod(f.path, mod, mod.root)
                    mod.mods[name] = sub
                    f.spans.append((i, j, sub))
                    d = os.path.join(child_dir, name)
                    self.items(f, i + 3, j, sub, d, d)
                else:
                    self.file_mod(f, mod, name, attrs, child_dir, path_base)
            elif kw == "macro_rules":
                mod.defs[toks[i + 2]] = "macro"
            elif kw in ITEM_KINDS:
                name = toks[i + 2] if toks[i + 1] == "mut" else toks[i + 1]
                if WORD.fullmatch(name) and name != "_":
                    mod.defs[name] = kw
            i = max(j + 1, start + 1)

    def file_mod(self, f, mod, name, attrs, child_dir, path_base):
        paths = [re.match(r'\s*path\s*=\s*"(.*)"\s*$', a, re.S) for a in attrs]
        paths = [m.group(1) for m in paths if m]
        cands = ([os.path.normpath(os.path.join(path_base, paths[0]))] if paths else
                 [os.path.join(child_dir, name + ".rs"), os.path.join(child_dir, name, "mod.rs")])
        path = next((p for p in cands if os.path.isfile(p)), None)
        if path is None or is_test_file(path, self.src) or path in self.files:
            return
        sub = Mod(path, mod, mod.root)
        mod.mods[name] = sub
        base = os.path.basename(path)
        sub_dir = os.path.dirname(path) if base == "mod.rs" else path[:-3]
        self.load(path, sub, sub_dir)


def use_leaves(f, i, end, prefix=()):
    """Leaves of the use tree f.toks[i:end]: (segments, binding or '*' or None, token)."""
    toks, segs, out = f.toks, list(prefix), []
    if toks[i] == "::" and not prefix:
        segs.append("::")
    while i < end:
        t = toks[i]
        if t == "{":
            c = f.close(i)
            k = i + 1
            while k < c:
                e = k
                while e < c and toks[e] != ",":
                    e = f.close(e) + 1 if toks[e] in OPEN else e + 1
                if e > k:
                    out += use_leaves(f, k, e, segs)
                k = e + 1
            return out
        if t == "*":
            return [(segs, "*", i)]
        if t == "as":
            bind = toks[i + 1]
            return [(segs, None if bind == "_" else bind, i + 1)]
        if t != "::":
            segs.append(t[2:] if t.startswith("r#") else t)
        i += 1
    if segs and segs[-1] == "self":
        segs = segs[:-1]
    return [(segs, segs[-1] if segs else None, end - 1)] if segs else []


def lookup(m, name, want_mod, seen):
    """What `name` means in module m: ('mod', Mod) or ('item', file) or None."""
    if (id(m), name) in seen:
        return None
    seen = seen | {(id(m), name)}
    found = [("item", m.file)] if name in m.defs else []
    found += [("mod", m.mods[name])] if name in m.mods else []
    found += [v for v in (resolve(m, p, want_mod, seen) for p in m.imports.get(name, [])) if v]
    for g in [] if found else m.globs:
        tgt = resolve(m, g, True, seen)
        v = tgt and tgt[0] == "mod" and lookup(tgt[1], name, want_mod, seen)
        found += [v] if v else []
    pref = [v for v in found if (v[0] == "mod") == want_mod]
    return (pref or found or [None])[0]


def resolve(m, segs, want_mod_last, seen=frozenset()):
    """Follow a path from module m; it stops at the first item (Enum::Variant)."""
    v, ext = ("mod", m), getattr(m.root, "ext", {})
    for k, s in enumerate(segs):
        if v[0] == "item":
            return v
        if k == 0 and (s in ("crate", "::") or s in ext):
            v = None if s == "::" else ("mod", m.root if s == "crate" else ext[s])
        elif s in ("super", "self"):
            up = v[1].parent if s == "super" else v[1]
            v = ("mod", up) if up else None
        else:
            v = lookup(v[1], s, want_mod_last if k == len(segs) - 1 else True, seen)
        if v is None:
            return None
    return v


def references(f, add, count_reexports=False):
    """Every use leaf and code path of file f, resolved: add(target_file, line, text).

    A leaf of a `pub use` / `pub(crate) use` whose name the file never mentions
    again (outside use declarations and tests) is a re-export only: no edge, since
    the users of that name get their edge to the defining file directly."""
    toks, n = f.toks, len(f.toks)
    uses, k = {}, 0                         # use token -> its `;`
    while k < n:
        if toks[k] == "use" and (k == 0 or toks[k - 1] != "::") and not f.in_test(k):
            e = k
            while e < n and toks[e] != ";":
                e = f.close(e) if toks[e] in OPEN else e
                e += 1
            uses[k] = e
            k = e
        k += 1
    inside = set(x for a, b in uses.items() for x in range(a, b + 1))
    mentioned = {t for x, t in enumerate(toks) if x not in inside and WORD.fullmatch(t)
                 and toks[x - 1] not in (".", "::", "mod") and not f.in_test(x)}
    k = 0
    while k < n:
        t = toks[k]
        prev = toks[k - 1] if k else ""
        if k in uses:
            m = f.module_at(k)
            for segs, bind, at in use_leaves(f, k + 1, uses[k]):
                if k in f.reexports and not count_reexports and (
                        bind in (None, "*") or bind not in mentioned):
                    continue
                v = resolve(m, segs, bind == "*")
                if v and (v[0] == "item" or bind == "*"):
                    tail = "::*" if bind == "*" else ""
                    add(v[1] if v[0] == "item" else v[1].file, f.line(at),
                        "use " + "::".join(segs) + tail)
            k = uses[k] + 1
            continue
        if f.in_test(k):
            k += 1
            continue
        if WORD.fullmatch(t) and toks[k + 1] == "::" and prev != "::" and t != "Self":
            segs, e = [t], k + 1
            while toks[e] == "::" and WORD.fullmatch(toks[e + 1]):
                segs.append(toks[e + 1])
                e += 2
            v = resolve(f.module_at(k), segs, False)
            if v and v[0] == "item":
                add(v[1], f.line(k), ("$" if prev == "$" else "") + "::".join(segs))
            k = e
            continue
        k += 1


def discover(root):
    crates = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith("."))
        if "Cargo.toml" in files and os.path.isdir(os.path.join(d, "src")):
            toml = open(os.path.join(d, "Cargo.toml"), encoding="utf-8").read()
            name = re.search(r'^\[package\][^\[]*?^name\s*=\s*"([^"]+)"', toml, re.M | re.S)
            if name:
                crates.append(Crate(d, name.group(1)))
    return crates


def load_crate(c):
    src = c.src
    lib = os.path.join(src, "lib.rs")
    bins = [os.path.join(src, "main.rs")]
    bindir = os.path.join(src, "bin")
    if os.path.isdir(bindir):
        for e in sorted(os.listdir(bindir)):
            p = os.path.join(bindir, e)
            bins.append(p if e.endswith(".rs") else os.path.join(p, "main.rs"))
    lib_mod = None
    if os.path.isfile(lib):
        lib_mod = Mod(lib, None)
        c.roots.append(c.load(lib, lib_mod, src).path)
    for b in bins:
        if os.path.isfile(b) and b not in c.files:
            m = Mod(b, None)
            m.ext = {c.name.replace("-", "_"): lib_mod} if lib_mod else {}
            c.roots.append(c.load(b, m, os.path.dirname(b)).path)


def sccs(nodes, edges):
    """Tarjan's strongly connected components."""
    succ, index, low, stack, out = defaultdict(set), {}, {}, [], []
    for a, b in edges:
        succ[a].add(b)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            k = stack.index(v)
            out.append(sorted(stack[k:]))
            del stack[k:]

    sys.setrecursionlimit(max(1000, 4 * len(nodes)))
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(here), help="repository root")
    ap.add_argument("--allow-root", action="store_true",
                    help="ignore edges into a crate root file (lib.rs, main.rs)")
    ap.add_argument("--count-reexports", action="store_true",
                    help="also count a `pub use` the file itself never uses as an edge")
    ap.add_argument("--verbose", action="store_true", help="print every edge")
    args = ap.parse_args(argv)
    root = os.path.abspath(args.root)
    rel = lambda p: os.path.relpath(p, root)
    crates = discover(root)
    circles, nfiles = [], 0
    for c in crates:
        load_crate(c)
        nfiles += len(c.files)
        edges = {}      # (a, b) -> [(line, text)]
        for f in c.files.values():
            def add(target, line, text, a=f.path):
                if target != a and not (args.allow_root and target in c.roots):
                    edges.setdefault((a, target), []).append((line, text))
            references(f, add, args.count_reexports)
        if args.verbose:
            for (a, b), occ in sorted(edges.items()):
                for line, text in occ:
                    print("edge %s:%d -> %s  %s" % (rel(a), line, rel(b), text))
        for comp in sccs(sorted(c.files), edges):
            if len(comp) > 1:
                circles.append((comp, [(a, b, occ) for (a, b), occ in sorted(edges.items())
                                       if a in comp and b in comp]))
    for comp, inner in sorted(circles):
        print(" <-> ".join(rel(p) for p in comp))
        for a, b, occ in inner:
            line, text = occ[0]
            more = " (+%d more)" % (len(occ) - 1) if len(occ) > 1 else ""
            print("    %s:%d -> %s: %s%s" % (rel(a), line, rel(b), text, more))
    if circles:
        print("%d import circle(s) (%d files in %d crates)" % (len(circles), nfiles, len(crates)))
        return 1
    print("no import circles (%d files in %d crates)" % (nfiles, len(crates)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
