#!/usr/bin/env python3
"""ckpt_edit.py -- damages an eager-train checkpoint on purpose (tests only; format: trainer/checkpoint.c).

  ckpt_edit.py FILE flip TENSOR INDEX BIT   flips one bit of float INDEX of TENSOR, checksum left as is
  ckpt_edit.py FILE set TENSOR INDEX VALUE  sets float INDEX of TENSOR (nan, inf, 5e37 ...) and re-signs
  ckpt_edit.py FILE epoch VALUE             sets the checkpoint's epoch field and re-signs
  ckpt_edit.py FILE format1                 rewrites a format-2 checkpoint as format 1 (what
                                            earlier trainers wrote: no trailer, totals, restarts
                                            or controller state)

TENSOR may be a prefix ("bn." = the first BN tensor). Re-signing rewrites the trailer (format 2)
so that only the range checks can catch the value; a format-1 file has no trailer.
"""
import struct
import sys

TRAILER = b"EAGERSUM"


def tensors(buf):
    """name -> (offset of its first float, count) of an NNTF0001 file"""
    assert buf[:8] == b"NNTF0001", "not an NNTF0001 file"
    (count,) = struct.unpack_from("<I", buf, 8)
    off, out = 12, {}
    for _ in range(count):
        (nl,) = struct.unpack_from("<I", buf, off)
        name = buf[off + 4 : off + 4 + nl].decode()
        off += 4 + nl
        (nd,) = struct.unpack_from("<I", buf, off)
        dims = struct.unpack_from("<%dI" % nd, buf, off + 4)
        off += 4 + 4 * nd
        n = 1
        for d in dims:
            n *= d
        out[name] = (off, n)
        off += 4 * n
    return out


def find(ts, prefix):
    for name in ts:
        if name.startswith(prefix):
            return ts[name]
    sys.exit("no tensor %s" % prefix)


def fnv1a64(data):
    h = 1469598103934665603
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def resign(buf):
    if len(buf) >= 16 and buf[-16:-8] == TRAILER:
        struct.pack_into("<Q", buf, len(buf) - 8, fnv1a64(bytes(buf[:-16])))


def format1(buf, ts):
    """the same tensors with format 1's trainer.meta, without the format-2 extras and trailer"""
    off, n = ts["trainer.meta"]
    f = struct.unpack_from("<%df" % n, buf, off)
    assert f[0] == 2, "not a format-2 checkpoint"
    word = lambda i: sum(int(f[1 + 4 * i + k]) << (16 * k) for k in range(4))
    wall = struct.unpack("<d", struct.pack("<Q", word(2)))[0]
    meta = [1.0, float(word(0)), float(word(1)), wall]
    for i in (3, 4, 5):  # seed, description hash, parameter count
        meta += [float((word(i) >> (16 * k)) & 0xFFFF) for k in range(4)]
    keep = [k for k in ts if k not in ("trainer.meta", "trainer.restarts", "ctl.state")]
    out = bytearray(b"NNTF0001" + struct.pack("<I", len(keep) + 1))
    for name in keep:
        o, n = ts[name]
        out += struct.pack("<I", len(name)) + name.encode() + struct.pack("<II", 1, n) + buf[o : o + 4 * n]
    name = b"trainer.meta"
    out += struct.pack("<I", len(name)) + name + struct.pack("<II", 1, 16) + struct.pack("<16f", *meta)
    return out


def main():
    path, op = sys.argv[1], sys.argv[2]
    buf = bytearray(open(path, "rb").read())
    ts = tensors(buf)
    if op == "flip":
        off, n = find(ts, sys.argv[3])
        i, bit = int(sys.argv[4]), int(sys.argv[5])
        buf[off + 4 * i + bit // 8] ^= 1 << (bit % 8)
    elif op == "set":
        off, n = find(ts, sys.argv[3])
        struct.pack_into("<f", buf, off + 4 * int(sys.argv[4]), float(sys.argv[5]))
        resign(buf)
    elif op == "epoch":
        off, n = ts["trainer.meta"]
        v = int(float(sys.argv[3]))
        if n == 16:  # format 1: the epoch as a float
            struct.pack_into("<f", buf, off + 4, float(v))
        else:  # format 2: word 0 after the format number, 4 floats of 16 bits
            for k in range(4):
                struct.pack_into("<f", buf, off + 4 + 4 * k, float((v >> (16 * k)) & 0xFFFF))
        resign(buf)
    elif op == "format1":
        buf = format1(buf, ts)
    else:
        sys.exit(__doc__)
    open(path, "wb").write(buf)


main()
