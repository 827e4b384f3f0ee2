"""Scenario runs from Python: the same checks as the command line, from any directory."""

import json
import math
import subprocess

import pytest

import attnflow

SCENARIO = "thm2-closed-form"


def test_checks_equal_the_cli(tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)  # any directory: the scenarios ship inside the package
    py = attnflow.run(SCENARIO, quick=True, out=tmp_path / "py")
    subprocess.run(
        [str(cli), "run", SCENARIO, "--quick", "--out", str(tmp_path / "cli"),
         "--dir", str(attnflow.scenario_dir())],
        check=True, capture_output=True,
    )
    cli_checks = json.loads((tmp_path / "cli" / SCENARIO / "checks.json").read_text())["checks"]
    assert len(py.checks) == len(cli_checks) > 0
    for a, b in zip(py.checks, cli_checks):
        assert a["name"] == b["name"] and a["pass"] == b["pass"]
        assert a["relation"] == b["relation"] and a["bound"] == b["bound"]
        assert a["measured"] == b["measured"] or (math.isnan(a["measured"]) and b["measured"] is None)
    for f in ["params.json", "series.csv", "checks.json"]:
        assert (py.dir / f).read_bytes() == (tmp_path / "cli" / SCENARIO / f).read_bytes()


def test_run_result_shape(tmp_path):
    r = attnflow.run(SCENARIO, quick=True, seed=1, out=tmp_path)
    assert r.all_pass, r.checks
    assert r.params["seed"] == 1 and r.params["quick"] is True
    c = r.checks[0]
    assert {"id", "name", "measured", "relation", "bound", "pass", "paper_claim"} <= set(c)
    # checks are found by their stable id
    assert r.check(c["id"]) is c
    with pytest.raises(KeyError):
        r.check("no-such-check")
    assert r.figure is not None and r.figure.exists()
    columns = list(r.series.columns) if hasattr(r.series, "columns") else list(r.series)
    header = (r.dir / "series.csv").read_text().splitlines()[0].split(",")
    assert columns == header and len(r.series[columns[0]]) > 0


def test_bad_input_raises_and_writes_nothing(tmp_path):
    with pytest.raises(attnflow.InputError, match="no scenario named `nope`"):
        attnflow.run("nope", out=tmp_path / "a")
    with pytest.raises(attnflow.InputError, match="thm2-closed-form.toml"):
        attnflow.run(SCENARIO, set={"no_such_key": 1.0}, out=tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
