#!/usr/bin/env python3
"""Finds import circles between the modules of a Rust crate.

Usage: scripts/modcycles.py CRATE_ROOT_FILE [ONLY_UNDER]
       scripts/modcycles.py --top CRATE_ROOT_FILE

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

With --top, each top-level module is one node (a directory or a top-level
file of the crate's src; the crate root lib.rs/main.rs is its own node,
`<root>`), and circles between those nodes are reported (circles inside one
top-level module are allowed). Paths resolve through re-exports: `crate::X`,
where the root only re-exports X with `pub use a::b::X`, is an edge to the
module that defines X (`a::b`), following chains of `use` and glob `use`,
so a child importing `crate::Error` depends on `error`, not on the root.
Each edge of a circle is shown with up to three file pairs that make it.
"""

import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*;")
INLINE_MOD = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*\{")
USE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+(.*)")
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


def module_lines(modpath, file):
    """The lines of module `modpath`'s `file`, comments left out, each with the module
    path it is in (an inline `mod x { .. }` adding `x`)."""
    # inline modules: (name, depth at which they close)
    stack, depth, out = [], 0, []
    for line in strip_comments(open(file, encoding="utf-8").read()):
        m = INLINE_MOD.match(line)
        if m:
            stack.append((m.group(1), depth))
        out.append((line, modpath + tuple(n for n, _ in stack)))
        depth += line.count("{") - line.count("}")
        while stack and depth <= stack[-1][1]:
            stack.pop()
    return out


def statements(lines):
    """Each of `lines` ((line, module) pairs) as (line, module, uses): `uses` the paths of
    the `use` statement starting there (read to its `;`, its further lines then skipped), as
    (segments, alias or "", glob), `a::{self}` as `a`; else None."""
    i = 0
    while i < len(lines):
        line, here = lines[i]
        m = USE.match(line)
        uses = None
        if m:
            stmt = m.group(1)
            while ";" not in stmt and i + 1 < len(lines):
                i += 1
                stmt += lines[i][0]
            # `a::B as C` binds C: the alias is kept through expand_use as `B@C`
            body = re.sub(r"\s+as\s+", "@", stmt.split(";")[0])
            uses = []
            for p in expand_use(body):
                p, _, alias = p.partition("@")
                segs = [s for s in p.split("::") if s]
                glob = bool(segs) and segs[-1] == "*"
                if glob:
                    segs = segs[:-1]
                if segs and segs[-1] == "self":
                    segs = segs[:-1]
                uses.append((segs, alias, glob))
        yield line, here, uses
        i += 1


def named_paths(lines):
    """(segments, module) of each path `lines` ((line, module) pairs) name: in `use`
    statements (see statements()), and in code."""
    for line, here, uses in statements(lines):
        if uses is None:
            for p in PATH.findall(line):
                yield p.split("::"), here
        for segs, _, _ in uses or []:
            yield segs, here


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
        def add(segs, here):
            # crate::, super::, self::, or a path starting at a child module
            relative = segs and here + (segs[0],) in mods
            if segs and (segs[0] in ("crate", "super", "self") or relative):
                target = resolve(segs if not relative else ["self"] + segs, here, mods)
                if target != file:
                    out[file].add(target)

        for segs, here in named_paths(module_lines(modpath, file)):
            add(segs, here)
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


ITEM = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|unsafe|const|default|extern\s+\"C\")\s+)*"
    r"(?:fn|struct|enum|trait|type|const|static|union|mod)\s+(" + IDENT + r")"
)
MACRO = re.compile(r"^\s*macro_rules!\s*(" + IDENT + r")")


def absolute(segs, here, mods):
    """`segs` as a path from the crate root, or None when it leaves the crate."""
    if not segs:
        return None
    if segs[0] == "crate":
        return list(segs[1:])
    if segs[0] in ("super", "self"):
        path = list(here)
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                path = path[:-1]
            segs = segs[1:]
        return path + list(segs)
    if tuple(here) + (segs[0],) in mods:
        return list(here) + list(segs)
    return None


class Crate:
    """Modules, the items each defines and the names each binds with `use`."""

    def __init__(self, root):
        self.mods = module_files(root)
        self.items = {}  # module path (inline modules included) -> names it defines
        self.binds = {}  # module path -> {name: absolute path}
        self.globs = {}  # module path -> [absolute module path]
        self.lines = {}  # file -> [(line, module path)]
        for modpath, file in self.mods.items():
            out = self.lines[file] = module_lines(modpath, file)
            for line, here, uses in statements(out):
                m = ITEM.match(line) or MACRO.match(line)
                if m:
                    self.items.setdefault(here, set()).add(m.group(1))
                for segs, alias, glob in uses or []:
                    full = absolute(segs, here, self.mods)
                    if full is None:
                        continue
                    if glob:
                        self.globs.setdefault(here, []).append(full)
                    elif full:
                        self.binds.setdefault(here, {})[alias or full[-1]] = full

    def file_of(self, modpath):
        modpath = tuple(modpath)
        while modpath not in self.mods:
            modpath = modpath[:-1]
        return self.mods[modpath]

    def resolve(self, full, seen=()):
        """The module that defines what the absolute path `full` names."""
        path = ()
        rest = list(full)
        while rest and path + (rest[0],) in self.mods:
            path += (rest[0],)
            rest = rest[1:]
        if not rest:
            return path
        name = rest[0]
        # an inline module of the file (`mod tests { .. }`)
        if path + (name,) in self.items or path + (name,) in self.binds:
            sub = path + (name,)
            if len(rest) > 1 and rest[1] in self.binds.get(sub, {}):
                return self.resolve(self.binds[sub][rest[1]] + rest[2:], seen)
            return sub
        if name in self.items.get(path, ()):
            return path
        key = (path, name)
        if key in seen:
            return path
        seen = seen + (key,)
        if name in self.binds.get(path, {}):
            return self.resolve(self.binds[path][name] + rest[1:], seen)
        for base in self.globs.get(path, []):
            target = self.resolve(base + rest, seen)
            if target != tuple(base) or name in self.items.get(tuple(base), ()):
                return target
        return path

    def edges(self):
        """{file: {file: [example]}}, every path resolved through re-exports."""
        out = {f: {} for f in self.mods.values()}
        for file, lines in self.lines.items():

            def add(segs, here):
                full = absolute(segs, here, self.mods)
                if full is None:
                    return
                target = self.file_of(self.resolve(full))
                if target != file:
                    out[file].setdefault(target, "::".join(segs))

            for segs, here in named_paths(lines):
                add(segs, here)
        return out


def top(root):
    crate = Crate(root)
    base = os.path.dirname(root)

    def node(file):
        rel = os.path.relpath(file, base)
        if rel == os.path.basename(root):
            return "<root>"
        first = rel.split(os.sep)[0]
        return first[:-3] if first.endswith(".rs") else first

    fedges = crate.edges()
    graph, why = {}, {}
    for f in fedges:
        graph.setdefault(node(f), set())
    for f, targets in fedges.items():
        for t, example in targets.items():
            a, b = node(f), node(t)
            if a != b:
                graph[a].add(b)
                why.setdefault((a, b), []).append((f, t, example))
    found = circles(graph)
    for c in found:
        print("import circle between top-level modules: {" + ", ".join(c) + "}")
        for a in c:
            for b in sorted(t for t in graph[a] if t in c):
                print(f"  {a} -> {b}")
                for f, t, example in why[(a, b)][:3]:
                    print(f"      {os.path.relpath(f, base)} uses {example} ({os.path.relpath(t, base)})")
                if len(why[(a, b)]) > 3:
                    print(f"      ... {len(why[(a, b)]) - 3} more")
    if found:
        return 1
    print(f"no import circle among {len(graph)} top-level modules of {base}")
    return 0


def main():
    if sys.argv[1] == "--top":
        return top(sys.argv[2])
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
