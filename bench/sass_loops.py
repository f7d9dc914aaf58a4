#!/usr/bin/env python3
"""bench/sass_loops.py: the instruction mix of each loop of a kernel's SASS.

Reads the text that `cuobjdump -sass BINARY` or `nvdisasm -c CUBIN` prints
and, for every kernel whose name holds each of the given substrings, lists
its loops (a backward branch and the instructions it spans) with their
instruction count and the most frequent opcodes. What it is for: checking a
pipeline change at the instruction level before timing it, e.g. that a key
loop moves no wgmma descriptors through vector registers (R2UR) or spills
(LDL/STL) (bench/RESULTS.md, session 26), or how many instructions a score
the softmax issues.

    cuobjdump -sass build/bench/bench_fwd > fwd.sass
    python3 bench/sass_loops.py fwd.sass FWD_BF16_128 NOMASK SM90A
    python3 bench/sass_loops.py --ops R2UR,LDL,HGMMA,MUFU fwd.sass FWD_FP8

Options: --ops A,B,... prints those opcodes' counts (an opcode's first dot
component: HGMMA covers HGMMA.64x128x16.F32.BF16); --top N the N most
frequent (default 12); --min N skips loops of fewer instructions (default
32). A loop's count is static: code it branches over (the mask of a
mask-free tile) is counted though it may not run.
"""
import re
import sys


def parse(path):
    """{kernel: [(address, instruction)]} and {kernel: {label: address}}."""
    funcs, labels = {}, {}
    cur, pending = None, []
    with open(path) as f:
        for line in f:
            s = line.strip()
            m = re.match(r'\.text\.(\S+):$', s) or re.match(r'Function : (\S+)$', s)
            if m:
                cur = m.group(1)
                funcs[cur], labels[cur], pending = [], {}, []
                continue
            m = re.match(r'(\.L_x_\d+):', s)
            if m:
                pending.append(m.group(1))
                continue
            m = re.search(r'/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;', line)
            if m and cur:
                addr = int(m.group(1), 16)
                for lab in pending:
                    labels[cur][lab] = addr
                pending = []
                funcs[cur].append((addr, m.group(2)))
    return funcs, labels


def opcode(ins):
    words = ins.split()
    if words and words[0].startswith('@'):   # predicate
        words = words[1:]
    return words[0].split('.')[0] if words else ''


def loops(ins, labels):
    """(start, end) of every backward branch: to a label (nvdisasm) or an address (cuobjdump)."""
    out = []
    for addr, text in ins:
        if 'BRA' not in text:
            continue
        m = re.search(r'\((\.L_x_\d+)\)', text)
        target = labels.get(m.group(1)) if m else None
        if target is None:
            m = re.search(r'BRA\S*\s+(?:\S+,\s*)?(0x[0-9a-f]+)', text)
            target = int(m.group(1), 16) if m else None
        if target is not None and target < addr:
            out.append((target, addr))
    return out


def main(argv):
    ops, top, minimum, args = [], 12, 32, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == '--ops':
            ops = argv[i + 1].split(',')
            i += 2
        elif a == '--top':
            top = int(argv[i + 1])
            i += 2
        elif a == '--min':
            minimum = int(argv[i + 1])
            i += 2
        else:
            args.append(a)
            i += 1
    if not args:
        print(__doc__)
        return 2
    funcs, labels = parse(args[0])
    keys = args[1:]
    found = 0
    for name, ins in funcs.items():
        if not all(k in name for k in keys):
            continue
        found += 1
        print(name)
        for start, end in loops(ins, labels[name]):
            body = [t for a, t in ins if start <= a <= end]
            if len(body) < minimum:
                continue
            hist = {}
            for t in body:
                op = opcode(t)
                hist[op] = hist.get(op, 0) + 1
            line = '  loop 0x%x-0x%x: %d instructions' % (start, end, len(body))
            if ops:
                line += '; ' + ' '.join('%s %d' % (o, hist.get(o, 0)) for o in ops)
            print(line)
            print('    ' + ' '.join('%s %d' % kv for kv in sorted(hist.items(), key=lambda kv: -kv[1])[:top]))
    if not found:
        print('sass_loops: no kernel name holds %s' % ' and '.join(keys), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
