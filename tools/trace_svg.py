#!/usr/bin/env python3
"""tools/trace_svg.py — one training step of a profiler trace (Chrome trace-event JSON, as
dg_profiler / DG_PROFILE write it) drawn as an SVG timeline: one row per thread (and per track,
such as a DataParallel bucket's all-reduce), events as boxes stacked by nesting depth and colored
by category, their names where the box is wide enough, a hover title with the event's duration
and args, the CPU memory counter underneath, and a time axis.

usage: trace_svg.py TRACE.json -o OUT.svg [--step K] [--width PX] [--title TEXT]

A step ends where an optimizer ".step" event ends on the thread that runs them; step K (default:
the middle one, away from the first step's warm-up) is the time from the end of step K-1 to the
end of step K. Python's standard library only."""
import json, sys
from xml.sax.saxutils import escape

COLORS = {'op': '#4e79a7', 'op_backward': '#f28e2b', 'autograd': '#bab0ac', 'optimizer': '#59a14f',
          'dataloader': '#b07aa1', 'collective': '#e15759', 'user': '#76b7b2', 'kernel': '#9c755f'}
TRACK_TID = 0x7f000000
LANE, GAP, LEFT, TOP = 18, 10, 190, 52


def fmt_us(us):
    if us >= 1000:
        return '%.2f ms' % (us / 1000)
    return '%.1f us' % us


def load(path):
    with open(path) as f:
        doc = json.load(f)
    events = doc['traceEvents'] if isinstance(doc, dict) else doc
    names, spans, counters = {}, [], []
    for e in events:
        ph = e.get('ph')
        if ph == 'M' and e.get('name') == 'thread_name':
            names[(e['pid'], e['tid'])] = e['args']['name']
        elif ph == 'X':
            spans.append(e)
        elif ph == 'C':
            counters.append(e)
    return names, spans, counters


def step_window(spans, k):
    steps = [e for e in spans if e.get('cat') == 'optimizer' and e['name'].endswith('.step')]
    if not steps:
        raise SystemExit('trace_svg: no optimizer ".step" event: cannot find a step')
    by_thread = {}
    for e in steps:
        by_thread.setdefault((e['pid'], e['tid']), []).append(e)
    key, steps = max(by_thread.items(), key=lambda kv: len(kv[1]))
    ends = sorted(e['ts'] + e['dur'] for e in steps)
    if k is None:
        k = len(ends) // 2
    if not 0 <= k < len(ends):
        raise SystemExit('trace_svg: step %d asked, the trace has %d (0..%d)' % (k, len(ends), len(ends) - 1))
    if k > 0:
        t0 = ends[k - 1]
    else:
        t0 = min(e['ts'] for e in spans if (e['pid'], e['tid']) == key)
    return key, k, len(ends), t0, ends[k]


def lanes(evs):
    """Nesting depth of each event of one row (sorted by start, longer first)."""
    out, stack = [], []
    for e in sorted(evs, key=lambda e: (e['ts'], -e['dur'])):
        end = e['ts'] + e['dur']
        while stack and e['ts'] >= stack[-1] - 1e-3:
            stack.pop()
        out.append((e, len(stack)))
        stack.append(end)
    return out


def draw(path, out, k, width, title):
    names, spans, counters = load(path)
    main, k, nsteps, t0, t1 = step_window(spans, k)
    inside = [e for e in spans if e['ts'] < t1 and e['ts'] + e['dur'] > t0]
    rows = {}
    for e in inside:
        rows.setdefault((e['pid'], e['tid']), []).append(e)

    def order(key):
        return (key != main, key[1] >= TRACK_TID, names.get(key, ''), key)
    keys = sorted(rows, key=order)
    scale = (width - LEFT - 20) / max(t1 - t0, 1e-9)
    x_of = lambda ts: LEFT + (min(max(ts, t0), t1) - t0) * scale
    parts, y = [], TOP
    cats = set()
    for key in keys:
        laid = lanes(rows[key])
        depth = max(d for _, d in laid) + 1
        h = depth * LANE
        label = names.get(key, 'thread %s' % key[1])
        parts.append('<rect x="0" y="%d" width="%d" height="%d" fill="#f7f7f7"/>' % (y - 3, width, h + 6))
        parts.append('<text x="8" y="%d" class="row">%s</text>' % (y + 13, escape(label)))
        for e, d in laid:
            x0, x1 = x_of(e['ts']), x_of(e['ts'] + e['dur'])
            w = max(x1 - x0, 0.6)
            cat = e.get('cat', '')
            cats.add(cat)
            color = COLORS.get(cat, '#999999')
            args = e.get('args') or {}
            tip = '%s (%s) %s%s' % (e['name'], cat, fmt_us(e['dur']),
                                    ''.join('\n%s: %s' % kv for kv in sorted(args.items())))
            parts.append('<g><title>%s</title><rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" stroke="#ffffff" '
                         'stroke-width="0.5"/>' % (escape(tip), x0, y + d * LANE, w, LANE - 2, color))
            text = e['name']
            room = int((w - 4) / 6.2)
            if room >= 3:
                if len(text) > room:
                    text = text[:room - 1] + '\u2026'
                parts.append('<text x="%.2f" y="%d" class="ev">%s</text>' % (x0 + 2, y + d * LANE + 12, escape(text)))
            parts.append('</g>')
        y += h + GAP
    # the CPU memory counter (allocated bytes) over the step, as a step line
    mem = sorted((c for c in counters if c.get('name') == 'memory cpu' and c['pid'] == main[0]), key=lambda c: c['ts'])
    if mem:
        before = [c for c in mem if c['ts'] <= t0]
        pts = ([before[-1]] if before else []) + [c for c in mem if t0 < c['ts'] < t1]
        if pts:
            vals = [c['args'].get('allocated', 0) for c in pts]
            lo, hi = min(vals), max(vals)
            hh = 40
            parts.append('<rect x="0" y="%d" width="%d" height="%d" fill="#f7f7f7"/>' % (y - 3, width, hh + 6))
            parts.append('<text x="8" y="%d" class="row">memory cpu (allocated)</text>' % (y + 13))
            parts.append('<text x="8" y="%d" class="small">%.1f - %.1f MB</text>' % (y + 28, lo / 2**20, hi / 2**20))
            path_d = []
            for c, v in zip(pts, vals):
                yy = y + hh - (0 if hi == lo else (v - lo) / (hi - lo) * hh)
                xx = x_of(c['ts'])
                path_d.append('M%.2f %.2f' % (xx, yy) if not path_d else 'H%.2f V%.2f' % (xx, yy))
            path_d.append('H%.2f' % x_of(t1))
            parts.append('<path d="%s" fill="none" stroke="#e15759" stroke-width="1.5"/>' % ' '.join(path_d))
            y += hh + GAP
    # time axis
    span = t1 - t0
    tick = 10 ** max(0, len(str(int(span / 5))) - 1)
    while span / tick > 10:
        tick *= 2
    axis = ['<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555"/>' % (LEFT, y, width - 20, y)]
    t = 0.0
    while t <= span + 1e-9:
        x = LEFT + t * scale
        axis.append('<line x1="%.2f" y1="%d" x2="%.2f" y2="%d" stroke="#555"/>' % (x, y, x, y + 5))
        label = ('%g ms' % round(t / 1000, 3)) if span >= 2000 else ('%g us' % round(t, 1))
        axis.append('<text x="%.2f" y="%d" class="small" text-anchor="middle">%s</text>' % (x, y + 17, label))
        t += tick
    y += 28
    legend, lx = [], LEFT
    for cat in [c for c in COLORS if c in cats]:
        legend.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/>' % (lx, y, COLORS[cat]))
        legend.append('<text x="%d" y="%d" class="small">%s</text>' % (lx + 16, y + 10, cat))
        lx += 24 + 7 * len(cat)
    y += 24
    head = title or 'step %d of %d, %s' % (k, nsteps, fmt_us(span))
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="DejaVu Sans, Helvetica, Arial, sans-serif">' % (width, y, width, y),
           '<style>.row{font-size:12px;fill:#222}.ev{font-size:10px;fill:#fff;pointer-events:none}'
           '.small{font-size:10px;fill:#444}.title{font-size:15px;font-weight:bold;fill:#222}</style>',
           '<rect width="100%" height="100%" fill="#ffffff"/>',
           '<text x="8" y="24" class="title">%s</text>' % escape(head),
           '<text x="8" y="40" class="small">%s</text>' % escape('%s: rows are threads and tracks, boxes nest by depth; '
                                                                  'hover a box for its duration and args' % path.split('/')[-1])]
    svg += parts + axis + legend + ['</svg>']
    with open(out, 'w') as f:
        f.write('\n'.join(svg) + '\n')
    return len(inside), len(keys)


def main(argv):
    args, trace, out, k, width, title = argv[1:], None, None, None, 1200, None
    i = 0
    try:
        while i < len(args):
            a = args[i]
            if a in ('-o', '--out'):
                out = args[i + 1]; i += 2
            elif a == '--step':
                k = int(args[i + 1]); i += 2
            elif a == '--width':
                width = int(args[i + 1]); i += 2
            elif a == '--title':
                title = args[i + 1]; i += 2
            elif a in ('-h', '--help'):
                print(__doc__); return 0
            elif a.startswith('-') or trace is not None:
                raise ValueError(a)
            else:
                trace = a; i += 1
    except (IndexError, ValueError) as ex:
        print('usage: trace_svg.py TRACE.json -o OUT.svg [--step K] [--width PX] [--title TEXT]\n'
              'trace_svg.py: error: bad argument %s' % ex, file=sys.stderr)
        return 2
    if trace is None or out is None or width < 400:
        print('usage: trace_svg.py TRACE.json -o OUT.svg [--step K] [--width PX >= 400] [--title TEXT]', file=sys.stderr)
        return 2
    n, rows = draw(trace, out, k, width, title)
    print('trace_svg: %s: %d events on %d rows' % (out, n, rows))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
