"""``attnflow.run``: a scenario run from Python, with exactly the command line's validation,
checks and output files (``attnflow run``)."""

from __future__ import annotations

import csv
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Union

import numpy as np

from . import _attnflow


def scenario_dir() -> Path:
    """The shipped scenario files: the repository's ``scenarios/`` of the checkout the package
    was built from (recorded at build time), or a ``scenarios`` folder inside the package."""
    from . import _attnflow

    packaged = Path(__file__).resolve().parent / "scenarios"
    if packaged.is_dir() and any(packaged.iterdir()):
        return packaged
    return Path(_attnflow.SOURCE_SCENARIOS).resolve()


@dataclass
class RunResult:
    """What a scenario run wrote.

    Attributes:
        name: the scenario's name.
        dir: its output folder (``<out>/<name>``).
        params: ``params.json``: resolved parameters, solver, derived quantities, solver stats.
        checks: the theorem checks of ``checks.json``, each a dict with ``id`` (stable: find a check with :meth:`check`),
            ``name``, ``measured``, ``relation``, ``bound`` (``upper`` for ``within``), ``pass``,
            ``paper_claim`` (None unless the paper's statement differs) and ``note``.
        skipped: checks that did not apply, with the reason.
        series: ``series.csv`` as a pandas DataFrame, or a dict of numpy arrays without pandas
            (None if the run wrote no series).
        figure: path of ``figure.svg`` (None if the run drew none).
    """

    name: str
    dir: Path
    params: dict
    checks: list
    skipped: list = field(default_factory=list)
    series: object = None
    figure: Optional[Path] = None

    @property
    def all_pass(self) -> bool:
        """Whether every check passed."""
        return all(c["pass"] for c in self.checks)

    def check(self, id: str) -> dict:
        """The check with this id (``KeyError`` if the run has none)."""
        for c in self.checks:
            if c["id"] == id:
                return c
        raise KeyError(f"no check with id {id!r} in {self.name}")

    def __repr__(self) -> str:
        passed = sum(c["pass"] for c in self.checks)
        return f"RunResult({self.name!r}: {passed}/{len(self.checks)} checks passed, dir={str(self.dir)!r})"


def run(
    scenario: Union[str, os.PathLike],
    set: Optional[Mapping[str, object]] = None,
    seed: Optional[int] = None,
    out: Optional[Union[str, os.PathLike]] = None,
    quick: bool = False,
    solver: Optional[str] = None,
) -> RunResult:
    """Runs a scenario as ``attnflow run`` does and reads its outputs back.

    Args:
        scenario: a scenario name (file stem, e.g. ``"thm2-closed-form"``) from the scenarios
            shipped in the package, or the path of a scenario file.
        set: overrides, ``{key: value}`` as ``--set key=value`` (keys under ``[params]``, or
            ``solver.x``, ``checks.x``); values are written in TOML syntax (strings quoted).
        seed: seed of all randomness (``--seed``).
        out: output folder (default: a new temporary folder); the run writes ``<out>/<name>/``.
        quick: apply the scenario's ``[quick]`` overrides (``--quick``).
        solver: integrator (``--solver``): bdf, esdirk34, tr_bdf2 or tsit45.

    Raises:
        InputError: bad input — unknown scenario, bad override (nothing is written).
        RunError: the run failed (solver failure, divergence, I/O).
    """
    pairs = [f"{k}={_toml_value(v)}" for k, v in (set or {}).items()]
    out = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="attnflow-"))
    scenario = os.fspath(scenario)
    run_dir = Path(
        _attnflow.run_scenario(
            scenario,
            pairs,
            seed,
            os.fspath(out),
            bool(quick),
            os.fspath(scenario_dir()),
            solver,
        )
    )
    return read_run(run_dir)


def read_run(run_dir: Union[str, os.PathLike]) -> RunResult:
    """Reads a run's output folder (written by ``attnflow run`` or :func:`run`)."""
    run_dir = Path(run_dir)
    params = json.loads((run_dir / "params.json").read_text()) if (run_dir / "params.json").exists() else {}
    checks_doc = json.loads((run_dir / "checks.json").read_text())
    checks = []
    for c in checks_doc.get("checks", []):
        c = dict(c)
        c.setdefault("paper_claim", None)
        c.setdefault("note", None)
        if c.get("measured") is None:
            c["measured"] = float("nan")
        checks.append(c)
    series_path = run_dir / "series.csv"
    figure = run_dir / "figure.svg"
    return RunResult(
        name=checks_doc.get("scenario", run_dir.name),
        dir=run_dir,
        params=params,
        checks=checks,
        skipped=list(checks_doc.get("skipped", [])),
        series=_read_series(series_path) if series_path.exists() else None,
        figure=figure if figure.exists() else None,
    )


def _read_series(path: Path):
    """``series.csv`` as a DataFrame (pandas installed) or a dict of arrays (numeric columns as
    float arrays, others as object arrays)."""
    try:
        import pandas as pd
    except ImportError:
        pd = None
    if pd is not None:
        return pd.read_csv(path)
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        return {}
    header, body = rows[0], rows[1:]
    columns = {}
    for j, name in enumerate(header):
        values = [r[j] if j < len(r) else "" for r in body]
        try:
            columns[name] = np.array([float(v) if v != "" else np.nan for v in values])
        except ValueError:
            columns[name] = np.array(values, dtype=object)
    return columns


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, np.integer, np.floating)):
        return repr(float(v)) if isinstance(v, (float, np.floating)) else str(int(v))
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise _attnflow.InputError(f"set: cannot write {v!r} as a TOML value")
