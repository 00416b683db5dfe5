"""ddp_data.py: the presets' data sets and data order for the DDP mirror (trainer/ref/ddp_mirror.py),
as eager-train's trainer/data reads, generates and shuffles them.

  open_data(args, split)        split "train" or "test" of args.experiment's data set (--limit-train,
                                --limit-test, --data-path, --hp-*): an object with n (samples),
                                classify (bool) and batch(idx) -> (x, y) tensors, the samples at idx
                                prepared as eager-train prepares them
  data_permutation(n, seed, e)  epoch e's order of n samples (a list), as trainer/data/common.c
A file that is not an IDX file of bytes: SystemExit with one line naming it. torch and numpy are
imported only inside the functions."""
import gzip
import math
import os

from ddp_gen import GAMMA, M64, mix64, np_mix64
from ddp_preset import PRESETS


def data_permutation(n, seed, epoch):
    """trainer/data/common.c data_permutation: Fisher-Yates keyed by (seed, SHUFFLE, epoch)."""
    s = mix64(mix64(mix64(mix64(seed) ^ 0x5348) ^ epoch) ^ 0)
    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        s = (s + GAMMA) & M64
        j = (mix64(s) * (i + 1)) >> 64
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def load_idx(path):
    import numpy as np
    p = path + ".gz" if os.path.exists(path + ".gz") else path
    with (gzip.open(p, "rb") if p.endswith(".gz") else open(p, "rb")) as f:
        b = f.read()
    if b[:3] != b"\0\0\x08":
        raise SystemExit("ddp_mirror: %s is not an IDX file of bytes" % p)
    nd = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(b, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def load_fmnist(path, split, limit):
    pre = "train" if split == "train" else "t10k"
    x = load_idx(os.path.join(path, pre + "-images-idx3-ubyte"))
    y = load_idx(os.path.join(path, pre + "-labels-idx1-ubyte"))
    if limit and limit < len(y):
        x, y = x[:limit], y[:limit]
    return x, y


def prep_fmnist(xu8):
    """trainer/data/fmnist.c: (p/255 - 0.2860)/0.3530 in float32, NCHW with C=1."""
    return ((xu8.float() / 255.0 - 0.2860) / 0.3530).unsqueeze(1)


class FashionMNIST:
    classify = True

    def __init__(self, args, split):
        import numpy as np
        import torch
        x, y = load_fmnist(args.data_path, split, args.limit_train if split == "train" else args.limit_test)
        self.x, self.y, self.n = torch.from_numpy(np.array(x)), torch.from_numpy(y.astype(np.int64)), len(y)

    def batch(self, idx):
        return prep_fmnist(self.x[idx]), self.y[idx]



class Hyperplane:
    """trainer/data/hyperplane.c: y = a.x + 0.1 e, generated per sample from its own stream
    rng_key(seed, HP_X, split, i) (F/2 draws, two 32-bit uniforms each, then one normal)."""
    classify = False

    def __init__(self, args, split):
        import numpy as np
        F = args.hp_features
        n = args.hp_samples if split == "train" else args.hp_samples // 8
        lim = args.limit_train if split == "train" else args.limit_test
        self.n = min(n, lim) if lim > 0 else n
        self.F, self.split, self.seed = F, 0 if split == "train" else 1, args.seed
        ka = np_mix64(np.uint64(mix64(mix64(args.seed) ^ 0x4841)) ^ np.arange(F, dtype=np.uint64))
        ua = (np_mix64(np_mix64(ka) + np.uint64(GAMMA)) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
        self.a = (2.0 * ua - 1.0).astype(np.float32)
        self.noise = float(np.float32(0.1))

    def batch(self, idx):
        import numpy as np
        import torch
        i = np.asarray(idx, dtype=np.uint64)
        s0 = np_mix64(np_mix64(np.uint64(mix64(mix64(self.seed) ^ 0x4858)) ^ np.uint64(self.split)) ^ i)
        half = (self.F + 1) // 2
        with np.errstate(over="ignore"):
            st = s0[:, None] + np.arange(1, half + 1, dtype=np.uint64)[None, :] * np.uint64(GAMMA)
        u = np_mix64(st)
        sc = math.sqrt(3.0 / self.F) / 2147483648.0
        lo = ((u & np.uint64(0xFFFFFFFF)).astype(np.float64) - 2147483647.5) * sc
        hi = ((u >> np.uint64(32)).astype(np.float64) - 2147483647.5) * sc
        x = np.empty((len(i), 2 * half), dtype=np.float32)
        x[:, 0::2], x[:, 1::2] = lo, hi
        x = x[:, :self.F]
        y = np.cumsum(self.a.astype(np.float64)[None, :] * x.astype(np.float64), axis=1)[:, -1]  # in order, as C
        t = np.empty((len(i), 1), dtype=np.float32)
        with np.errstate(over="ignore"):
            d1, d2 = np_mix64(st[:, -1] + np.uint64(GAMMA)), np_mix64(st[:, -1] + np.uint64(2 * GAMMA & M64))
        for r in range(len(i)):  # rng_normal with libm's log and cos, as C
            u1 = max(float(int(d1[r]) >> 11) * 2.0 ** -53, 1e-300)
            u2 = float(int(d2[r]) >> 11) * 2.0 ** -53
            t[r, 0] = y[r] + self.noise * (math.sqrt(-2.0 * math.log(u1)) * math.cos(6.283185307179586 * u2))
        return torch.from_numpy(x.copy()), torch.from_numpy(t)


def open_data(args, split):
    return FashionMNIST(args, split) if PRESETS[args.experiment]["data"] == "fmnist" else Hyperplane(args, split)

