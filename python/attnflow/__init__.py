"""attnflow from Python: the gradient flows, max-margin solvers and theory-checking scenarios of
attnflow (Rust), with numpy arrays in and out and no per-step Python overhead.

- ``run(scenario, set=..., seed=..., out=..., quick=...)``: a scenario run exactly as the
  command line ``attnflow run`` does it; returns a :class:`RunResult` (params, checks, series,
  figure path).
- ``Model(family, data=..., init=..., options=...)``: a model family on an instance (arrays or an
  instance file) with ``loss``, ``grad``, ``hvp``, ``flow``, ``gd``, ``ngd``, ``polyak``,
  ``matrices`` and ``max_margin``.
- ``w_svm``, ``nuclear_svm``, ``l1_svm``: the max-margin solvers with their certificates.
- ``load_instance`` / ``save_instance``: instance files (``.npz``, or ``.json`` to read).

Errors raise :class:`InputError` (bad input, a ``ValueError``) or :class:`RunError` (a solver
or run failure, a ``RuntimeError``), carrying attnflow's message.
"""

from ._attnflow import (
    InputError,
    RunError,
    family_names,
    l1_svm,
    load_instance,
    nuclear_svm,
    one_minus_cos,
    save_instance,
    w_svm,
)
from .model import Model, Trajectory
from .scenario import RunResult, run, scenario_dir

__all__ = [
    "InputError",
    "RunError",
    "Model",
    "Trajectory",
    "RunResult",
    "run",
    "scenario_dir",
    "family_names",
    "w_svm",
    "nuclear_svm",
    "l1_svm",
    "one_minus_cos",
    "load_instance",
    "save_instance",
]
