#!/usr/bin/python3
"""
The layers of src/, checked on the built objects: which file calls which is
read from the symbols each object defines and leaves undefined (nm), so
that a call through a header, a macro or a forgotten prototype counts as
it runs. Calls between folders must run down the table FOLDER_RANK (a
folder calls only folders of a lower rank); a call up, a call sideways
between two folders of one rank, or a folder missing from the table fails.
Inside a folder, files may call each other but never in a circle: a set
of files that call each other round (a strongly connected component of
the call graph) fails too, each named with the calls that close it. A
lower layer that must reach up does so through a table of function
pointers handed down (docs/architecture.md, "Layers").

usage: check-layers.py BUILD_DIR     (exit 0 clean, 1 a violation, 2 usage)
"""

import collections
import os
import subprocess
import sys

# Lowest first. The program's own files (src/*.c) are the top.
FOLDER_RANK = {
    "src/dlp": -1,
    "src/core": 0,
    "src/audit": 1,
    "src/vault": 1,
    "src/parse": 1,
    "src/dns": 2,
    "src/sandbox": 2,
    "src/exchange": 3,
    "src/proxy": 4,
    "src/daemon": 5,
    "src": 6,
}

TARGETS = ("sgcore.dir", "sandgate.dir")


def objects(build):
    """{module: object path} for the objects of the library and the program."""
    found = {}
    for target in TARGETS:
        top = os.path.join(build, "CMakeFiles", target)
        for dirpath, _, files in os.walk(top):
            for f in files:
                if f.endswith(".c.o"):
                    path = os.path.join(dirpath, f)
                    found[os.path.relpath(path, top)[:-len(".c.o")]] = path
    return found


def nm_all(paths, *flags):
    """{object path: [symbol]} from one nm run over every object."""
    out = subprocess.run(["nm", "-A", *flags, *paths], check=True,
        capture_output=True, text=True).stdout
    syms = collections.defaultdict(list)
    for line in out.splitlines():
        path, _, rest = line.partition(":")
        if rest.strip():
            syms[path].append(rest.split()[-1])
    return syms


def call_graph(objs):
    """{caller module: {callee module: [symbols]}} between distinct modules."""
    paths = sorted(objs.values())
    mod_of = {path: mod for mod, path in objs.items()}
    owner = {}
    for path, syms in nm_all(paths, "--defined-only", "--extern-only").items():
        for s in syms:
            owner[s] = mod_of[path]
    graph = collections.defaultdict(lambda: collections.defaultdict(list))
    for path, syms in nm_all(paths, "--undefined-only").items():
        mod = mod_of[path]
        for s in sorted(syms):
            callee = owner.get(s)
            if callee is not None and callee != mod:
                graph[mod][callee].append(s)
    return graph


def violations(graph, rank):
    """Every call between folders that does not run down the ranks."""
    out = []
    for caller, callees in sorted(graph.items()):
        fa = os.path.dirname(caller)
        for callee, syms in sorted(callees.items()):
            fb = os.path.dirname(callee)
            if fa == fb:
                continue
            for f in (fa, fb):
                if f not in rank:
                    out.append("%s: folder not in the layer table "
                        "(scripts/check-layers.py FOLDER_RANK)" % f)
            if fa in rank and fb in rank and rank[fa] <= rank[fb]:
                how = "up" if rank[fa] < rank[fb] else "sideways"
                out.append("%s.c -> %s.c calls %s (%s, %s -> %s)" % (caller,
                    callee, ", ".join(syms[:4]), how, fa, fb))
    return sorted(set(out))


def circles(graph):
    """Every set of two or more modules that call each other round (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def circle_calls(graph, comp):
    """The calls between the modules of one circle, for the report."""
    inside = set(comp)
    out = []
    for a in comp:
        for b, syms in sorted(graph.get(a, {}).items()):
            if b in inside:
                out.append("%s.c -> %s.c calls %s" % (a, b, ", ".join(syms[:4])))
    return out


def self_test():
    """The checker must see what it is there to see."""
    g = {"src/core/a": {"src/audit/b": ["b_fn"]},
         "src/audit/b": {"src/core/a": ["a_fn"]},
         "src/proxy/c": {"src/daemon/d": ["d_fn"], "src/core/a": ["a_fn"]},
         "src/audit/e": {"src/vault/f": ["f_fn"]},
         "src/nowhere/g": {"src/core/a": ["a_fn"]}}
    v = violations(g, FOLDER_RANK)
    expect = [
        "src/audit/e.c -> src/vault/f.c calls f_fn (sideways, src/audit -> src/vault)",
        "src/core/a.c -> src/audit/b.c calls b_fn (up, src/core -> src/audit)",
        "src/nowhere: folder not in the layer table (scripts/check-layers.py FOLDER_RANK)",
        "src/proxy/c.c -> src/daemon/d.c calls d_fn (up, src/proxy -> src/daemon)",
    ]
    if v != expect:
        print("check-layers: self-test failed:\n  " + "\n  ".join(v))
        sys.exit(1)
    g = {"x": {"y": ["y_fn"]}, "y": {"z": ["z_fn"]}, "z": {"x": ["x_fn"]},
         "p": {"q": ["q_fn"]}, "q": {}, "u": {"v": ["v_fn"]}, "v": {"u": ["u_fn"]}}
    if circles(g) != [["u", "v"], ["x", "y", "z"]]:
        print("check-layers: self-test failed: the circles x->y->z and u<->v "
              "not found (or p->q taken for one)")
        sys.exit(1)


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    self_test()
    objs = objects(sys.argv[1])
    if not any(m.startswith("src/core/") for m in objs):
        print("check-layers: no objects of src/core under %s: build first"
            % sys.argv[1])
        return 1
    graph = call_graph(objs)
    bad = violations(graph, FOLDER_RANK)
    per_folder = collections.Counter()
    for caller, callees in graph.items():
        for callee in callees:
            if os.path.dirname(caller) != os.path.dirname(callee):
                per_folder[(os.path.dirname(caller), os.path.dirname(callee))] += 1
    print("calls between folders (modules calling):")
    for (a, b), n in sorted(per_folder.items()):
        print("  %-12s -> %-12s %d" % (a, b, n))
    found = circles(graph)
    print("circles of files calling each other: %d (largest %d)" % (len(found),
        max((len(c) for c in found), default=0)))
    rc = 0
    if bad:
        print("calls against the layers (%d):" % len(bad))
        for line in bad:
            print("  " + line)
        rc = 1
    for comp in found:
        print("files that call each other round (%d): %s" % (len(comp),
            " ".join(os.path.basename(m) for m in comp)))
        for line in circle_calls(graph, comp):
            print("  " + line)
        rc = 1
    if rc == 0:
        print("%d modules, every call between folders runs down the layers, "
              "no file calls back round to itself" % len(objs))
    return rc


if __name__ == "__main__":
    sys.exit(main())
