#!/usr/bin/env python3
"""ucf_features_test.py: jobs/ucf101_features.py on a few videos it generates (PyAV, MPEG-4 in AVI
as UCF101's, 64x48), with random weights. Run by tests/jobs.tests (jobs_ucf_features) with the
build's venv python; env B (build folder), MPIRUN (launcher), KEEP=1 keeps the temp folder.

Checks: 1. a run writes features/<Class>/v_*.ucff for every listed video with T = the video's
frames and F = 2048 and byte copies of the lists; eager-train (1 rank) reads them and trains an
epoch; 2. after one file is removed, a rerun extracts that one and leaves the others untouched
(inode, mtime); 3. other settings on the same folder are refused, naming ucf101_features.json;
4. a run killed with SIGKILL in the middle of a long video leaves no .ucff of it (its .part is
there) and the rerun removes the .part and completes it; SIGTERM leaves no .part either (exit
143); 5. bad input exits 1 with one error line naming the file: a corrupt video (no file left
for it; --keep-going extracts the others), a missing split list, a class folder not in the lists.
Runs at --size 75 (the default 299 is checked through check 3's message); the extractor runs
in this process (torch loads once: seconds on a loaded machine) except for the kill tests.
Exit 0 pass, 1 fail (one line per failed check), 77 skip (no torch/torchvision/av)."""
import contextlib
import importlib.util
import io
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
B = os.environ.get('B', 'build')
EXTRACT = [sys.executable, os.path.join(ROOT, 'jobs', 'ucf101_features.py')]
FAILS = []
SPEC = importlib.util.spec_from_file_location('ucf101_features', EXTRACT[1])

try:
    import av
    import numpy as np
    import torch  # noqa: F401  (the extractor's; skip here rather than fail there)
    import torchvision  # noqa: F401
except ImportError as e:
    print(f'UCF101 FEATURES TEST NOT RUN: {sys.executable} lacks {e.name} (make deps-torch)')
    sys.exit(77)

CLASSES = ['ApplyEyeMakeup', 'Basketball']
FRAMES = {('ApplyEyeMakeup', 1): 2, ('ApplyEyeMakeup', 2): 3, ('Basketball', 1): 4, ('Basketball', 2): 5}
LONG_T = 200  # frames of the long video of the kill tests


T0 = time.time()


def check(ok, what):
    print(('ok   ' if ok else 'FAIL ') + f'{time.time() - T0:6.1f} s  ' + what)
    if not ok:
        FAILS.append(what)
    return ok


def vname(c, g):
    return f'v_{c}_g{g:02d}_c01'


def write_video(path, frames, seed):
    rng = np.random.default_rng(seed)
    with av.open(path, 'w', format='avi') as c:
        s = c.add_stream('mpeg4', rate=25)
        s.width, s.height, s.pix_fmt = 64, 48, 'yuv420p'
        for i in range(frames):
            img = (rng.random((48, 64, 3)) * 255).astype(np.uint8)
            img[:, : (i * 7) % 64] = 255 * (seed % 2)  # a moving edge: frames differ
            for p in s.encode(av.VideoFrame.from_ndarray(img, format='rgb24')):
                c.mux(p)
        for p in s.encode():
            c.mux(p)


def make_data(root, frames):
    """root/videos/<Class>/*.avi and root/lists/ (CRLF, as the official files): split 1 trains on
    g02 and tests on g01, splits 2 and 3 the other way round."""
    vids, lists = os.path.join(root, 'videos'), os.path.join(root, 'lists')
    os.makedirs(lists)
    for (c, g), n in frames.items():
        os.makedirs(os.path.join(vids, c), exist_ok=True)
        write_video(os.path.join(vids, c, vname(c, g) + '.avi'), n, 10 * CLASSES.index(c) + g)
    with open(os.path.join(lists, 'classInd.txt'), 'w', newline='') as f:
        f.write(''.join(f'{i + 1} {c}\r\n' for i, c in enumerate(CLASSES)))
    for s in (1, 2, 3):
        tr, te = (2, 1) if s == 1 else (1, 2)
        with open(os.path.join(lists, f'trainlist0{s}.txt'), 'w', newline='') as f:
            f.write(''.join(f'{c}/{vname(c, tr)}.avi {i + 1}\r\n' for i, c in enumerate(CLASSES)))
        with open(os.path.join(lists, f'testlist0{s}.txt'), 'w', newline='') as f:
            f.write(''.join(f'{c}/{vname(c, te)}.avi\r\n' for c in CLASSES))
    return vids, lists


def run(vids, lists, out, *extra, size='75'):
    """The extractor's main() in this process: (exit code, stderr) as subprocess.run's."""
    err = io.StringIO()
    rc = 0
    with contextlib.redirect_stderr(err):
        try:
            X.main(['--videos', vids, '--lists', lists, '--out', out, '--weights', 'random',
                    *(['--size', size] if size else []), *extra])
        except SystemExit as e:
            rc = e.code
    return subprocess.CompletedProcess([], rc, '', err.getvalue())


def ucff(path):
    """(T, F) of a valid UCFF file, else None."""
    with open(path, 'rb') as f:
        b = f.read()
    if len(b) < 16 or b[:4] != b'UCFF':
        return None
    v, T, F = struct.unpack('<3I', b[4:16])
    if v != 1 or len(b) != 16 + 4 * T * F:
        return None
    x = np.frombuffer(b[16:], dtype='<f4')
    return (T, F) if np.isfinite(x).all() and x.std() > 0 else None


def feats(out, c, g):
    return os.path.join(out, 'features', c, vname(c, g) + '.ucff')


def one_error(r, name, what):
    errs = [ln for ln in r.stderr.splitlines() if 'error:' in ln]
    check(r.returncode == 1 and len(errs) == 1 and name in errs[0],
          f'{what}: exit 1, one error line naming {name} (exit {r.returncode}: {errs or r.stderr[-300:]})')


def kill_in_long_video(vids, lists, out, sig):
    """Starts a run whose last video is the long one, sends sig once that video's .part has
    features in it (or, were the file written in place, the .ucff itself); returns (exit code,
    stderr)."""
    dst = feats(out, 'Basketball', 2)
    p = subprocess.Popen(EXTRACT + ['--videos', vids, '--lists', lists, '--out', out, '--weights',
                                    'random', '--size', '75', '--batch', '2'],
                         stderr=subprocess.PIPE, text=True)
    while p.poll() is None:
        if any(os.path.exists(f) and os.path.getsize(f) > 16 for f in (dst + '.part', dst)):
            p.send_signal(sig)
            break
        time.sleep(0.005)
    err = p.communicate()[1]
    return p.returncode, err


def main():
    global X
    X = importlib.util.module_from_spec(SPEC)
    SPEC.loader.exec_module(X)
    tmp = tempfile.mkdtemp(prefix='ucf_features.')
    try:
        t0 = time.time()
        vids, lists = make_data(os.path.join(tmp, 'd1'), FRAMES)
        out = os.path.join(tmp, 'out')

        # 1. every listed video, the lists; the trainer reads the files
        r = run(vids, lists, out)
        check(r.returncode == 0, f'extraction exits 0 (exit {r.returncode}: {r.stderr[-500:]})')
        for (c, g), n in FRAMES.items():
            p = feats(out, c, g)
            got = ucff(p) if os.path.exists(p) else None
            check(got == (n, 2048), f'{os.path.relpath(p, out)}: T={n} F=2048 (got {got})')
        names = ['classInd.txt'] + [f'{k}list0{s}.txt' for s in (1, 2, 3) for k in ('train', 'test')]
        check(all(open(os.path.join(lists, n), 'rb').read() == open(os.path.join(out, n), 'rb').read()
                  for n in names), 'the lists are copied byte for byte')
        check(not [f for _, _, fs in os.walk(out) for f in fs if f.endswith('.part')], 'no .part left')
        mpirun = os.environ.get('MPIRUN', 'mpirun').split()
        tr = subprocess.run(mpirun + ['-np', '1', os.path.join(B, 'bin', 'eager-train'), '--experiment',
                                      'ucf101', '--data-path', out, '--model',
                                      'lstm in=2048 hidden=8 steps=5 classes=2', '--epochs', '1',
                                      '--batch', '2', '--max-t', '5', '--out', os.path.join(tmp, 'run.json')],
                            capture_output=True, text=True)
        check(tr.returncode == 0 and os.path.exists(os.path.join(tmp, 'run.json')),
              f'eager-train trains an epoch on the features (exit {tr.returncode}: {tr.stderr[-500:]})')

        # 2. resume: only the missing file is extracted, the others untouched
        st = {p: (os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in (feats(out, c, g) for c, g in FRAMES)}
        os.remove(feats(out, 'Basketball', 1))
        del st[feats(out, 'Basketball', 1)]
        r = run(vids, lists, out)
        check(r.returncode == 0 and '1 extracted' in r.stderr and '3 already done' in r.stderr
              and ucff(feats(out, 'Basketball', 1)) == (4, 2048),
              f'a rerun extracts the one file missing (exit {r.returncode}: {r.stderr[-300:]})')
        check(all((os.stat(p).st_ino, os.stat(p).st_mtime_ns) == v for p, v in st.items()),
              'a rerun leaves the finished files untouched')

        # The kill tests signal once the long video's .part holds features (not after a time), so
        # a fixed length does at any speed: 200 frames are 100 batches of 2 after the first.
        long_t = LONG_T

        # 3. other settings refused; the default size is the paper's 299
        r = run(vids, lists, out, size=None)
        one_error(r, 'ucf101_features.json', 'a rerun at the default size')
        check('made with size = 75, this run has 299' in r.stderr, 'the default size is 299')

        # 4. killed in the middle of a long video
        vids2 = os.path.join(tmp, 'd1', 'videos2')
        shutil.copytree(vids, vids2)
        write_video(os.path.join(vids2, 'Basketball', vname('Basketball', 2) + '.avi'), long_t, 99)
        out2 = os.path.join(tmp, 'out2')
        rc, err = kill_in_long_video(vids2, lists, out2, signal.SIGKILL)
        long_f = feats(out2, 'Basketball', 2)
        check(rc == -signal.SIGKILL, f'SIGKILL landed in the long video (exit {rc}: {err[-300:]})')
        check(not os.path.exists(long_f) and os.path.exists(long_f + '.part'),
              'the killed run left the long video\'s .part, not its .ucff')
        check(ucff(feats(out2, 'Basketball', 1)) == (4, 2048), 'the videos before it are complete')
        r = run(vids2, lists, out2, '--batch', '2')
        check(r.returncode == 0 and '1 extracted' in r.stderr and ucff(long_f) == (long_t, 2048)
              and not os.path.exists(long_f + '.part'),
              f'the rerun completes the long video and removes its .part ({r.stderr[-300:]})')
        out3 = os.path.join(tmp, 'out3')
        rc, err = kill_in_long_video(vids2, lists, out3, signal.SIGTERM)
        left = [f for _, _, fs in os.walk(os.path.join(out3, 'features')) for f in fs]
        check(rc == 143 and vname('Basketball', 2) + '.ucff' not in left
              and not [f for f in left if f.endswith('.part')],
              f'SIGTERM: exit 143, no .part and no .ucff of the long video (exit {rc}, files {left})')

        # 5. bad input
        vids3 = os.path.join(tmp, 'd1', 'videos3')
        shutil.copytree(vids, vids3)
        bad = os.path.join(vids3, 'Basketball', vname('Basketball', 1) + '.avi')
        with open(bad, 'wb') as f:
            f.write(b'RIFF\x10\x00\x00\x00AVI LIST' + bytes(range(256)) * 4)
        out4 = os.path.join(tmp, 'out4')
        r = run(vids3, lists, out4)
        one_error(r, bad, 'a corrupt video')
        check(not os.path.exists(feats(out4, 'Basketball', 1))
              and not os.path.exists(feats(out4, 'Basketball', 1) + '.part'), 'no file for the corrupt video')
        r = run(vids3, lists, out4, '--keep-going')
        check(r.returncode == 1 and bad in r.stderr and '1 extracted' in r.stderr and '1 failed' in r.stderr
              and ucff(feats(out4, 'Basketball', 2)) == (5, 2048),
              f'--keep-going names it, extracts the others, exits 1 ({r.stderr[-300:]})')
        lists2 = os.path.join(tmp, 'd1', 'lists2')
        shutil.copytree(lists, lists2)
        os.remove(os.path.join(lists2, 'testlist02.txt'))
        r = run(vids, lists2, os.path.join(tmp, 'out5'))
        one_error(r, os.path.join(lists2, 'testlist02.txt'), 'a missing split list')
        r = run(vids, lists2, os.path.join(tmp, 'out5'), '--splits', '1')
        check(r.returncode == 0, f'--splits 1 does without split 2\'s lists (exit {r.returncode})')
        os.makedirs(os.path.join(vids3, 'Zebra'))
        r = run(vids3, lists, os.path.join(tmp, 'out6'))
        one_error(r, os.path.join(vids3, 'Zebra'), 'a class folder not in the lists')
        print(f'{len(FAILS)} failed checks, {time.time() - t0:.1f} s')
    finally:
        if os.environ.get('KEEP') == '1':
            print(f'kept {tmp}')
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 1 if FAILS else 0


if __name__ == '__main__':
    sys.exit(main())
