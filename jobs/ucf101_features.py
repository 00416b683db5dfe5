#!/usr/bin/env python3
"""ucf101_features.py: per-frame Inception-v3 features of the UCF101 videos, in the form
jobs/ucf101.sbatch (eager-train --experiment ucf101) reads.

    jobs/ucf101_features.py --videos UCF-101 --lists ucfTrainTestlist --out DATA [options]

Reads  VIDEOS/<Class>/v_<Class>_gGG_cCC.avi  (the official UCF101.rar unpacked) and
       LISTS/classInd.txt, LISTS/trainlist0N.txt, LISTS/testlist0N.txt  (UCF101TrainTestSplits-
       RecognitionTask.zip unpacked), N in --splits.
Writes DATA/classInd.txt and the split lists (byte copies) and, for every video the lists name,
       DATA/features/<Class>/v_<...>.ucff: UCFF version 1 (trainer/data/README.md, "Formats"):
       "UCFF", uint32 1, uint32 T (frames kept), uint32 F (2048), float32 x[T][F], little-endian;
       DATA/ucf101_features.json: the settings the features were made with.
Model: torchvision's Inception-v3, the 2048-d output of its last average pool (the classifier
       removed) for every frame (--frame-step K: every K-th frame, from the first). A frame is
       scaled (bilinear, antialiased) so its shorter side is round(S*342/299), centre-cropped to SxS
       (S = --size, 299 as in the paper) and normalised with the ImageNet mean/std: the eval
       transform of torchvision's Inception_V3_Weights.IMAGENET1K_V1 (which also remaps the input to
       the [-1, 1] range the Google weights expect).
Weights (--weights): `imagenet` (default): torchvision's IMAGENET1K_V1, downloaded on first use into
       $TORCH_HOME/hub/checkpoints/ (default ~/.cache/torch), read from there afterwards; on compute
       nodes without internet run `--fetch-weights` once on a machine with internet and the same
       TORCH_HOME (a shared file system), or pass the downloaded .pth file (FILE). `random`: a
       randomly initialised network (seeded by --seed), for tests only.
Decoding: PyAV (FFmpeg) on the CPU, one thread one video ahead of the network; frames go to the
       GPU in batches of --batch when there is one (--device auto), float32 throughout (TF32 off).
Resumable: a video whose .ucff exists is skipped; each file is written as <name>.ucff.part and
       renamed when complete, so a killed run leaves no partial .ucff (a leftover .part is removed
       by the next run). A rerun with other settings (weights, size, frame step) is refused.
       One run at a time per DATA (a lock file, DATA/.ucf101_features.lock).
Errors: one line naming the file (a missing or malformed list, a listed video not found, a class
       folder of VIDEOS that classInd.txt lacks, a video FFmpeg cannot decode or with no frames)
       and exit 1; the first undecodable video stops the run unless --keep-going (each named, exit
       1 at the end). Exit 2: bad arguments. Interrupted (SIGINT/SIGTERM/SIGHUP): the current
       .part removed, exit 130/143/129.
Needs: torch, torchvision, numpy, av (PyAV) -- all in the build's venv, build/venv/bin/python3
       (make deps-torch).
"""
import argparse
import errno
import fcntl
import json
import os
import queue
import shutil
import signal
import struct
import sys
import threading
import time

PROG = 'ucf101_features'
F_DIM = 2048  # Inception-v3's last pool


class Bad(Exception):
    """Bad input: the message is the one line to print (it names the file)."""


def die(msg, code=1):
    sys.stderr.write(f'{PROG}: error: {msg}\n')
    sys.exit(code)


# ---------------------------------------------------------------- the lists

def read_lines(path):
    try:
        with open(path, 'rb') as f:
            data = f.read()
    except FileNotFoundError:
        raise Bad(f'{path}: split list not found')
    except OSError as e:
        raise Bad(f'{path}: cannot read: {e.strerror}')
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as e:
        raise Bad(f'{path}: not text (byte offset {e.start})')
    return [ln.strip() for ln in text.split('\n')]


def parse_classind(path):
    """classInd.txt: "1 ApplyEyeMakeup" ... 1-based, in order. Returns [names]."""
    names = []
    for n, ln in enumerate(read_lines(path), 1):
        if not ln:
            continue
        parts = ln.split()
        if len(parts) != 2 or parts[0] != str(len(names) + 1) or '/' in parts[1]:
            raise Bad(f'{path}: line {n}: expected "{len(names) + 1} ClassName", got "{ln}"')
        names.append(parts[1])
    if not names:
        raise Bad(f'{path}: no classes')
    return names


def parse_split(path, classes, train):
    """trainlist: "Class/v_....avi LABEL" (LABEL = the class's classInd index); testlist:
    "Class/v_....avi". Returns [(Class, file name)]."""
    index = {c: i + 1 for i, c in enumerate(classes)}
    out = []
    for n, ln in enumerate(read_lines(path), 1):
        if not ln:
            continue
        parts = ln.split()
        if len(parts) != (2 if train else 1) or parts[0].count('/') != 1:
            want = '"Class/v_....avi LABEL"' if train else '"Class/v_....avi"'
            raise Bad(f'{path}: line {n}: expected {want}, got "{ln}"')
        cls, name = parts[0].split('/')
        if cls not in index:
            raise Bad(f'{path}: line {n}: class "{cls}" is not in classInd.txt')
        if not name or name.startswith('.'):
            raise Bad(f'{path}: line {n}: bad video name "{name}"')
        if train and parts[1] != str(index[cls]):
            raise Bad(f'{path}: line {n}: label {parts[1]} but class {cls} is {index[cls]} in classInd.txt')
        out.append((cls, name))
    return out


def list_file(lists, name):
    """LISTS/name (or LISTS/ucfTrainTestlist/name, as the official zip unpacks)."""
    p = os.path.join(lists, name)
    alt = os.path.join(lists, 'ucfTrainTestlist', name)
    return alt if not os.path.exists(p) and os.path.exists(alt) else p


def plan(args):
    """Checks the lists and the video folder. Returns (list files to copy, [(Class, video name)])."""
    ci = list_file(args.lists, 'classInd.txt')
    classes = parse_classind(ci)
    copies, videos = [ci], set()
    for s in args.splits:
        for kind in ('train', 'test'):
            p = list_file(args.lists, f'{kind}list{s:02d}.txt')
            videos.update(parse_split(p, classes, kind == 'train'))
            copies.append(p)
    if not os.path.isdir(args.videos):
        raise Bad(f'{args.videos}: video folder not found')
    known = set(classes)
    for d in sorted(os.listdir(args.videos)):
        if not d.startswith('.') and os.path.isdir(os.path.join(args.videos, d)) and d not in known:
            raise Bad(f'{os.path.join(args.videos, d)}: class folder not in {ci}')
    videos = sorted(videos)
    for cls, name in videos:
        p = os.path.join(args.videos, cls, name)
        if not os.path.isfile(p):
            raise Bad(f'{p}: listed in the split lists but not found')
    return copies, videos


def ucff_name(out, cls, name):
    stem = name[:-4] if name.endswith('.avi') else name
    return os.path.join(out, 'features', cls, stem + '.ucff')


def copy_atomic(src, dst):
    tmp = dst + '.part'
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


# ---------------------------------------------------------------- the model

def fetch_imagenet():
    """Downloads torchvision's Inception-v3 IMAGENET1K_V1 into $TORCH_HOME (or reads it from
    there). Returns the state dict; Bad with the URL when it cannot."""
    from torchvision.models import Inception_V3_Weights
    w = Inception_V3_Weights.IMAGENET1K_V1
    try:
        return w.get_state_dict(progress=sys.stderr.isatty(), check_hash=True)
    except Exception as e:  # URLError, OSError, RuntimeError (hash): all mean "not available"
        import torch.hub
        raise Bad(f'cannot get the pretrained Inception-v3 weights {w.url} into {torch.hub.get_dir()}/'
                  f'checkpoints: {e} (on a machine with internet run jobs/ucf101_features.py --fetch-weights with '
                  f'the same TORCH_HOME, or pass the .pth file as --weights FILE)')


def build_model(args, device):
    """Inception-v3 without its classifier: x [n,3,S,S] normalised -> [n,2048]."""
    import torch
    import torchvision
    if args.weights == 'random':
        torch.manual_seed(args.seed)
        m = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=True)
        desc = f'random (seed {args.seed})'
    else:
        if args.weights == 'imagenet':
            sd, desc = fetch_imagenet(), 'imagenet (torchvision IMAGENET1K_V1)'
        else:
            try:
                sd = torch.load(args.weights, map_location='cpu', weights_only=True)
            except Exception as e:
                raise Bad(f'{args.weights}: cannot load as an Inception-v3 state dict: {e}')
            desc = f'file {os.path.abspath(args.weights)}'
        m = torchvision.models.inception_v3(weights=None, aux_logits=True, transform_input=True,
                                            init_weights=False)
        want = m.state_dict()
        if not isinstance(sd, dict):
            raise Bad(f'{args.weights}: not a state dict ({type(sd).__name__})')
        missing, extra = sorted(set(want) - set(sd)), sorted(set(sd) - set(want))
        shape = [k for k in want if k in sd and tuple(getattr(sd[k], 'shape', ())) != tuple(want[k].shape)]
        if missing or extra or shape:
            raise Bad(f'{args.weights}: not torchvision Inception-v3 weights: {len(missing)} tensors missing'
                      f'{" (" + missing[0] + ", ...)" if missing else ""}, {len(extra)} unknown'
                      f'{" (" + extra[0] + ", ...)" if extra else ""}, {len(shape)} of another shape'
                      f'{" (" + shape[0] + ")" if shape else ""}')
        m.load_state_dict(sd)
        m.aux_logits, m.AuxLogits = False, None
    m.fc = torch.nn.Identity()
    return m.eval().to(device), desc


def preprocess(x, size, device):
    """x: uint8 [n,H,W,3] (CPU) -> float32 [n,3,S,S] on device: shorter side to round(S*342/299)
    (bilinear, antialiased), centre crop S, ImageNet mean/std."""
    import torch
    import torch.nn.functional as F
    t = torch.from_numpy(x)
    if device.type == 'cuda':
        t = t.pin_memory().to(device, non_blocking=True)
    t = t.permute(0, 3, 1, 2).float().div_(255)
    h, w = t.shape[2], t.shape[3]
    short = round(size * 342 / 299)
    nh, nw = (short, max(size, round(w * short / h))) if h <= w else (max(size, round(h * short / w)), short)
    t = F.interpolate(t, size=(nh, nw), mode='bilinear', align_corners=False, antialias=True)
    top, left = (nh - size) // 2, (nw - size) // 2
    t = t[:, :, top:top + size, left:left + size]
    mean = torch.tensor([0.485, 0.456, 0.406], device=device).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225], device=device).view(1, 3, 1, 1)
    return ((t - mean) / std).contiguous()


# ---------------------------------------------------------------- decoding

def decode(path, step, batch, put, stop):
    """Puts ('chunk', uint8 [n,H,W,3]) for every `batch` kept frames of the video at path; returns
    the number of frames kept. Bad when FFmpeg cannot open or decode it or it has no frames."""
    import av
    import numpy as np
    kept, buf, shape = 0, [], None
    try:
        with av.open(path) as c:
            if not c.streams.video:
                raise Bad(f'{path}: no video stream')
            vs = c.streams.video[0]
            vs.thread_type = 'AUTO'
            for i, fr in enumerate(c.decode(vs)):
                if stop.is_set():
                    return kept
                if i % step:
                    continue
                if shape is None:
                    shape = (fr.width, fr.height)
                elif (fr.width, fr.height) != shape:  # a size change mid-stream: keep the first
                    fr = fr.reformat(width=shape[0], height=shape[1])
                buf.append(fr.to_ndarray(format='rgb24'))
                kept += 1
                if len(buf) == batch:
                    put(('chunk', np.stack(buf)))
                    buf = []
    except av.FFmpegError as e:
        raise Bad(f'{path}: cannot decode: {e}')
    except OSError as e:
        raise Bad(f'{path}: cannot read: {e.strerror or e}')
    if buf:
        put(('chunk', np.stack(buf)))
    if kept == 0:
        raise Bad(f'{path}: no video frames decoded')
    return kept


def producer(jobs, args, q, stop):
    """Decodes the videos of jobs in order: per video its chunks, then ('end', T) or ('bad', msg)."""
    def put(item):
        while not stop.is_set():
            try:
                q.put(item, timeout=0.5)
                return
            except queue.Full:
                pass
    for src, _ in jobs:
        if stop.is_set():
            return
        try:
            put(('end', decode(src, args.frame_step, args.batch, put, stop)))
        except Bad as e:
            put(('bad', str(e)))
        except Exception as e:  # anything else PyAV or numpy raises about this file
            put(('bad', f'{src}: cannot decode: {type(e).__name__}: {e}'))


# ---------------------------------------------------------------- progress

class Progress:
    """One line on stderr: videos done of total, frames/s, ETA; redrawn in place on a terminal,
    a plain line every 30 s otherwise."""

    def __init__(self, total):
        self.total, self.done, self.frames, self.t0, self.last = total, 0, 0, time.time(), 0.0
        self.tty = sys.stderr.isatty()

    def update(self, frames=0, video=False, final=False):
        self.frames += frames
        self.done += int(video)
        now = time.time()
        if not final and now - self.last < (0.25 if self.tty else 30):
            return
        self.last = now
        el = max(now - self.t0, 1e-9)
        eta = (el / self.done * (self.total - self.done)) if self.done else 0
        width = 30
        fill = width * self.done // max(self.total, 1)
        line = (f'[{"#" * fill}{"." * (width - fill)}] {self.done}/{self.total} videos, '
                f'{self.frames} frames, {self.frames / el:.1f} frames/s, '
                f'{"ETA " + time.strftime("%H:%M:%S", time.gmtime(eta)) if self.done < self.total else "done"}')
        sys.stderr.write(('\r' + line + ('\n' if final else '') if self.tty else line + '\n'))
        sys.stderr.flush()


# ---------------------------------------------------------------- main

def parse_args(argv):
    ap = argparse.ArgumentParser(prog='ucf101_features.py', description=__doc__.split('\n\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog='\n'.join(__doc__.split('\n')[3:]))
    ap.add_argument('--videos', help='UCF101 video root: <Class>/v_*.avi')
    ap.add_argument('--lists', help='folder of classInd.txt, trainlist0N.txt, testlist0N.txt '
                    '(or its ucfTrainTestlist/)')
    ap.add_argument('--out', help='data folder to write (DATA of jobs/ucf101.sbatch)')
    ap.add_argument('--splits', default='1,2,3', help='official splits whose lists are read and '
                    'copied (default 1,2,3); the videos extracted are those the lists name (each '
                    'official split names all 13,320)')
    ap.add_argument('--weights', default='imagenet', help='imagenet (default) | random | FILE (.pth)')
    ap.add_argument('--seed', type=int, default=1, help='seed of --weights random (default 1)')
    ap.add_argument('--size', type=int, default=299,
                    help='network input SxS (default 299, the paper\'s; >= 75, smaller only for tests)')
    ap.add_argument('--frame-step', type=int, default=1, help='keep every K-th frame (default 1: all)')
    ap.add_argument('--batch', type=int, default=64, help='frames per forward pass (default 64)')
    ap.add_argument('--device', default='auto', help='auto (cuda when torch sees a GPU) | cpu | cuda[:N]')
    ap.add_argument('--keep-going', action='store_true', help='on an undecodable video: name it, go on, '
                    'exit 1 at the end')
    ap.add_argument('--fetch-weights', action='store_true',
                    help='only download the imagenet weights into $TORCH_HOME and exit')
    a = ap.parse_args(argv)
    if a.fetch_weights:
        return a
    for k in ('videos', 'lists', 'out'):
        if not getattr(a, k):
            ap.error(f'--{k} is required')
    try:
        a.splits = sorted({int(s) for s in a.splits.split(',')})
        if not a.splits or a.splits[0] < 1 or a.splits[-1] > 9:
            raise ValueError
    except ValueError:
        ap.error(f'--splits {a.splits}: want a comma list of split numbers 1..9')
    if a.size < 75:
        ap.error(f'--size {a.size}: Inception-v3 needs at least 75')
    if a.frame_step < 1 or a.batch < 1:
        ap.error('--frame-step and --batch must be >= 1')
    if a.weights not in ('imagenet', 'random') and not os.path.isfile(a.weights):
        ap.error(f'--weights {a.weights}: not imagenet, random, or an existing file')
    return a


def settings_check(path, want):
    """Refuses to resume features made with other settings (Bad naming the file)."""
    if os.path.exists(path):
        try:
            with open(path) as f:
                have = json.load(f)
        except (OSError, ValueError) as e:
            raise Bad(f'{path}: unreadable settings record: {e}')
        diff = [k for k in want if have.get(k) != want[k]]
        if diff:
            k = diff[0]
            raise Bad(f'{path}: the features here were made with {k} = {have.get(k)!r}, this run has '
                      f'{want[k]!r}: use another --out, or the same settings to resume')
        return
    tmp = path + '.part'
    with open(tmp, 'w') as f:
        json.dump(want, f, indent=1)
        f.write('\n')
    os.replace(tmp, path)


class Interrupted(BaseException):
    def __init__(self, sig):
        self.sig = sig


def on_signal(sig, _frame):
    raise Interrupted(sig)


def take_lock(out):
    """An exclusive lock on out/.ucf101_features.lock, held while the returned file is open."""
    lock = open(os.path.join(out, '.ucf101_features.lock'), 'w')
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        lock.close()
        if e.errno in (errno.EAGAIN, errno.EACCES):
            raise Bad(f'{lock.name}: another {PROG} run writes into {out}')
        raise
    return lock


def extract(args):
    copies, videos = plan(args)  # bad lists and folders are named before torch loads (seconds)
    os.makedirs(args.out, exist_ok=True)
    lock = take_lock(args.out)
    try:
        extract_videos(args, copies, videos)
    finally:
        lock.close()


def extract_videos(args, copies, videos):
    import numpy as np
    import torch
    if args.device == 'auto':
        device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    else:
        try:
            device = torch.device(args.device)
        except RuntimeError:
            raise Bad(f'--device {args.device}: not auto, cpu or cuda[:N]')
        if device.type == 'cuda' and not torch.cuda.is_available():
            raise Bad(f'--device {args.device}: torch sees no CUDA GPU')
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    weights_desc = {'imagenet': 'imagenet:IMAGENET1K_V1', 'random': f'random:seed={args.seed}'}
    settings_check(os.path.join(args.out, 'ucf101_features.json'), {
        'format': 'UCFF 1', 'model': 'torchvision inception_v3, last average pool', 'features': F_DIM,
        'weights': weights_desc.get(args.weights, 'file:' + os.path.basename(args.weights)),
        'size': args.size, 'resize_shorter_side': round(args.size * 342 / 299),
        'frame_step': args.frame_step})
    for src in copies:
        copy_atomic(src, os.path.join(args.out, os.path.basename(src)))
    jobs, done = [], 0
    for cls, name in videos:
        dst = ucff_name(args.out, cls, name)
        if os.path.exists(dst + '.part'):
            os.remove(dst + '.part')  # a killed run's (the lock says none runs now)
        if os.path.exists(dst):
            done += 1
        else:
            jobs.append((os.path.join(args.videos, cls, name), dst))
    model, desc = build_model(args, device)
    sys.stderr.write(f'{PROG}: {len(videos)} videos in the lists of splits '
                     f'{",".join(map(str, args.splits))}: {done} already done, {len(jobs)} to extract; '
                     f'Inception-v3 {desc}, {args.size}x{args.size}, on {device}\n')
    prog = Progress(len(jobs))
    q, stop = queue.Queue(maxsize=4), threading.Event()
    th = threading.Thread(target=producer, args=(jobs, args, q, stop), daemon=True)
    th.start()
    bad, frames, t0 = [], 0, time.time()
    part = f = None
    try:
        for src, dst in jobs:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            part = dst + '.part'
            f = open(part, 'wb')
            f.write(b'UCFF' + struct.pack('<3I', 1, 0, F_DIM))  # T filled in at the end
            while True:
                kind, val = q.get()
                if kind != 'chunk':
                    break
                with torch.inference_mode():
                    y = model(preprocess(val, args.size, device)).float().cpu().numpy()
                if y.shape[1] != F_DIM:
                    raise Bad(f'{src}: the network gave {y.shape[1]} features, want {F_DIM}')
                if not np.isfinite(y).all():
                    raise Bad(f'{src}: non-finite features')
                f.write(y.astype('<f4').tobytes())
                prog.update(frames=len(y))
            if kind == 'bad':
                f.close()
                os.remove(part)
                part = None
                if not args.keep_going:
                    raise Bad(val)
                sys.stderr.write(('\n' if prog.tty else '') + f'{PROG}: error: {val}\n')
                bad.append(src)
                prog.update(video=True)
                continue
            f.seek(8)
            f.write(struct.pack('<I', val))
            f.flush()
            os.fsync(f.fileno())
            f.close()
            os.replace(part, dst)
            part = None
            frames += val
            prog.update(video=True)
    finally:
        stop.set()
        if f is not None:
            f.close()
        if part is not None and os.path.exists(part):
            os.remove(part)
    if jobs:
        prog.update(final=True)
    el = time.time() - t0
    sys.stderr.write(f'{PROG}: {len(jobs) - len(bad)} extracted ({frames} frames, {el:.1f} s, '
                     f'{frames / max(el, 1e-9):.1f} frames/s), {done} already done, {len(bad)} failed; '
                     f'features in {os.path.join(args.out, "features")}\n')
    if bad:
        raise Bad(f'{len(bad)} videos could not be decoded (named above), the first {bad[0]}')


def main(argv):
    """Returns 0 or exits (SystemExit) with the codes of the module's docstring; the signal
    handlers it installs are restored on the way out (the test calls it in-process)."""
    args = parse_args(argv)
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        if args.fetch_weights:
            fetch_imagenet()
            import torch.hub
            sys.stderr.write(f'{PROG}: Inception-v3 IMAGENET1K_V1 weights in {torch.hub.get_dir()}/checkpoints\n')
        else:
            extract(args)
    except Bad as e:
        die(str(e))
    except Interrupted as e:
        sys.stderr.write(f'\n{PROG}: interrupted by signal {e.sig}: the video in progress left no file\n')
        sys.exit(128 + e.sig)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
