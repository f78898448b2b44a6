#!/usr/bin/env python3
"""tools/check_params.py — every params struct keeps the one rule (core.h, DG_PARAMS_TAG).

usage: check_params.py [ROOT]

Fails (exit 1, one line per finding) when a `dg_*_params` struct of include/
  - has no dg_*_default_params() declared beside it, or does not end with `params_tag`;
  - is not exercised as a literal by test/test_params_literal.c (LIT(name), a refused call);
  - or a function of include/ taking it is never called there.
dg_update_params (extension.h) is the exception the rule names: a fused step's complete
description, with no defaults."""
import glob, os, re, sys

EXCEPT = {'dg_update_params'}

def main(root):
    bad = []
    test = open(os.path.join(root, 'test/test_params_literal.c')).read()
    headers = sorted(glob.glob(os.path.join(root, 'include/dygraph/*.h')))
    decls = [(fm.group(1), fm.group(2)) for fm in re.finditer(r'DG_API [^;(]*?\b(dg_[a-z0-9_]+)\(([^;]*?)\);',
                                                               ''.join(open(x).read() for x in headers), re.S)]
    for h in headers:
        text = open(h).read()
        rel = os.path.relpath(h, root)
        for m in re.finditer(r'typedef struct (dg_[a-z0-9_]+_params) \{(.*?)\} \1;', text, re.S):
            name, body = m.group(1), m.group(2)
            if name in EXCEPT:
                continue
            base = name[:-len('_params')]
            if not re.search(r'\b%s %s_default_params\(void\);' % (name, base), text):
                bad.append('%s: %s has no %s_default_params()' % (rel, name, base))
            fields = [f.strip() for f in re.sub(r'/\*.*?\*/', '', body, flags=re.S).split(';') if f.strip()]
            if not fields or not fields[-1].endswith('params_tag'):
                bad.append('%s: %s does not end with params_tag' % (rel, name))
            if 'LIT(%s)' % base not in test:
                bad.append('%s: %s is never passed as a literal in test/test_params_literal.c' % (rel, name))
            for fn, args in decls:
                if fn.endswith('_default_params') or fn == 'dg_nn_batch_norm_settings':
                    continue
                if re.search(r'\b%s\b\s*[a-z_]' % name, args) and fn + '(' not in test:
                    bad.append('%s: %s takes %s and is not called with a literal in test/test_params_literal.c'
                               % (rel, fn, name))
    for b in sorted(set(bad)):
        print('check_params: ' + b)
    return 1 if bad else 0

if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else '.'))
