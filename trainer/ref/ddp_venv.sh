#!/bin/sh
# ddp_venv.sh: makes sure $DDP_PY (default $B/venv/bin/python3) imports torch and numpy; if not,
# creates the virtual environment $B/venv and installs them from PyPI (the CPU wheel index first,
# then PyPI's default wheel). Only make bench-ddp / ddp-check need it; the C build never does.
B=${B:-build}
DDP_PY=${DDP_PY:-$B/venv/bin/python3}
if "$DDP_PY" -c 'import torch, numpy' 2>/dev/null; then exit 0; fi
if [ "$DDP_PY" != "$B/venv/bin/python3" ]; then
  echo "ddp_venv: $DDP_PY cannot import torch and numpy (pip install torch numpy, or unset DDP_PY)" >&2
  exit 1
fi
echo "ddp_venv: installing PyTorch (CPU) and numpy into $B/venv"
python3 -m venv "$B/venv" || { echo "ddp_venv: python3 -m venv failed (apt-get install python3-venv)" >&2; exit 1; }
"$B/venv/bin/python3" -m pip install --index-url https://download.pytorch.org/whl/cpu torch numpy ||
  "$B/venv/bin/python3" -m pip install torch numpy || { echo "ddp_venv: pip install torch numpy failed" >&2; exit 1; }
"$DDP_PY" -c 'import torch, numpy' || exit 1
