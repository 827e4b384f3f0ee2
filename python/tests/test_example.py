"""The example script runs end to end (its flow's direction approaches the W-SVM's)."""

import runpy
from pathlib import Path

from conftest import needs_family

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "flow_vs_svm.py"


@needs_family("token-select")
def test_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = runpy.run_path(str(EXAMPLE))
    curves = module["main"](str(tmp_path / "fig.png"))
    assert curves, "the family offers a max-margin solution to compare with"
    for c in curves.values():
        assert c[-1] < c[0], "the direction moves toward the max-margin solution"
