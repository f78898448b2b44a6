#!/usr/bin/env python3
"""tools/check_trace.py — checks a profiler trace against the Chrome trace-event format
(the JSON object form that Perfetto and chrome://tracing open) and against what a run must show.

usage: check_trace.py TRACE.json [--require SPEC]... [--overlap SPEC SPEC]...
                      [--own-thread SPEC SPEC]... [--counter NAME]... [--pid N] [--quiet]

Format (always checked; exit 1 with one line per finding):
  - the file is a JSON object with a "traceEvents" list (displayTimeUnit "ms" or "ns" when given);
  - every event is an object with a known phase "ph"; every event but "E" has a string "name";
    pid and tid are present and integers; "cat", when present, is a string; "args", when present,
    is an object;
  - timed events (all but "M") have a numeric ts >= 0; "X" events a numeric dur >= 0;
  - "C" counters have numeric args; "M" metadata is one of process_name / process_labels /
    process_sort_index / thread_name / thread_sort_index with the matching argument;
  - "B"/"E" pairs match per thread, and "X" events nest per thread: sorted by start (longer first),
    each event lies wholly inside the innermost open event it overlaps, or after it
    (a child within its parent's [ts, ts + dur]; 1 ns of rounding allowed).
What the run must show (the options):
  SPEC is CAT or CAT:NAME, NAME a regular expression matched against the whole event name
  ("op_backward", "optimizer:.*\\.step", "op:(matmul|linear|conv2d)").
  --require SPEC          some "X" event matches SPEC;
  --overlap A B           some event matching A overlaps in time some event matching B (same pid);
  --own-thread A B        events matching A run on a thread where no event matching B runs
                          (a DataLoader worker's loads, apart from the training loop's thread);
  --counter NAME          some "C" counter event is named NAME ("memory cpu");
  --pid N                 every event's pid is N (a distributed rank's file)."""
import json, re, sys

PHASES = set('BEXiIbneCMsftPONDSTpRcv') | {'(', ')'}
META = {'process_name': 'name', 'process_labels': 'labels', 'process_sort_index': 'sort_index',
        'thread_name': 'name', 'thread_sort_index': 'sort_index'}
EPS = 1.0e-3   # microseconds: timestamps carry nanoseconds


def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def spec_match(spec):
    cat, _, name = spec.partition(':')
    rx = re.compile(name) if name else None
    return lambda e: e.get('cat') == cat and (rx is None or rx.fullmatch(e.get('name', '')) is not None)


def check_format(doc, bad):
    if not isinstance(doc, dict) or not isinstance(doc.get('traceEvents'), list):
        bad.append('not a JSON object with a "traceEvents" list')
        return []
    if 'displayTimeUnit' in doc and doc['displayTimeUnit'] not in ('ms', 'ns'):
        bad.append('displayTimeUnit %r is neither "ms" nor "ns"' % (doc['displayTimeUnit'],))
    events = doc['traceEvents']
    for i, e in enumerate(events):
        where = 'event %d' % i
        if not isinstance(e, dict):
            bad.append('%s: not an object' % where)
            continue
        ph = e.get('ph')
        if ph not in PHASES:
            bad.append('%s: unknown phase %r' % (where, ph))
            continue
        if ph != 'E' and not isinstance(e.get('name'), str):
            bad.append('%s (%s): no string name' % (where, ph))
        where = 'event %d (%s %r)' % (i, ph, e.get('name'))
        for k in ('pid', 'tid'):
            if not isinstance(e.get(k), int) or isinstance(e.get(k), bool):
                bad.append('%s: %s missing or not an integer' % (where, k))
        if 'cat' in e and not isinstance(e['cat'], str):
            bad.append('%s: cat is not a string' % where)
        if 'args' in e and not isinstance(e['args'], dict):
            bad.append('%s: args is not an object' % where)
        if ph != 'M' and not (is_num(e.get('ts')) and e['ts'] >= 0):
            bad.append('%s: ts missing, not a number or negative' % where)
        if ph == 'X' and not (is_num(e.get('dur')) and e['dur'] >= 0):
            bad.append('%s: dur missing, not a number or negative' % where)
        if ph == 'C' and not (isinstance(e.get('args'), dict) and e['args'] and all(is_num(v) for v in e['args'].values())):
            bad.append('%s: a counter needs numeric args' % where)
        if ph == 'M':
            key = META.get(e.get('name'))
            if key is None:
                bad.append('%s: unknown metadata event' % where)
            elif not isinstance(e.get('args'), dict) or key not in e['args']:
                bad.append('%s: metadata without args.%s' % (where, key))
    return [e for e in events if isinstance(e, dict) and e.get('ph') in PHASES]


def check_nesting(events, bad):
    threads = {}
    for e in events:
        if e.get('ph') in ('X', 'B', 'E') and is_num(e.get('ts')):
            threads.setdefault((e.get('pid'), e.get('tid')), []).append(e)
    for (pid, tid), evs in threads.items():
        # B/E pairs become spans; an E without its B (or a B never closed) is an error
        spans, open_ = [], []
        for e in sorted([x for x in evs if x['ph'] in ('B', 'E')], key=lambda x: x['ts']):
            if e['ph'] == 'B':
                open_.append(e)
            elif not open_:
                bad.append('pid %s tid %s: "E" at ts %s closes nothing' % (pid, tid, e['ts']))
            else:
                b = open_.pop()
                spans.append((b['ts'], e['ts'] - b['ts'], b.get('name')))
        for b in open_:
            bad.append('pid %s tid %s: "B" %r at ts %s is never closed' % (pid, tid, b.get('name'), b['ts']))
        spans += [(e['ts'], e['dur'], e.get('name')) for e in evs if e['ph'] == 'X' and is_num(e.get('dur'))]
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for ts, dur, name in spans:
            end = ts + dur
            while stack and ts >= stack[-1][1] - EPS and not (dur == 0 and ts <= stack[-1][1]):
                stack.pop()
            if stack and end > stack[-1][1] + EPS:
                pts, pend, pname = stack[-1]
                bad.append('pid %s tid %s: %r [%.3f, %.3f] overlaps %r [%.3f, %.3f] without nesting in it'
                           % (pid, tid, name, ts, end, pname, pts, pend))
                continue
            stack.append((ts, end, name))


def main(argv):
    args, path = argv[1:], None
    reqs, overlaps, own, counters, pid, quiet = [], [], [], [], None, False
    i = 0
    try:
        while i < len(args):
            a = args[i]
            if a == '--require':
                reqs.append(args[i + 1]); i += 2
            elif a == '--overlap':
                overlaps.append((args[i + 1], args[i + 2])); i += 3
            elif a == '--own-thread':
                own.append((args[i + 1], args[i + 2])); i += 3
            elif a == '--counter':
                counters.append(args[i + 1]); i += 2
            elif a == '--pid':
                pid = int(args[i + 1]); i += 2
            elif a == '--quiet':
                quiet = True; i += 1
            elif a in ('-h', '--help'):
                print(__doc__); return 0
            elif a.startswith('-') or path is not None:
                raise ValueError(a)
            else:
                path = a; i += 1
    except (IndexError, ValueError) as ex:
        print('usage: check_trace.py TRACE.json [--require SPEC]... [--overlap A B]... [--own-thread A B]... [--counter NAME]... [--pid N]'
              '\ncheck_trace.py: error: bad argument %s' % ex, file=sys.stderr)
        return 2
    if path is None:
        print('usage: check_trace.py TRACE.json [options] (--help)', file=sys.stderr)
        return 2
    bad = []
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as ex:
        print('check_trace: %s: %s' % (path, ex))
        return 1
    events = check_format(doc, bad)
    check_nesting(events, bad)
    spans = [e for e in events if e.get('ph') == 'X' and is_num(e.get('ts')) and is_num(e.get('dur'))]
    for spec in reqs:
        if not any(spec_match(spec)(e) for e in spans):
            bad.append('no "X" event matches %s' % spec)
    for a, b in overlaps:
        ea = [e for e in spans if spec_match(a)(e)]
        eb = sorted([e for e in spans if spec_match(b)(e)], key=lambda e: e['ts'])
        hit = any(x['pid'] == y['pid'] and y['ts'] < x['ts'] + x['dur'] and x['ts'] < y['ts'] + y['dur']
                  for x in ea for y in eb)
        if not hit:
            bad.append('no event matching %s (%d) overlaps one matching %s (%d)' % (a, len(ea), b, len(eb)))
    for a, b in own:
        ta = {(e['pid'], e['tid']) for e in spans if spec_match(a)(e)}
        tb = {(e['pid'], e['tid']) for e in spans if spec_match(b)(e)}
        if not ta:
            bad.append('no event matches %s' % a)
        elif not (ta - tb):
            bad.append('every thread running %s also runs %s' % (a, b))
    for name in counters:
        if not any(e.get('ph') == 'C' and e.get('name') == name for e in events):
            bad.append('no "C" counter named %r' % name)
    if pid is not None:
        others = sorted({e.get('pid') for e in events} - {pid}, key=str)
        if others:
            bad.append('events with pid %s, expected only %d' % (others, pid))
    for b in bad[:50]:
        print('check_trace: %s: %s' % (path, b))
    if len(bad) > 50:
        print('check_trace: %s: ... %d findings in all' % (path, len(bad)))
    if bad:
        return 1
    if not quiet:
        cats = {}
        for e in spans:
            cats[e.get('cat')] = cats.get(e.get('cat'), 0) + 1
        nthreads = len({(e['pid'], e['tid']) for e in spans})
        print('check_trace: %s: OK: %d events (%d spans on %d threads: %s; %d counters)'
              % (path, len(events), len(spans), nthreads, ', '.join('%s %d' % kv for kv in sorted(cats.items())),
                 sum(1 for e in events if e.get('ph') == 'C')))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
