"""The max-margin solvers against their certificates, recomputed in numpy."""

import numpy as np
import pytest

import attnflow


def random_tokens(seed, n=6, T=3, d=4):
    """Tokens with a known separating W (so the programs are feasible)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, T, d))
    z = X[:, 0, :].copy()
    W_true = rng.normal(size=(d, d))
    scores = np.einsum("itd,de,ie->it", X, W_true, z)
    opt = scores.argmax(axis=1)
    return X, z, opt


def constraint_matrices(X, z, opt):
    """D_k = (x_{i,opt} − x_{i,t}) z_iᵀ for every i, t ≠ opt_i."""
    return [
        np.outer(X[i, opt[i]] - X[i, t], z[i])
        for i in range(len(opt))
        for t in range(X.shape[1])
        if t != opt[i]
    ]


def test_w_svm_certificate():
    X, z, opt = random_tokens(0)
    sol = attnflow.w_svm(X, z, list(opt))
    W, alpha = sol["W"], np.array(sol["alpha"])
    D = constraint_matrices(X, z, opt)
    margins = np.array([np.sum(W * Dk) for Dk in D])
    # feasibility, dual feasibility, complementary slackness, stationarity, strong duality
    assert margins.min() >= 1 - 1e-8
    assert alpha.min() >= -1e-10
    assert np.max(np.abs(alpha * (margins - 1))) <= 1e-7
    combo = sum(a * Dk for a, Dk in zip(alpha, D))
    assert np.linalg.norm(W - combo) <= 1e-7 * np.linalg.norm(W)
    assert abs(np.sum(W * W) - alpha.sum()) <= 1e-7 * np.sum(W * W)
    assert max(sol["kkt"].values()) <= 1e-6


def test_nuclear_svm_gap_and_feasibility():
    X, z, opt = random_tokens(1)
    sol = attnflow.nuclear_svm(X, z, list(opt), tol=1e-7)
    W = sol["W"]
    D = constraint_matrices(X, z, opt)
    assert min(np.sum(W * Dk) for Dk in D) >= 1 - 1e-8
    nuclear = np.linalg.svd(W, compute_uv=False).sum()
    assert nuclear == pytest.approx(sol["nuclear_norm"], rel=1e-9)
    # certified bracket: dual value ≤ OPT ≤ ‖Ŵ‖_*, within the requested gap
    assert sol["dual_value"] <= nuclear * (1 + 1e-12)
    assert (nuclear - sol["dual_value"]) / nuclear <= 1e-6
    # never above the Frobenius solution's nuclear norm
    frob = attnflow.w_svm(X, z, list(opt))["W"]
    assert nuclear <= np.linalg.svd(frob, compute_uv=False).sum() * (1 + 1e-9)


def test_l1_svm_strong_duality():
    rng = np.random.default_rng(2)
    beta_true = np.array([2.0, 0.0, -1.0, 0.0, 0.5])
    F = rng.normal(size=(12, 5))
    F *= np.sign(F @ beta_true)[:, None]
    sol = attnflow.l1_svm(F)
    beta, lam = np.array(sol["beta"]), np.array(sol["lambda"])
    assert (F @ beta).min() >= 1 - 1e-8
    assert lam.min() >= -1e-10
    # dual feasibility ‖Fᵀλ‖_∞ ≤ 1 and strong duality ‖β‖₁ = 1ᵀλ
    assert np.abs(F.T @ lam).max() <= 1 + 1e-7
    assert np.abs(beta).sum() == pytest.approx(lam.sum(), rel=1e-7)


def test_infeasible_and_malformed():
    X = np.zeros((1, 2, 2))
    X[0, 0] = X[0, 1] = [1.0, 0.0]  # identical tokens: no margin possible
    z = np.array([[1.0, 0.0]])
    with pytest.raises(attnflow.RunError, match="infeasible"):
        attnflow.w_svm(X, z, [0])
    with pytest.raises(attnflow.InputError, match=r"opt\[0\]"):
        attnflow.w_svm(X, z, [5])
    with pytest.raises(attnflow.InputError, match="z"):
        attnflow.w_svm(X, np.zeros((2, 2)), [0])
