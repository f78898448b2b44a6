#!/usr/bin/env python3
"""test/cuda_emu/coverage.py — what the emulated runs executed of the CUDA backend and the NCCL
transport (gcov data of the --coverage emulation build):
  * every kernel instantiation compiled into eager/cuda/*.cu launched at least once;
  * every cuBLAS, cuDNN and NCCL entry point the backend uses called (the emulated libraries
    record their entry points in DGEMU_CALLS_FILE);
  * >= 90% of the executable lines of eager/cuda/, dist/nccl/ and the half-precision wrappers
    the CUDA module shares with the core (eager/half_via_f32.c) executed.
Usage: coverage.py BUILD_EMU_DIR CALLS_FILE. Exits 1 when a line above does not hold."""
import glob, json, os, re, subprocess, sys

emu, calls_file = sys.argv[1], sys.argv[2]
objs = sorted(glob.glob(os.path.join(emu, 'obj/eager/cuda/*.o')) + glob.glob(os.path.join(emu, 'obj/dist/nccl/*.o')) +
              glob.glob(os.path.join(emu, 'obj/eager/half_via_f32.o')))
ours = ('eager/cuda/', 'dist/nccl/', 'eager/half_via_f32.c')
lines = {}        # file -> {line: count}
functions = {}    # (file, demangled) -> count
for o in objs:
    if not os.path.exists(o[:-2] + '.gcda'):
        continue
    out = subprocess.run(['gcov', '--json-format', '--stdout', '-o', os.path.dirname(o), o],
                         capture_output=True, text=True, cwd='.').stdout
    for doc in out.splitlines():
        if not doc.startswith('{'):
            continue
        for f in json.loads(doc)['files']:
            name = f['file']
            if not name.startswith(ours):
                continue
            per = lines.setdefault(name, {})
            for l in f['lines']:
                per[l['line_number']] = max(per.get(l['line_number'], 0), l['count'])
            for fn in f['functions']:
                key = (name, fn['demangled_name'])
                functions[key] = max(functions.get(key, 0), fn['execution_count'])

# Instantiations no input can reach today, each with the reason; they are listed, not failed.
UNREACHABLE = [
    (r'<(double|float), long>\(', 'max pooling with 64-bit plane indices: only for planes over 2^31 elements'),
]

ok = True
# ---- kernels ----
kernels = set()
for src in glob.glob('eager/cuda/*.cu'):
    kernels |= set(re.findall(r'__global__\s+void\s+(\w+)', open(src).read()))
inst = {k: c for k, c in functions.items() if re.match(r'void (%s)(<|\()' % '|'.join(kernels), k[1])}
idle = sorted(k[1] for k, c in inst.items() if c == 0)
excused = [(k, why) for k in idle for pat, why in UNREACHABLE if re.search(pat, k)]
idle = [k for k in idle if k not in dict(excused)]
print('kernels: %d instantiations of %d kernels, %d launched, %d unreachable' %
      (len(inst), len(kernels), len(inst) - len(idle) - len(excused), len(excused)))
for k, why in excused:
    print('  unreachable: %s (%s)' % (k.split('(')[0], why))
for k in idle:
    print('  never launched: %s' % k)
ok &= not idle and len(inst) > 0

# ---- library entry points ----
want = set()
for src in glob.glob('eager/cuda/*.c') + glob.glob('eager/cuda/*.cu') + ['dist/nccl/comm_nccl.c']:
    text = open(src).read()
    want |= set(re.findall(r'\b((?:cudnn|nccl)[A-Z]\w*)\s*\(', text))
    want |= set(re.findall(r'LOAD\(\w+,\s*"(\w+)"\)', text))
called = set(open(calls_file).read().split()) if os.path.exists(calls_file) else set()
missing = sorted(want - called)
print('library entry points: %d used by the backend, %d called' % (len(want), len(want & called)))
for m in missing:
    print('  never called: %s' % m)
ok &= not missing

# ---- lines ----
total = hit = 0
for name in sorted(lines):
    t, h = len(lines[name]), sum(1 for c in lines[name].values() if c > 0)
    total += t
    hit += h
    print('  %-32s %5d/%5d lines  %5.1f%%' % (name, h, t, 100.0 * h / max(t, 1)))
pct = 100.0 * hit / max(total, 1)
print('lines: %d of %d executed (%.1f%%; at least 90%% wanted)' % (hit, total, pct))
ok &= pct >= 90.0
print('coverage: %s' % ('ok' if ok else 'NOT MET'))
sys.exit(0 if ok else 1)
