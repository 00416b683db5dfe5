"""ddp_gen.py: eager-train's splitmix64 (common/hash.h hash_splitmix64), for the DDP mirror's
modules (trainer/ref/ddp_mirror.py).

Takes and returns plain integers: M64 the 64-bit mask; GAMMA a splitmix64 stream's step (the golden
gamma, common/hash.h HASH_SPLITMIX64_GAMMA); mix64(z) splitmix64's finaliser of one
Python int (0 <= z < 2^64); np_mix64(z) the same element-wise over a numpy uint64 array (wrapping,
as C does). No torch; numpy is imported only by np_mix64."""
M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix64(z):
    """splitmix64's finaliser (common/hash.h hash_splitmix64)."""
    z = (z + GAMMA) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def np_mix64(z):
    import numpy as np
    with np.errstate(over="ignore"):
        z = z + np.uint64(GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))
