#!/bin/bash
# Sync's final weights are a pure function of the seed and the data: the weights hash of a fixed
# sync run is the same under injected imbalance (sync waits for every rank) and, on a machine
# whose reference is recorded in sync_hash.ref, equal to that reference, so a change to the
# trainer that changes what a step computes fails here. The reference depends on the CPU's
# instruction set (-march=native), the compiler and OpenBLAS, so it is keyed by those; on
# another machine the test prints the line to add and checks the imbalance invariant only.
. "$(dirname "$0")/common.sh"
args=(--mode sync --seed 1 --limit-train 1024 --limit-test 256 --epochs 2 --threads 1)
hashes() { jq -r '[.epochs[].weights_hash] | join(" ")' "$1"; }
# Both convolution paths (trainer/nn: NN_CONV=gemm is im2col + sgemm, the default the direct 3x3
# kernel where the CPU has it): each has its own reference, the gemm one recorded at 4c113cc.
for conv in gemm direct; do
export NN_CONV=$conv
run 2 "${args[@]}" --out "$TMP/a.json" || { cat "$TMP/out"; fail "sync run"; }
run 2 "${args[@]}" --imbalance linear:unit=20 --out "$TMP/b.json" || { cat "$TMP/out"; fail "sync run under skew"; }
ha=$(hashes "$TMP/a.json"); hb=$(hashes "$TMP/b.json")
echo "conv=$conv sync seed 1, epochs 1-2: $ha; under linear skew: $hb"
[ -n "$ha" ] && [ "$ha" = "$hb" ] || fail "conv=$conv: sync weights differ under imbalance: $ha vs $hb"
key="$(uname -m) $(grep -m1 '^flags' /proc/cpuinfo | md5sum | cut -c1-12) gcc-$(${CC:-gcc} -dumpfullversion) openblas-$(dpkg-query -W -f '${Version}' libopenblas0-pthread 2>/dev/null) conv=$conv"
ref=$(awk -F' [|] ' -v k="$key" '$1 == k { print $2 }' "$(dirname "$0")/sync_hash.ref")
if [ -z "$ref" ]; then
  echo "no reference for this machine; to record one, add to tests/trainer/sync_hash.ref: $key | $ha"
  continue
fi
[ "$ha" = "$ref" ] || fail "sync weights hash $ha differs from this machine's reference $ref ($key)"
echo "ok: equal to the reference recorded for $key"
done
