#!/usr/bin/env bash
# The Python package's tests on a fresh machine: a virtual environment (python/.venv, git-ignored)
# with maturin, numpy and pytest from PyPI, the package built and installed with the documented
# command (`pip install ./python`, plus the test-only family), then pytest. Exits non-zero on any
# failure. Reuses the workspace's target/ so the Rust dependencies are not rebuilt.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
venv="$root/python/.venv"
python="${PYTHON:-python3}"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "maturin>=1.5,<2" numpy pytest
export CARGO_TARGET_DIR="$root/target"
# the build backend (maturin, without build isolation) runs the venv's tools by name
export PATH="$venv/bin:$PATH"
# the scenario-equality test compares with the command line of this checkout
cargo build --release --bin attnflow
MATURIN_PEP517_ARGS="--features testing" \
    "$venv/bin/python" -m pip install --quiet --no-build-isolation --force-reinstall --no-deps ./python
"$venv/bin/python" -m pytest -q python/tests "$@"
