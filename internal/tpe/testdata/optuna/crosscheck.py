"""The figures of crosscheck_test.go, from Optuna's own code.

Run with Optuna's source on the path (commit 1d8ce7bb, Optuna 5.0.0.dev,
numpy 1.24.2), as regret.py says:

    PYTHONPATH=/tmp/optuna-src python3 crosscheck.py

It prints the 40 trials of the history, the split, log l and log g at eight
points, and the statistics of a million candidates drawn from l. numpy's
argsort is made stable inside the Parzen estimator (see crosscheck_test.go
for why); pass --numpy-argsort to keep numpy's default.
"""

import sys

import numpy as np
import optuna
from optuna.distributions import CategoricalDistribution
from optuna.distributions import FloatDistribution
from optuna.distributions import IntDistribution
import optuna.samplers._tpe.parzen_estimator as pe
from optuna.samplers._tpe.sampler import _split_trials
from optuna.samplers._tpe.sampler import default_gamma
from optuna.samplers._tpe.sampler import default_weights

optuna.logging.set_verbosity(optuna.logging.WARNING)

if "--numpy-argsort" not in sys.argv:
    class _StableArgsort:
        def __getattr__(self, name):
            return getattr(np, name)

        @staticmethod
        def argsort(a, *args, **kwargs):
            kwargs.setdefault("kind", "stable")
            return np.argsort(a, *args, **kwargs)

    pe.np = _StableArgsort()

space = {
    "c": CategoricalDistribution(["a", "b", "c"]),
    "k": IntDistribution(1, 99, log=True),
    "lr": FloatDistribution(1e-3, 1, log=True),
    "n": IntDistribution(0, 9),
    "q": FloatDistribution(0, 1, step=0.1),
    "x": FloatDistribution(0, 1),
}
rs = np.random.RandomState(7)


def draw():
    return {
        "c": ["a", "b", "c"][rs.randint(3)],
        "k": int(rs.randint(1, 100)),
        "lr": float(np.round(10 ** rs.uniform(-3, 0), 6)),
        "n": int(rs.randint(0, 10)),
        "q": float(np.round(rs.randint(0, 11) / 10, 1)),
        "x": float(np.round(rs.uniform(0, 1), 6)),
    }


def go(p):
    return 'cfg("%s", %d, %r, %d, %r, %r)' % (p["c"], p["k"], p["lr"], p["n"], p["q"], p["x"])


study = optuna.create_study()
print("history")
for _ in range(40):
    p = draw()
    v = float(np.round((p["x"] - 0.3) ** 2 + (p["n"] - 4) ** 2 / 20 + (p["c"] != "b"), 1))
    study.add_trial(optuna.trial.create_trial(params=p, distributions=space, value=v))
    print("\t{%s, %r}," % (go(p), v))
trials = study.get_trials()
below, above = _split_trials(study, trials, default_gamma(len(trials)))
print("below", [t.number for t in below])
parameters = pe._ParzenEstimatorParameters(1.0, True, False, default_weights, True)


def observations(ts):
    return {n: np.array([d.to_internal_repr(t.params[n]) for t in ts]) for n, d in space.items()}


l = pe._ParzenEstimator(observations(below), space, parameters)
g = pe._ParzenEstimator(observations(above), space, parameters)
points = [draw() for _ in range(8)]
x = {n: np.array([d.to_internal_repr(p[n]) for p in points]) for n, d in space.items()}
print("points")
for p, lp, gp in zip(points, l.log_pdf(x), g.log_pdf(x)):
    print("\t{%s, %.17g, %.17g}," % (go(p), lp, gp))

s = l.sample(np.random.RandomState(11), 1000000)
print("candidates")
print("P(c = a), P(c = b):", np.mean(s["c"] == 0), np.mean(s["c"] == 1))
for n in ("k", "lr"):
    print("E[log %s] %.5f sd %.5f" % (n, np.log(s[n]).mean(), np.log(s[n]).std()))
for n in ("n", "q", "x"):
    print("E[%s] %.5f sd %.5f" % (n, s[n].mean(), s[n].std()))
for a, b in (("x", "n"), ("q", "x")):
    print("E[%s%s] %.5f sd %.5f" % (a, b, np.mean(s[a] * s[b]), np.std(s[a] * s[b])))
print("P(c = b, n = 4) %.5f" % np.mean((s["c"] == 1) & (s["n"] == 4)))
