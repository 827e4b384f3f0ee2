"""Shared fixtures of the Python tests."""

import os
from pathlib import Path

import pytest

import attnflow

REPO = Path(__file__).resolve().parents[2]


def needs_family(name):
    """Skips a test until the model family `name` is registered in the package."""
    return pytest.mark.skipif(
        name not in attnflow.family_names(),
        reason=f"family {name!r} not registered in python/src/families.rs",
    )


@pytest.fixture
def cli():
    """The command-line binary of the same checkout (built by python/test.sh)."""
    path = Path(os.environ.get("ATTNFLOW_BIN", REPO / "target" / "release" / "attnflow"))
    if not path.exists():
        pytest.skip(f"{path} not built (python/test.sh builds it)")
    return path
