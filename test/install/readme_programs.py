#!/usr/bin/env python3
"""test/install/readme_programs.py — writes README.md's programs and link lines to files, so
that the install test builds exactly what a reader copies.

usage: readme_programs.py README.md OUTDIR

Writes OUTDIR/train.c (the block under "A complete training loop"), custom_layer.c (under
"Layers, optimizers and checkpoints"), custom_op.c (under "Writing a custom op") and
link_lines.sh (the sh block that builds train.c). Exits 1 naming what it could not find."""
import os, re, sys

def blocks_after(text, heading, lang):
    start = text.find('\n' + heading + '\n')
    if start < 0:
        return None, []
    nxt = re.search(r'\n## ', text[start + 1:])
    section = text[start: start + 1 + nxt.start()] if nxt else text[start:]
    return section, re.findall(r'```' + lang + r'\n(.*?)```', section, flags=re.S)

def main():
    if len(sys.argv) != 3:
        print('usage: readme_programs.py README.md OUTDIR', file=sys.stderr)
        return 2
    text = open(sys.argv[1]).read()
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    want = [('## A complete training loop', 'c', 0, 'train.c'),
            ('## A complete training loop', 'sh', 0, 'link_lines.sh'),
            ('## Layers, optimizers and checkpoints', 'c', 0, 'custom_layer.c'),
            ('## Writing a custom op', 'c', 0, 'custom_op.c')]
    bad = 0
    for heading, lang, index, name in want:
        _, blocks = blocks_after(text, heading, lang)
        if len(blocks) <= index:
            print(f'README.md: no {lang} block {index} under "{heading}"', file=sys.stderr)
            bad = 1
            continue
        with open(os.path.join(out, name), 'w') as f:
            f.write(blocks[index])
    return bad

if __name__ == '__main__':
    sys.exit(main())
