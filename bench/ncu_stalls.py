#!/usr/bin/env python3
"""bench/ncu_stalls.py: where a kernel's warps stall, loop by loop.

Reads the per-instruction table that Nsight Compute prints for a report
taken with the SourceCounters section,

    ncu --section SourceCounters -k regex:NAME -c 1 -o rep BINARY ARGS
    ncu --import rep.ncu-rep --page source --csv --print-source sass > src.csv
    python3 bench/ncu_stalls.py src.csv

and, for every loop of the kernel (a branch back to a lower address and the
instructions it spans; offsets from the kernel's first instruction, as
bench/sass_loops.py prints them from cuobjdump), lists its share of the warp
samples, the opcodes that hold them and the stall reasons, then the
instructions with the most samples. What it is for: telling which part of a
key loop the warps wait in (a product's wait, the softmax's exponentials,
a named barrier) before changing it (bench/RESULTS.md, session 34).

Options: --loop LO:HI takes that offset range (hex) instead of the loops
found; --top N lists N instructions a loop (default 12); --min N skips
loops of fewer samples (default 1% of the kernel's).
"""
import collections
import csv
import re
import sys


def load(path):
    """[(offset, sass text, samples, {stall reason: samples})]"""
    rows = list(csv.reader(open(path)))
    hdr = None
    out = []
    base = None
    for r in rows:
        if len(r) > 2 and r[0] == 'Address':
            hdr = r
            continue
        if hdr is None or len(r) != len(hdr):
            continue
        try:
            a = int(r[0], 16)
        except ValueError:
            continue
        if base is None:
            base = a
        d = dict(zip(hdr, r))
        stalls = {k[len('stall_'):]: int(d[k] or 0) for k in hdr
                  if k.startswith('stall_') and '(Not Issued)' not in k}
        out.append((a - base, d['Source'].strip(), int(d.get('Warp Stall Sampling (All Samples)') or 0), stalls, base))
    return out


def opcode(src):
    """the opcode of a SASS line, its predicate dropped (DEPBAR keeps its operand)"""
    t = src.split()
    if t and t[0].startswith('@'):
        t = t[1:]
    if not t:
        return '?'
    if 'DEPBAR' in t[0]:   # which wait: its group count
        return t[0] + ' ' + ' '.join(t[1:]).rstrip(' ;')
    return t[0].split('.')[0]


def loops(ins):
    """(lo, hi) offset ranges of the backward branches, outermost last"""
    found = []
    for off, src, _, _, base in ins:
        m = re.search(r'\bBRA\s+(?:`\()?(0x[0-9a-f]+)', src)
        if m:
            tgt = int(m.group(1), 16)
            tgt = tgt - base if tgt >= base else tgt
            if tgt < off:
                found.append((tgt, off))
    return sorted(set(found), key=lambda x: x[1] - x[0])


def report(ins, lo, hi, top, total):
    seg = [x for x in ins if lo <= x[0] <= hi]
    n = sum(x[2] for x in seg)
    print('loop 0x%x-0x%x: %d instructions, %d samples (%.1f%% of the kernel)' %
          (lo, hi, len(seg), n, 100.0 * n / max(total, 1)))
    ops, cnt = collections.Counter(), collections.Counter()
    why = collections.Counter()
    for _, src, s, st, _ in seg:
        ops[opcode(src)] += s
        cnt[opcode(src)] += 1
        why.update(st)
    print('  by opcode: ' + ', '.join('%s %.1f%% (%d)' % (o, 100.0 * s / max(n, 1), cnt[o])
                                       for o, s in ops.most_common(10)))
    print('  by reason: ' + ', '.join('%s %.1f%%' % (k, 100.0 * v / max(n, 1))
                                       for k, v in why.most_common(8) if v))
    for off, src, s, st, _ in sorted(seg, key=lambda x: -x[2])[:top]:
        r = sorted(st.items(), key=lambda kv: -kv[1])[:2]
        print('  %6x %6d  %-58s %s' % (off, s, src[:58], ' '.join('%s:%d' % kv for kv in r if kv[1])))


def main(argv):
    args, top, rng, mn = [], 12, None, None
    i = 0
    while i < len(argv):
        if argv[i] == '--top':
            top = int(argv[i + 1]); i += 2
        elif argv[i] == '--loop':
            a, b = argv[i + 1].split(':'); rng = (int(a, 16), int(b, 16)); i += 2
        elif argv[i] == '--min':
            mn = int(argv[i + 1]); i += 2
        else:
            args.append(argv[i]); i += 1
    if len(args) != 1:
        sys.stderr.write(__doc__)
        return 2
    ins = load(args[0])
    if not ins:
        sys.stderr.write('ncu_stalls: no instruction rows in %s\n' % args[0])
        return 1
    total = sum(x[2] for x in ins)
    print('kernel: %d instructions, %d samples' % (len(ins), total))
    if rng:
        report(ins, rng[0], rng[1], top, total)
        return 0
    mn = total // 100 if mn is None else mn
    for lo, hi in loops(ins):
        if sum(x[2] for x in ins if lo <= x[0] <= hi) >= mn:
            report(ins, lo, hi, top, total)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
