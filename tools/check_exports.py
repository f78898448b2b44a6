#!/usr/bin/env python3
"""tools/check_exports.py — the shared library exports exactly what include/ declares with DG_API.

usage: check_exports.py LIB.so INCLUDE_DIR

A symbol exported but not declared is an internal leaking into the ABI (an embedder could come
to depend on it); one declared but not exported is a public function a user cannot link."""
import glob, os, re, subprocess, sys

def declared(include_dir):
    names = set()
    pat = re.compile(r'\bDG_API\s+(?:extern\s+)?[^;(]*?\b(dg\w*)\s*(\(|;|\[)')
    for path in glob.glob(os.path.join(include_dir, '**', '*.h'), recursive=True):
        text = re.sub(r'/\*.*?\*/', ' ', open(path).read(), flags=re.S)
        text = re.sub(r'#define[^\n]*', ' ', text)
        for m in pat.finditer(text):
            names.add(m.group(1))
    return names

def exported(lib):
    out = subprocess.run(['nm', '-D', '--defined-only', lib], capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in 'TtDdBbRrVvWwi':
            names.add(parts[2].split('@')[0])
    # the toolchain's own entry points, present in every shared object
    return {n for n in names if n not in ('_init', '_fini')}

def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    lib, inc = sys.argv[1], sys.argv[2]
    want, have = declared(inc), exported(lib)
    extra, missing = sorted(have - want), sorted(want - have)
    for n in extra:
        print(f'{lib}: exports {n}, which include/ does not declare with DG_API')
    for n in missing:
        print(f'{lib}: does not export {n}, which include/ declares')
    if extra or missing:
        return 1
    print(f'check_exports: {lib} exports exactly the {len(want)} functions include/ declares')
    return 0

if __name__ == '__main__':
    sys.exit(main())
