"""Optuna's TPE on the regret study's problems, for the anchors of
regret_test.go (tpeAnchors800).

Run with Optuna's source on the path (commit 1d8ce7bb, Optuna 5.0.0.dev;
it needs numpy, sqlalchemy, alembic, colorlog, tqdm, PyYAML and packaging,
all in Debian as python3-*):

    git -C OPTUNA_REPO archive 1d8ce7bb optuna | tar x -C /tmp/optuna-src
    PYTHONPATH=/tmp/optuna-src python3 regret.py branin 0 800 > branin.txt
    PYTHONPATH=/tmp/optuna-src python3 regret.py hartmann6 0 800 > h6.txt
    PYTHONPATH=/tmp/optuna-src python3 regret.py hartmann6 0 300 8 > h6-8.txt

Each line is "problem seed" and the simple regret after 10, 25, 50 and 100
trials. With a fourth argument, that many trials are in flight, completed
one at a time in random order as runParallel does (the order comes from
another generator than tunejet's, so only the distributions compare).
"""

import math
import random
import sys

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)


def branin(x1, x2):
    b, c, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
    u = x2 - b * x1 * x1 + c * x1 - 6
    return u * u + 10 * (1 - t) * math.cos(x1) + 10


A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
     [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
P = [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
     [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]
ALPHA = [1, 1.2, 3, 3.2]


def hartmann6(x):
    return -sum(ALPHA[i] * math.exp(-sum(A[i][j] * (x[j] - P[i][j] * 1e-4) ** 2 for j in range(6)))
                for i in range(4))


PROBLEMS = {
    # name: (params of a trial, objective of the params, minimum)
    "branin": (lambda t: [t.suggest_float("x1", -5, 10), t.suggest_float("x2", 0, 15)],
               lambda x: branin(*x), 0.397887),
    "hartmann6": (lambda t: [t.suggest_float(f"x{j}", 0, 1) for j in range(1, 7)],
                  hartmann6, -3.32237),
}
NS = (10, 25, 50, 100)


def run(name, seed, in_flight):
    suggest, f, f_star = PROBLEMS[name]
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
    order = random.Random(seed)
    running, best = [], []

    def ask():
        trial = study.ask()
        running.append((trial, suggest(trial)))

    for _ in range(in_flight):
        ask()
    while len(best) < NS[-1]:
        trial, x = running.pop(order.randrange(len(running)))
        v = f(x)
        study.tell(trial, v)
        best.append(min(v, best[-1]) if best else v)
        if len(best) + len(running) < NS[-1]:
            ask()
    return [best[n - 1] - f_star for n in NS]


def main():
    name, first, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    in_flight = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    for seed in range(first, end):
        print(name, seed, " ".join("%.6g" % r for r in run(name, seed, in_flight)), flush=True)


if __name__ == "__main__":
    main()
