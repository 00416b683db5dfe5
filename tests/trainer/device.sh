#!/bin/bash
# --device cuda on a machine without a usable GPU (or a build without CUDA): a clear message and a
# non-zero exit on every rank, never a crash or a hang.
. "$(dirname "$0")/common.sh"
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: a GPU is present (the cuda_* tests cover --device cuda)"; exit 77; fi
if run 2 --device cuda --epochs 1; then cat "$TMP/out"; fail "--device cuda succeeded without a GPU"; fi
grep -q -- "--device cuda" "$TMP/out" || { cat "$TMP/out"; fail "no message naming --device cuda"; }
echo "ok: $(grep -m1 -- '--device cuda' "$TMP/out")"
