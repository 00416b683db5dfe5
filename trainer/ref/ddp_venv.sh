#!/bin/sh
# ddp_venv.sh: makes sure $DDP_PY (default $B/venv/bin/python3) imports torch and numpy (and, for
# the default venv, torchvision and av: the PyTorch package's tests and the UCF101 extractor); if
# not, creates the virtual environment $B/venv and installs them from PyPI (the CPU wheel index
# first, then PyPI's default wheel). make test (make deps-torch), bench-ddp and ddp-check need it;
# the C build never does.
B=${B:-build}
DDP_PY=${DDP_PY:-$B/venv/bin/python3}
MODS='torch, numpy'
[ "$DDP_PY" = "$B/venv/bin/python3" ] && MODS='torch, numpy, torchvision, av'
if "$DDP_PY" -c "import $MODS" 2>/dev/null; then exit 0; fi
if [ "$DDP_PY" != "$B/venv/bin/python3" ]; then
  echo "ddp_venv: $DDP_PY cannot import torch and numpy (pip install torch numpy, or unset DDP_PY)" >&2
  exit 1
fi
PKGS="torch torchvision numpy av"
echo "ddp_venv: installing PyTorch (CPU), torchvision, numpy and PyAV into $B/venv"
[ -x "$B/venv/bin/python3" ] || python3 -m venv "$B/venv" ||
  { echo "ddp_venv: python3 -m venv failed (apt-get install python3-venv)" >&2; exit 1; }
# shellcheck disable=SC2086
"$B/venv/bin/python3" -m pip install -q --index-url https://download.pytorch.org/whl/cpu $PKGS 2>/dev/null ||
  "$B/venv/bin/python3" -m pip install -q $PKGS || { echo "ddp_venv: pip install $PKGS failed" >&2; exit 1; }
"$DDP_PY" -c "import $MODS" || exit 1
