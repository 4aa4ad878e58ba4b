#!/usr/bin/env python3
"""Finds import circles between the modules of a Rust crate.

Usage: scripts/modcycles.py CRATE_ROOT_FILE [ONLY_UNDER]

Reads the module tree from the crate root (`mod x;` -> x.rs or x/mod.rs),
then every path a file names through `crate::`, `super::` or `self::` (in
`use` statements and in code), resolved to the deepest module file it
reaches. An edge A -> B means file A uses an item of module B. `mod x;`
itself is not an edge (a parent owns its children), but a parent's
`pub use child::X` is. A circle is a strongly connected set of two or more
files; e.g. a child importing an item its parent defines while the parent
re-exports the child. With ONLY_UNDER (a directory), only circles whose
files all lie under it are reported. Prints each circle and exits 1 if
there is one, else prints "no import circle" and exits 0.
"""

import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;")
INLINE_MOD = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*\{")
PATH = re.compile(r"(?<![A-Za-z0-9_:])(" + IDENT + r"(?:::" + IDENT + r")+)")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    out = []
    for line in text.splitlines():
        # drop // comments (doc comments included), keep string contents roughly
        i = line.find("//")
        out.append(line if i < 0 else line[:i])
    return out


def module_files(root):
    """{module path tuple: file} for the crate whose root file is `root`."""
    mods = {(): root}
    todo = [((), root)]
    while todo:
        path, file = todo.pop()
        base = os.path.dirname(file)
        name = os.path.basename(file)
        if name not in ("mod.rs", "lib.rs", "main.rs"):
            base = os.path.join(base, name[:-3])
        for line in strip_comments(open(file, encoding="utf-8").read()):
            m = MOD_DECL.match(line)
            if not m:
                continue
            child = m.group(1)
            for cand in (os.path.join(base, child + ".rs"), os.path.join(base, child, "mod.rs")):
                if os.path.exists(cand):
                    mods[path + (child,)] = cand
                    todo.append((path + (child,), cand))
                    break
    return mods


def expand_use(body):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    body = re.sub(r"\s+", "", body)

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        return parts

    def walk(prefix, s):
        i = s.find("{")
        if i < 0:
            return [prefix + s]
        head, inner = s[:i], s[i + 1 : s.rfind("}")]
        out = []
        for part in split_top(inner):
            out.extend(walk(prefix + head, part))
        return out

    return [p.split(" as ")[0] for p in walk("", body)]


def resolve(segments, here, mods):
    """The module file a path reaches, from module `here`."""
    path = list(here)
    segs = list(segments)
    if segs[0] == "crate":
        path = []
        segs = segs[1:]
    while segs and segs[0] in ("super", "self"):
        if segs[0] == "super":
            path = path[:-1]
        segs = segs[1:]
    best = tuple(path)
    for s in segs:
        cand = tuple(path) + (s,)
        if cand in mods:
            path.append(s)
            best = cand
        else:
            break
    # an inline module (e.g. `mod tests`) belongs to its file
    while best not in mods:
        best = best[:-1]
    return mods[best]


def edges(mods):
    out = {f: set() for f in mods.values()}
    for modpath, file in mods.items():
        lines = strip_comments(open(file, encoding="utf-8").read())
        # inline modules: (name, depth at which they close)
        stack, depth = [], 0
        text_lines = []
        for line in lines:
            m = INLINE_MOD.match(line)
            here = modpath + tuple(n for n, _ in stack)
            if m:
                stack.append((m.group(1), depth))
                here = modpath + tuple(n for n, _ in stack)
            text_lines.append((line, here))
            depth += line.count("{") - line.count("}")
            while stack and depth <= stack[-1][1]:
                stack.pop()
        # `use` statements (possibly multi-line), then paths in code
        def add(segs, here):
            # crate::, super::, self::, or a path starting at a child module
            relative = segs and here + (segs[0],) in mods
            if segs and (segs[0] in ("crate", "super", "self") or relative):
                target = resolve(segs if not relative else ["self"] + segs, here, mods)
                if target != file:
                    out[file].add(target)

        i = 0
        while i < len(text_lines):
            line, here = text_lines[i]
            m = re.match(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+(.*)", line)
            if m:
                stmt = m.group(1)
                while ";" not in stmt and i + 1 < len(text_lines):
                    i += 1
                    stmt += text_lines[i][0]
                stmt = stmt.split(";")[0]
                for p in expand_use(stmt):
                    segs = [s for s in p.split("::") if s and s != "*"]
                    add(segs, here)
            else:
                for p in PATH.findall(line):
                    add(p.split("::"), here)
            i += 1
    return out


def circles(graph):
    index, low, on, stack, sccs, n = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(sorted(scc))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sccs


def main():
    root = sys.argv[1]
    only = os.path.normpath(sys.argv[2]) + os.sep if len(sys.argv) > 2 else None
    mods = module_files(root)
    graph = edges(mods)
    found = [c for c in circles(graph) if not only or all(f.startswith(only) for f in c)]
    files = [f for f in graph if not only or f.startswith(only)]
    for c in found:
        print("import circle:")
        for f in c:
            inside = sorted(t for t in graph[f] if t in c)
            print(f"  {f} -> {', '.join(inside)}")
    if found:
        return 1
    print(f"no import circle among {len(files)} module files" + (f" under {only}" if only else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
