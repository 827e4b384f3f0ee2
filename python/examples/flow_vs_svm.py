"""Token selection from a notebook: a random instance built in numpy, the gradient flow of the
attention weights W, and the direction of W(t) against the W-SVM solution (paper 003: W(t)/‖W(t)‖
approaches W_mm/‖W_mm‖). Plots with matplotlib when it is installed.

Run: python python/examples/flow_vs_svm.py [--out FIGURE.png]
"""

import argparse

import numpy as np

import attnflow

FAMILY = "token-select"


def random_instance(base, n=6, T=3, seed=0):
    """Random tokens X (n × T × d), labels y and decoder u in the family's layout; the other
    arrays (the initial state) come from the family's default instance `base`."""
    rng = np.random.default_rng(seed)
    d = base["X"].shape[-1]
    X = rng.normal(size=(n, T, d))
    y = rng.choice([-1.0, 1.0], size=n)
    u = rng.normal(size=d)
    return dict(base, X=X, y=y, u=u)


def main(out=None):
    base = attnflow.Model(FAMILY, seed=0).instance()
    model = attnflow.Model(FAMILY, data=random_instance(base))
    traj = model.flow(t_end=1e4, clock="log", samples=60)
    print(f"{model}: loss {traj.loss[0]:.3e} → {traj.loss[-1]:.3e} ({traj.stop_reason})")

    curves = {}
    for mm in model.max_margin():
        residual = max(mm["certificate"].values(), default=0.0)
        print(f"{mm['name']}: certificate residual {residual:.2e} (≤ {mm['tolerance']:.0e})")
        sol = mm["solution"].ravel()
        curves[mm["name"]] = [
            attnflow.one_minus_cos(model.matrices(z)[mm["matrix"]].ravel(), sol)
            for z in traj.states[1:]
        ]
        print(f"  1 − cos(W(t), W_mm) at t = {traj.t[-1]:.0e}: {curves[mm['name']][-1]:.3e}")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return curves
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, c in curves.items():
        ax.loglog(traj.t[1:], c, label=name)
    ax.set_xlabel("t")
    ax.set_ylabel("1 − cos(W(t), W_mm)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out or "flow_vs_svm.png")
    print(f"plot written to {out or 'flow_vs_svm.png'}")
    return curves


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", help="figure file (default flow_vs_svm.png)")
    main(p.parse_args().out)
