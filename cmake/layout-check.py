#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
# Copyright (c) The librpcrdma authors
"""The source layout rules of docs/CONVENTIONS.md "Layout", checked on src/:

  - no file over MAX_LINES lines, no function over MAX_FUNC lines;
  - no two files include each other in a loop (through #include "...",
    resolved against src/ or the including file's folder);
  - no two .c files call each other in a loop: A calls B when A's object
    uses a symbol B's object defines (nm on the built objects).

Usage: layout-check.py SRC_DIR [OBJ_DIR]   (OBJ_DIR: where the .o files of
src/ are, e.g. build/CMakeFiles/rpcrdma_obj.dir/src; without it the call
graph is not checked). Prints every violation; exit 1 when there is one."""
import os, re, subprocess, sys

MAX_LINES = 1500
MAX_FUNC = 120

def units(src):
    out = {}
    for d, _, fs in os.walk(src):
        for f in fs:
            if f.endswith(('.c', '.h')):
                p = os.path.join(d, f)
                out.setdefault(os.path.relpath(p, src)[:-2], []).append(p)
    return out

FUNC_RE = re.compile(r'^[A-Za-z_][^;{}()]*\b([A-Za-z_]\w*)\s*\([^;]*$')

def long_functions(path):
    """Function bodies: a line at column 0 starting with '{' after a
    declarator, up to the matching '}' at column 0."""
    bad = []
    lines = open(path, encoding='utf-8', errors='replace').read().split('\n')
    name, start = None, None
    for i, l in enumerate(lines):
        if start is None:
            m = FUNC_RE.match(l)
            if m:
                name = m.group(1)
            if l.startswith('{') and name:
                start = i
        elif l.startswith('}'):
            n = i - start - 1
            if n > MAX_FUNC:
                bad.append((name, start + 1, n))
            name, start = None, None
    return bad

def cycles(graph):
    """Strongly connected components with more than one node."""
    index, low, on, stack, res, idx = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(10000)
    def visit(v):
        index[v] = low[v] = idx[0]; idx[0] += 1
        stack.append(v); on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); on.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                res.append(sorted(comp))
    for v in list(graph):
        if v not in index:
            visit(v)
    return res

def main():
    src = sys.argv[1]
    obj = sys.argv[2] if len(sys.argv) > 2 else None
    u = units(src)
    errors = 0
    for name, paths in sorted(u.items()):
        for p in paths:
            n = sum(1 for _ in open(p, encoding='utf-8', errors='replace'))
            if n > MAX_LINES:
                print(f'{os.path.relpath(p, src)}: {n} lines (at most {MAX_LINES})'); errors += 1
            if p.endswith('.c'):
                for f, line, n in long_functions(p):
                    print(f'{os.path.relpath(p, src)}:{line}: {f}() has {n} lines (at most {MAX_FUNC})'); errors += 1
    inc = {}
    files = {os.path.relpath(p, src) for paths in u.values() for p in paths}
    for f in files:
        for l in open(os.path.join(src, f), encoding='utf-8', errors='replace'):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', l)
            if not m:
                continue
            for t in (m.group(1), os.path.normpath(os.path.join(os.path.dirname(f), m.group(1)))):
                if t in files and t != f:
                    inc.setdefault(f, set()).add(t)
                    break
    for c in cycles(inc):
        print('include loop: ' + ' -> '.join(c)); errors += 1
    if obj:
        defs, uses = {}, {}
        for d, _, fs in os.walk(obj):
            for f in fs:
                if not f.endswith('.c.o'):
                    continue
                p = os.path.join(d, f)
                name = os.path.relpath(p, obj)[:-4]
                if not os.path.exists(os.path.join(src, name + '.c')):
                    continue   # the object of a source since removed
                out = subprocess.run(['nm', p], capture_output=True, text=True).stdout
                for l in out.split('\n'):
                    parts = l.split()
                    if len(parts) == 3 and parts[1] in 'TDBR':
                        defs[parts[2]] = name
                    elif len(parts) == 2 and parts[0] == 'U':
                        uses.setdefault(name, set()).add(parts[1])
        calls = {}
        for name, syms in uses.items():
            for s in syms:
                if s in defs and defs[s] != name:
                    calls.setdefault(name, set()).add(defs[s])
        for c in cycles(calls):
            print('call loop: ' + ' -> '.join(c)); errors += 1
    if errors:
        print(f'{errors} layout violation(s) (docs/CONVENTIONS.md "Layout")')
        return 1
    print('layout: ok')
    return 0

sys.exit(main())
