"""Model families from Python: derivatives against finite differences (loose: the exact tests
are in Rust), the flow against a closed form, optimizers, bad input, and the cost of calling
the flow from Python."""

import time

import numpy as np
import pytest

import attnflow

from conftest import needs_family

FAMILIES = [f for f in attnflow.family_names() if f != "quadratic"]


def quadratic_instance(d=4, seed=0):
    rng = np.random.default_rng(seed)
    Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
    A = Q @ np.diag(np.linspace(0.5, 5.0, d)) @ Q.T
    A = 0.5 * (A + A.T)
    return {"A": A, "b": rng.normal(size=d), "z0": rng.normal(size=d)}


def check_derivatives(model, z, rng):
    """Central differences of ℓ and ∇ℓ along random directions."""
    h = 1e-5
    for _ in range(3):
        u = rng.normal(size=model.dim)
        fd_dir = (model.loss(z + h * u) - model.loss(z - h * u)) / (2 * h)
        assert model.grad(z) @ u == pytest.approx(fd_dir, rel=1e-5, abs=1e-7)
        fd_hvp = (model.grad(z + h * u) - model.grad(z - h * u)) / (2 * h)
        hv = model.hvp(z, u)
        assert np.linalg.norm(hv - fd_hvp) <= 1e-4 * max(1.0, np.linalg.norm(hv))


@needs_family("quadratic")
def test_quadratic_derivatives_against_differences():
    m = attnflow.Model("quadratic", data=quadratic_instance())
    rng = np.random.default_rng(1)
    check_derivatives(m, rng.normal(size=m.dim), rng)


@pytest.mark.parametrize("family", FAMILIES)
def test_family_derivatives_against_differences(family):
    m = attnflow.Model(family, seed=0)
    rng = np.random.default_rng(2)
    z = m.initial_state() + 0.1 * rng.normal(size=m.dim)
    check_derivatives(m, z, rng)


@needs_family("quadratic")
@pytest.mark.parametrize("method", ["bdf", "esdirk34", "tr_bdf2", "tsit45"])
def test_flow_matches_closed_form(method):
    inst = quadratic_instance()
    m = attnflow.Model("quadratic", data=inst)
    tr = m.flow(t_end=4.0, method=method, rtol=1e-10, atol=1e-12, samples=9)
    lam, V = np.linalg.eigh(inst["A"])
    z_star = np.linalg.solve(inst["A"], inst["b"])
    for t, z in zip(tr.t, tr.states):
        exact = z_star + V @ (np.exp(-lam * t) * (V.T @ (inst["z0"] - z_star)))
        np.testing.assert_allclose(z, exact, rtol=1e-7, atol=1e-8)
    assert np.all(np.diff(tr.loss) <= 1e-12)
    np.testing.assert_allclose(tr.grad_norm, [np.linalg.norm(m.grad(z)) for z in tr.states])
    assert tr.stats["method"] and tr.stats["steps"] > 0
    assert tr.stop_reason.startswith("reached t = 4")


@needs_family("quadratic")
def test_log_clock_and_grid():
    inst = quadratic_instance()
    m = attnflow.Model("quadratic", data=inst)
    log = m.flow(t_end=100.0, clock="log", samples=30)
    assert log.t[0] == 0 and log.t[-1] == pytest.approx(100.0)
    np.testing.assert_allclose(log.states[-1], np.linalg.solve(inst["A"], inst["b"]), atol=1e-6)
    grid = m.flow(grid=[0.0, 0.5, 2.0])
    np.testing.assert_array_equal(grid.t, [0.0, 0.5, 2.0])


@needs_family("quadratic")
def test_gd_and_polyak_match_numpy_iterations():
    inst = quadratic_instance()
    m = attnflow.Model("quadratic", data=inst)
    eta, steps = 0.1, 50
    tr = m.gd(eta, steps, samples=51)
    z = inst["z0"].copy()
    for k in range(steps):
        np.testing.assert_allclose(tr.states[k], z, rtol=1e-12, atol=1e-12)
        z = z - eta * (inst["A"] @ z - inst["b"])
    np.testing.assert_allclose(tr.states[-1], z, rtol=1e-12, atol=1e-12)
    assert m.ngd(0.01, 10, samples=11).states.shape == (11, m.dim)
    assert m.polyak(0.1, 10, loss_star=-1e3, samples=11).loss[-1] < m.loss(inst["z0"])
    with pytest.raises(attnflow.RunError, match="diverged"):
        m.gd(10.0, 200)


@needs_family("quadratic")
def test_default_instance_and_instance_round_trip(tmp_path):
    m = attnflow.Model("quadratic", options={"d": 5})
    assert m.dim == 5
    path = tmp_path / "q.npz"
    attnflow.save_instance(str(path), m.instance())
    again = attnflow.Model("quadratic", data=path)
    np.testing.assert_array_equal(again.initial_state(), m.initial_state())
    assert list(m.matrices()) == ["z"] and m.max_margin() == []


@needs_family("quadratic")
def test_bad_input_raises(tmp_path):
    inst = quadratic_instance()
    with pytest.raises(attnflow.InputError, match="unknown family `nope`"):
        attnflow.Model("nope")
    bad = dict(inst, A=inst["A"] + np.triu(np.ones((4, 4)), 1))
    with pytest.raises(attnflow.InputError, match="data: A: must be symmetric"):
        attnflow.Model("quadratic", data=bad)
    path = tmp_path / "bad.npz"
    np.savez(path, **dict(inst, b=np.ones(3)))
    with pytest.raises(attnflow.InputError, match=r"bad\.npz: b"):
        attnflow.Model("quadratic", data=str(path))
    nan = dict(inst, z0=np.array([0.0, np.nan, 0.0, 0.0]))
    with pytest.raises(attnflow.InputError, match=r"z0\[1\]"):
        attnflow.Model("quadratic", data=nan)
    m = attnflow.Model("quadratic", data=inst)
    with pytest.raises(attnflow.InputError, match="z: has length 2"):
        m.grad(np.zeros(2))
    with pytest.raises(attnflow.InputError, match="method"):
        m.flow(1.0, method="euler")
    with pytest.raises(attnflow.InputError, match="t_end"):
        m.flow(-1.0)
    with pytest.raises(attnflow.InputError, match="grid"):
        m.flow(grid=[0.0, 2.0, 1.0])


@needs_family("quadratic")
def test_python_flow_costs_what_the_rust_flow_costs():
    """The flow called from Python against the same integration timed inside Rust
    (stats.wall_seconds): argument and result conversion must stay below 10%."""
    d = 200
    rng = np.random.default_rng(3)
    Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
    A = Q @ np.diag(np.logspace(0, 3, d)) @ Q.T
    inst = {"A": 0.5 * (A + A.T), "b": rng.normal(size=d), "z0": rng.normal(size=d)}
    m = attnflow.Model("quadratic", data=inst)
    ratios = []
    for _ in range(3):
        start = time.perf_counter()
        tr = m.flow(t_end=10.0, method="bdf", rtol=1e-8, atol=1e-10, samples=200)
        python = time.perf_counter() - start
        ratios.append(python / tr.stats["wall_seconds"])
    print(f"python/rust wall time ratios: {ratios}")
    assert min(ratios) <= 1.10
