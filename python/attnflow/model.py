"""``attnflow.Model``: a model family's loss on an instance, its exact derivatives, its gradient
flow and the papers' discrete optimizers, all computed in Rust."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence, Union

import numpy as np

from . import _attnflow

Instance = Union[str, Mapping[str, np.ndarray]]


@dataclass
class Trajectory:
    """A recorded run of a flow or optimizer.

    Attributes:
        t: sample times (flow time; for a discrete optimizer, the summed step sizes).
        states: the states at the samples, shape (samples, dim).
        loss: ℓ at the samples.
        grad_norm: ‖∇ℓ‖ at the samples.
        invariants: the model's conserved quantities at the samples, by name.
        stats: solver statistics (method, steps, rhs and jvp evaluations, wall_seconds, …).
        stop_reason: why the run ended.
    """

    t: np.ndarray
    states: np.ndarray
    loss: np.ndarray
    grad_norm: np.ndarray
    invariants: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    stop_reason: str = ""

    @classmethod
    def _from_raw(cls, raw: dict) -> "Trajectory":
        return cls(
            t=raw["t"],
            states=raw["states"],
            loss=raw["loss"],
            grad_norm=raw["grad_norm"],
            invariants=dict(raw["invariants"]),
            stats=json.loads(raw["stats_json"]),
            stop_reason=raw["stop_reason"],
        )


class Model:
    """A model family's model on an instance.

    Args:
        family: the family's name (see :func:`attnflow.family_names`), e.g. ``"token-select"``.
        data: the data arrays — a dict of numpy arrays or the path of an instance file (README,
            "Your own data", gives each family's arrays). Without data and init, the family's
            default instance drawn from ``seed``.
        init: the initial state (arrays or a path); defaults to ``data`` (one file may hold both).
        options: the family's model options (the ``[params.model]`` table of its scenario), as a
            dict of plain values.
        seed: drives the default instance.

    Raises:
        InputError: unknown family, bad arrays (the message names the file or ``data``/``init``,
            the array or entry, and the reason).
    """

    def __init__(
        self,
        family: str,
        data: Optional[Instance] = None,
        init: Optional[Instance] = None,
        options: Optional[Mapping] = None,
        seed: int = 0,
    ):
        data = str(data) if hasattr(data, "__fspath__") else data
        init = str(init) if hasattr(init, "__fspath__") else init
        self._m = _attnflow.Model(
            family, data, init, json.dumps(dict(options or {})), int(seed)
        )

    @property
    def family(self) -> str:
        """The family's name."""
        return self._m.family

    @property
    def dim(self) -> int:
        """Number of parameters (length of a state)."""
        return self._m.dim

    def __repr__(self) -> str:
        return f"attnflow.Model({self.family!r}, dim={self.dim})"

    def loss(self, z: Sequence[float]) -> float:
        """ℓ(z)."""
        return self._m.loss(_vec(z))

    def grad(self, z: Sequence[float]) -> np.ndarray:
        """The exact gradient ∇ℓ(z)."""
        return self._m.grad(_vec(z))

    def hvp(self, z: Sequence[float], u: Sequence[float]) -> np.ndarray:
        """The exact Hessian-vector product ∇²ℓ(z)·u."""
        return self._m.hvp(_vec(z), _vec(u))

    def initial_state(self) -> np.ndarray:
        """The instance's initial state z(0)."""
        return self._m.initial_state()

    def instance(self) -> dict:
        """The data and initial state as a dict of arrays (``save_instance`` writes it)."""
        return self._m.instance()

    def matrices(self, z: Optional[Sequence[float]] = None) -> dict:
        """The weight matrices of state ``z`` (default z(0)) whose direction the theory
        describes, by name (e.g. ``{"W": K Qᵀ}``)."""
        return self._m.matrices(_vec(self.initial_state() if z is None else z))

    def max_margin(self) -> list:
        """The max-margin solutions the theory says a matrix's direction approaches: a list of
        dicts with ``name``, ``matrix`` (which of :meth:`matrices`), ``solution``,
        ``certificate`` (residual name → value) and ``tolerance`` (each residual's bound)."""
        return self._m.max_margin()

    def flow(
        self,
        t_end: Optional[float] = None,
        method: str = "bdf",
        rtol: float = 1e-8,
        atol: float = 1e-10,
        samples: int = 200,
        grid: Optional[Sequence[float]] = None,
        clock: Optional[str] = None,
        tau: float = 1.0,
    ) -> Trajectory:
        """Integrates the gradient flow ż = −∇ℓ(z) from the initial state.

        Args:
            t_end: horizon; the flow is sampled at ``samples`` times in [0, t_end] (linear, or
                t = 0 then log-spaced from min(τ, t_end)·1e-3 when ``clock="log"``).
            method: ``bdf`` (default; exact Hessian-vector products), ``esdirk34``,
                ``tr_bdf2`` or ``tsit45``.
            rtol, atol: tolerances of the integrator.
            grid: explicit increasing sample times (overrides ``t_end``/``samples``).
            clock: ``linear`` or ``log`` (integrate in s = ln(1 + t/τ) for flows followed over
                many decades); default: the model's.
            tau: time scale τ of the log clock.

        Raises:
            InputError: bad arguments. RunError: the integration failed (the message says at
            which time and why).
        """
        grid = None if grid is None else [float(t) for t in grid]
        t_end = None if t_end is None else float(t_end)
        raw = self._m.flow(t_end, grid, method, rtol, atol, int(samples), clock, float(tau))
        return Trajectory._from_raw(raw)

    def gd(self, eta: float, steps: int, samples: int = 200, clock: str = "linear") -> Trajectory:
        """Gradient descent z ← z − η∇ℓ(z) for ``steps`` steps, ``samples`` recorded (evenly,
        or log-spaced in the step index with ``clock="log"``). RunError if it diverges."""
        return self._discrete("gd", eta, steps, 0.0, samples, clock)

    def ngd(self, eta: float, steps: int, samples: int = 200, clock: str = "linear") -> Trajectory:
        """Normalized gradient descent z ← z − η∇ℓ/‖∇ℓ‖."""
        return self._discrete("ngd", eta, steps, 0.0, samples, clock)

    def polyak(
        self,
        cap: float,
        steps: int,
        loss_star: float = 0.0,
        samples: int = 200,
        clock: str = "linear",
    ) -> Trajectory:
        """Polyak steps η_k = min(cap, (ℓ − ℓ*)/‖∇ℓ‖²) with target loss ``loss_star``."""
        return self._discrete("polyak", cap, steps, loss_star, samples, clock)

    def _discrete(self, rule, eta, steps, loss_star, samples, clock) -> Trajectory:
        raw = self._m.discrete(rule, float(eta), int(steps), float(loss_star), int(samples), clock)
        return Trajectory._from_raw(raw)


def _vec(z) -> np.ndarray:
    return np.ascontiguousarray(z, dtype=np.float64).reshape(-1)
