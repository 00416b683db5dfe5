#!/bin/bash
# fmnist_subset.sh SRC DST NTRAIN NTEST: the first NTRAIN training and NTEST test samples of the
# Fashion-MNIST IDX files in SRC (gzip, as Debian's dataset-fashion-mnist ships them) as valid,
# smaller IDX files in DST, so that `make gpu-check` can train on a machine without the data set
# (DST lives inside the build folder that is carried there).
set -eu
src=$1 dst=$2 ntr=$3 nte=$4
be32() { printf '%08x' "$1" | sed 's/../\\x&/g' | xargs -0 printf; }
sub() { # in.gz out.gz count img|lab   (IDX: 00 00 08 ndim, big-endian dims, bytes)
  local in=$1 out=$2 n=$3 kind=$4
  { if [ "$kind" = img ]; then printf '\x00\x00\x08\x03'; be32 "$n"; be32 28; be32 28
      gzip -dc "$in" | tail -c +17 | head -c $((n * 784))
    else printf '\x00\x00\x08\x01'; be32 "$n"; gzip -dc "$in" | tail -c +9 | head -c "$n"; fi
  } | gzip -6 > "$out.tmp"
  mv "$out.tmp" "$out"
}
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  [ -f "$src/$f.gz" ] || { echo "fmnist_subset: $src/$f.gz missing (apt-get install dataset-fashion-mnist)" >&2; exit 1; }
done
mkdir -p "$dst"
sub "$src/train-images-idx3-ubyte.gz" "$dst/train-images-idx3-ubyte.gz" "$ntr" img
sub "$src/train-labels-idx1-ubyte.gz" "$dst/train-labels-idx1-ubyte.gz" "$ntr" lab
sub "$src/t10k-images-idx3-ubyte.gz" "$dst/t10k-images-idx3-ubyte.gz" "$nte" img
sub "$src/t10k-labels-idx1-ubyte.gz" "$dst/t10k-labels-idx1-ubyte.gz" "$nte" lab
got=$(gzip -dc "$dst/train-images-idx3-ubyte.gz" | wc -c)
[ "$got" = $((16 + ntr * 784)) ] || { echo "fmnist_subset: train images have $got bytes, want $((16 + ntr * 784))" >&2; exit 1; }
