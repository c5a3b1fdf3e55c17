"""Optuna's GPSampler on the regret study's problems, for the anchors of
regret_test.go (gpAnchors): is the gap between tunejet's GP and Optuna's
20-seed figures luck, or does Optuna's GPSampler settle on Hartmann6's
edge local optima less often? It takes many more seeds to tell.

Run with Optuna's source on the path (commit 1d8ce7bb, Optuna 5.0.0.dev;
it needs numpy, scipy, torch, sqlalchemy, alembic, colorlog, tqdm, PyYAML
and packaging, all in Debian as python3-*):

    git -C OPTUNA_REPO archive 1d8ce7bb optuna | tar x -C /tmp/optuna-src
    OMP_NUM_THREADS=1 PYTHONPATH=/tmp/optuna-src \\
        python3 gp_regret.py branin 0 200 > branin.txt
    OMP_NUM_THREADS=1 PYTHONPATH=/tmp/optuna-src \\
        python3 gp_regret.py hartmann6 0 200 > hartmann6.txt
    python3 gp_regret.py summary branin.txt hartmann6.txt

(ranges of seeds can run side by side and their files be concatenated; a
Hartmann6 study took 5 to 8 s here), and, beside tunejet's per-seed lines
(TUNEJET_REGRET_PERSEED=1 in the regret study, its output in tunejet.txt):

    python3 gp_regret.py compare branin.txt hartmann6.txt -- tunejet.txt

branin.txt and hartmann6.txt beside this script are such runs, seeds 0 to
199, on Debian 12's python3 3.11, numpy 1.24, scipy 1.10 and torch 1.13.
Seeds 0-19 reproduce the 20-seed anchors closely but not to the last digit
(Branin N=50 3.967e-05 [1.32e-05, 0.000165], Hartmann6 N=100 0.0002252
[8.59e-05, 0.00211]; the runs are deterministic here, so the reference
differed in some floating-point detail, which a GP's path amplifies).

Debian's torch is 1.13, where torch.device is no context manager: in
optuna/samplers/_gp/sampler.py, `with torch.device("cpu"):` (the CPU
pinning of sample_relative) has to become `if True:` for the sampler to
run. Nothing else changes.

Each line is "problem seed" and the simple regret (best so far minus the
optimum) after 25, 50 and 100 trials (Branin runs 50 trials, so its N=100
column repeats N=50's), flushed as it comes so a partial run is still
useful. "summary" prints the medians [25th, 75th percentile] of such files
(numpy's linear interpolation, as internal/regret.Percentile) and, for
Hartmann6, the fraction of seeds whose regret at N=100 is above 0.05: the
seeds stuck on an edge local optimum (regret 0.119 or 0.185). "compare"
prints both summaries and tests whether they differ: Mann-Whitney's U on
the regrets at Branin's N=50 and Hartmann6's N=100, and Fisher's exact test
on the stuck counts (both two-sided; scipy).
"""

import math
import sys

NS = (25, 50, 100)
TRIALS = {"branin": 50, "hartmann6": 100}
STUCK = 0.05


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


def run(name, seed):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    suggest, f, f_star = PROBLEMS[name]
    study = optuna.create_study(sampler=optuna.samplers.GPSampler(seed=seed))
    best = []
    for _ in range(TRIALS[name]):
        trial = study.ask()
        v = f(suggest(trial))
        study.tell(trial, v)
        best.append(min(v, best[-1]) if best else v)
    return [best[min(n, len(best)) - 1] - f_star for n in NS]


def percentile(s, q):
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    if lo + 1 >= len(s):
        return s[lo]
    return s[lo] + (pos - lo) * (s[lo + 1] - s[lo])


def read(paths):
    """The per-seed lines of paths, wherever they are in a line (go test -v
    prefixes them with the file and line): {problem: {seed: regrets}}."""
    rows = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                fields = line.split()[-2 - len(NS):]
                if len(fields) == 2 + len(NS) and fields[0] in PROBLEMS:
                    try:
                        rows.setdefault(fields[0], {})[int(fields[1])] = [float(r) for r in fields[2:]]
                    except ValueError:
                        pass
    return rows


def summary(rows):
    for name, by_seed in sorted(rows.items()):
        parts = []
        for i, n in enumerate(NS):
            if n > TRIALS[name]:
                continue
            s = sorted(r[i] for r in by_seed.values())
            parts.append("N=%d %.4g [%.3g, %.3g]" % (n, percentile(s, 0.5), percentile(s, 0.25), percentile(s, 0.75)))
        line = "%-10s %d seeds  %s" % (name, len(by_seed), "  ".join(parts))
        if name == "hartmann6":
            stuck = sum(r[-1] > STUCK for r in by_seed.values())
            line += "  stuck (N=100 > %g): %d/%d" % (STUCK, stuck, len(by_seed))
        print(line)


def compare(a, b):
    from scipy import stats

    for name in sorted(a.keys() & b.keys()):
        i = NS.index(TRIALS[name])
        ra = [r[i] for r in a[name].values()]
        rb = [r[i] for r in b[name].values()]
        u = stats.mannwhitneyu(ra, rb, alternative="two-sided")
        line = "%-10s N=%d Mann-Whitney U %g, p %.3g" % (name, TRIALS[name], u.statistic, u.pvalue)
        if name == "hartmann6":
            sa, sb = sum(r > STUCK for r in ra), sum(r > STUCK for r in rb)
            odds, p = stats.fisher_exact([[sa, len(ra) - sa], [sb, len(rb) - sb]])
            line += "; stuck %d/%d vs %d/%d, Fisher's exact p %.3g" % (sa, len(ra), sb, len(rb), p)
        print(line)


def main():
    if sys.argv[1] == "summary":
        summary(read(sys.argv[2:]))
        return
    if sys.argv[1] == "compare":
        cut = sys.argv.index("--")
        a, b = read(sys.argv[2:cut]), read(sys.argv[cut + 1:])
        print("first:")
        summary(a)
        print("second:")
        summary(b)
        compare(a, b)
        return
    import torch

    torch.set_num_threads(1)
    name, first, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    for seed in range(first, end):
        print(name, seed, " ".join("%.6g" % r for r in run(name, seed)), flush=True)


if __name__ == "__main__":
    main()
