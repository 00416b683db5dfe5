#!/usr/bin/env python3
"""layers.py BUILD_DIR [--figures]: the code's layering, checked (docs/DESIGN.md#12-the-codes-shape).

Fails (exit 1, naming the file and what it reaches) when
  1. a product source includes a header of a folder it may not use: each folder's allowed folders
     are ALLOWED below (includes only downward; tests/ and jobs/ may include anything);
  2. the files of trainer/, controller/ or collectives/ call each other in a circle: a.c calls a
     function defined in b.c and b.c, directly or through others of the folder, calls a.c (read
     from the objects in BUILD_DIR with nm; sources no longer tracked are ignored).
--figures also prints lines and comment share per folder and the longest functions.
Needs python3, git and nm (binutils); run from anywhere inside the repository."""
import collections
import os
import re
import subprocess
import sys

ALLOWED = {  # folder -> the folders its sources may include (besides its own)
    'common': [],
    'collectives': ['common'],
    'collectives/sim': ['collectives', 'common'],
    'controller': ['collectives', 'common'],
    'trainer/nn': ['common'],
    'trainer/data': ['common'],
    'trainer/cuda': ['trainer/nn', 'common'],
    'trainer': ['trainer/nn', 'trainer/data', 'trainer/cuda', 'controller', 'collectives',
                'collectives/sim', 'common'],
    'trainer/ref': ['trainer/nn', 'collectives/sim', 'common'],
    'results': ['common'],
    'python/csrc': ['collectives', 'controller', 'trainer/nn', 'common'],
}
CIRCLE_FOLDERS = ['trainer', 'controller', 'collectives']
SRC = re.compile(r'\.(c|h|cu|cuh)$')


def tracked():
    out = subprocess.check_output(['git', 'ls-files'], text=True)
    return [f for f in out.split('\n') if SRC.search(f)]


def check_includes(files):
    bad = []
    for f in files:
        folder = os.path.dirname(f)
        if folder.split('/')[0] in ('tests', 'jobs'):
            continue
        if folder not in ALLOWED:
            bad.append(f'{f}: folder {folder} has no entry in tests/layers.py ALLOWED')
            continue
        for n, line in enumerate(open(f, errors='replace'), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m or '/' not in m.group(1):
                continue
            to = os.path.dirname(m.group(1))
            if to != folder and to not in ALLOWED[folder]:
                bad.append(f'{f}:{n}: includes {m.group(1)}: {folder}/ may include only '
                           f'{", ".join(ALLOWED[folder]) or "nothing outside itself"}')
    return bad


def circles(build, folder):
    objs = sorted(o for o in os.listdir(os.path.join(build, folder)) if o.endswith('.o'))
    objs = [o for o in objs if any(os.path.exists(os.path.join(folder, o[:-2] + e)) for e in ('.c', '.cu'))]
    defs, undef = {}, collections.defaultdict(set)
    for o in objs:
        for line in subprocess.check_output(['nm', os.path.join(build, folder, o)], text=True).splitlines():
            p = line.split()
            if len(p) == 3 and p[1] in 'TDBR':
                defs[p[2]] = o
            elif len(p) == 2 and p[0] == 'U':
                undef[o].add(p[1])
    calls = {o: {defs[u] for u in undef[o] if u in defs and defs[u] != o} for o in objs}
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in calls[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w[:-2])
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for o in objs:
        if o not in index:
            visit(o)
    return len(objs), found


def figures(files):
    for top in ['common', 'collectives', 'controller', 'trainer', 'results', 'tests']:
        fs = [f for f in files if f.split('/')[0] == top]
        text = ''.join(open(f, errors='replace').read() for f in fs)
        lines = text.count('\n')
        com = 0
        incom = False
        for line in text.split('\n'):
            s = line.strip()
            if incom or s.startswith('/*') or s.startswith('//') or '/*' in s:
                com += 1
            if '/*' in s and '*/' not in s.split('/*', 1)[1]:
                incom = True
            elif '*/' in s:
                incom = False
        print(f'{top:<12} {lines:6d} lines (C/CUDA), {100 * com // max(lines, 1):3d}% comment')
    longest = []
    for f in files:
        if not re.search(r'\.(c|cu)$', f) or f.split('/')[0] not in ('collectives', 'controller', 'trainer', 'results'):
            continue
        start = None
        for n, line in enumerate(open(f, errors='replace'), 1):
            if start is None and re.match(r'^[A-Za-z].*\)\s*\{\s*$', line) and not re.match(r'^(static )?(const )?(struct|enum|union) ', line):
                start, name = n, line.strip()[:70]
            elif start is not None and line.startswith('}'):
                longest.append((n - start + 1, f, name))
                start = None
    print('longest functions:')
    for n, f, name in sorted(longest, reverse=True)[:8]:
        print(f'  {n:4d} {f}: {name}')


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith('-'):
        print('usage: layers.py BUILD_DIR [--figures]', file=sys.stderr)
        return 2
    build = os.path.abspath(sys.argv[1])
    os.chdir(subprocess.check_output(['git', 'rev-parse', '--show-toplevel'], text=True).strip())
    files = tracked()
    bad = check_includes(files)
    for folder in CIRCLE_FOLDERS:
        if not os.path.isdir(os.path.join(build, folder)):
            bad.append(f'{build}/{folder}: no objects (build first: make build-all B={sys.argv[1]})')
            continue
        n, found = circles(build, folder)
        print(f'{folder}/: {n} files, {len(found)} circles of calls')
        for comp in found:
            bad.append(f'{folder}/: its files call each other in a circle: {" ".join(comp)}')
    if '--figures' in sys.argv:
        figures(files)
    for b in bad:
        print('FAIL:', b)
    if not bad:
        print('ok: every include goes to a folder ALLOWED lists; no circle of calls')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
