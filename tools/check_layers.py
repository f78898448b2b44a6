#!/usr/bin/env python3
"""tools/check_layers.py — the source tree keeps its layers.

usage: check_layers.py [ROOT]

Fails (exit 1, one line per finding) when
  - a file of nn/, optim/, data/ or dist/ includes a header of eager/: those layers are written
    against include/ (dygraph.h and dygraph/extension.h) like a user's code;
  - the include graph of the library's sources (include/, eager/, nn/, optim/, data/, dist/) has
    a cycle;
  - a backend's kernel file (eager/cpu/, eager/cuda/) names dg_tensor or a tensor's handle
    fields: kernels see dg_kview views only (eager/backend.h), never refcounted handles.
Quoted includes are resolved against the including file's folder; <dygraph.h> and
<dygraph/...> against include/."""
import os, re, sys

LAYERS = ('nn', 'optim', 'data', 'dist')
SOURCES = ('include', 'eager') + LAYERS
INC = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)

def files(root):
    for top in SOURCES:
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith(('.c', '.h', '.cu', '.cuh', '.cc')):
                    yield os.path.relpath(os.path.join(d, n), root)

def includes(root, path):
    text = open(os.path.join(root, path), errors='replace').read()
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    for kind, name in INC.findall(text):
        if kind == '"':
            target = os.path.normpath(os.path.join(os.path.dirname(path), name))
        elif name == 'dygraph.h' or name.startswith('dygraph/'):
            target = os.path.join('include', name)
        else:
            continue
        if os.path.exists(os.path.join(root, target)):
            yield target

def main():
    root = sys.argv[1] if len(sys.argv) > 1 else '.'
    graph = {f: sorted(set(includes(root, f))) for f in files(root)}
    bad = []
    for f, targets in sorted(graph.items()):
        if f.split(os.sep)[0] in LAYERS:
            for t in targets:
                if t.split(os.sep)[0] == 'eager':
                    bad.append(f'{f}: includes {t} (outside eager/, use include/dygraph.h and dygraph/extension.h)')
    handle = re.compile(r'\bdg_tensor\b|->(storage|offset|refcount|node|scope|grad)\b')
    for f in sorted(graph):
        if f.split(os.sep)[:2] in (['eager', 'cpu'], ['eager', 'cuda']):
            text = re.sub(r'/\*.*?\*/|//[^\n]*', '', open(os.path.join(root, f), errors='replace').read(), flags=re.S)
            for m in handle.finditer(text):
                line = text.count('\n', 0, m.start()) + 1
                bad.append(f'{f}:{line}: kernel code uses {m.group(0).lstrip("->")} (kernels take dg_kview, eager/backend.h)')
    # cycles: depth-first search with colours; report each back edge's cycle once
    colour, stack, seen = {}, [], set()
    def visit(n):
        colour[n] = 1
        stack.append(n)
        for m in graph.get(n, []):
            if colour.get(m) == 1:
                cyc = stack[stack.index(m):] + [m]
                key = frozenset(cyc)
                if key not in seen:
                    seen.add(key)
                    bad.append('include cycle: ' + ' -> '.join(cyc))
            elif m not in colour:
                visit(m)
        stack.pop()
        colour[n] = 2
    sys.setrecursionlimit(10000)
    for n in sorted(graph):
        if n not in colour:
            visit(n)
    for b in bad:
        print(b)
    if bad:
        print(f'check_layers: {len(bad)} finding(s)')
        return 1
    print(f'check_layers: {len(graph)} files; nn/, optim/, data/, dist/ include no eager/ header; no include cycle; kernels see views only')
    return 0

if __name__ == '__main__':
    sys.exit(main())
