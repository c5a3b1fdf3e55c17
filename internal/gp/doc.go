// Package gp is Gaussian-process search (search_alg bayesopt, also gp):
// Optuna's GPSampler (optuna/samplers/_gp/sampler.py and optuna/_gp/ at
// optuna/optuna 1d8ce7bb) for one objective, in Go with gonum's linear
// algebra.
//
// The model. Parameters are normalized to [0, 1]: a numeric domain's
// value v as (v − (low − step/2)) / (high − low + step) (of log v for log
// domains, from log(low − step/2) to log(high + step/2)); a choice is its
// index. The objective is signed so that larger is better and
// standardized (mean 0, standard deviation 1). The kernel is Matérn 5/2
// with automatic relevance determination,
//
//	k(x, x') = s · (1 + √(5r²) + 5r²/3) · exp(−√(5r²)),  r² = Σ_j λ_j d_j(x, x')²,
//
// where d_j is the difference for numeric parameters and 0 or 1 for
// choices (Hamming), plus a noise variance σ² on the diagonal. The
// kernel's parameters (the inverse squared length scales λ_j, the scale s,
// σ²) maximize the marginal likelihood plus Optuna's prior,
//
//	−Σ_j (0.1/λ_j + 0.1 λ_j) + (log s − s) + (0.1 log σ² − 30 σ²),
//
// over their logs, with σ² ≥ 10⁻⁶ (exactly 10⁻⁶ with
// deterministic_objective), by L-BFGS from λ = s = σ² = 1 and the analytic
// gradient. A fit whose Cholesky factorization fails falls back to those
// starting values, as Optuna's does.
//
// The acquisition is log expected improvement over the best value so far
// (Optuna's logEI, computed stably far below the best). It is maximized as
// Optuna does: 2,048 random points (uniform; Optuna draws a scrambled Sobol
// sequence), the best of them, the best trial so far, and 8 more drawn by
// roulette from exp(logEI − max) are the starts of local searches, each
// alternating L-BFGS over the numeric parameters without a step (scaled by
// their length scales; bounded, with the steps projected onto the box and
// variables held at a bound the gradient pushes out, where Optuna runs
// scipy's L-BFGS-B) with an exhaustive search over each choice and each stepped
// parameter of up to 16 values, or a golden-section search over the grid
// of a longer one, until no parameter moves.
//
// Trials in flight: Optuna conditions on them by sampling fantasies
// (qLogEI); this sampler takes the Kriging believer of Ginsbourger et al.
// (2010), as Optuna's GP probability of improvement does: each running
// trial joins the model with the model's own mean at its point, so that
// the variance, and with it the expected improvement, collapses there and
// parallel suggestions spread out.
//
// Determinism. A suggestion is a function of the history and the random
// generator passed in, nothing else: unlike Optuna, the kernel's fit does
// not start from the previous suggestion's, so that a restored experiment
// suggests exactly what it would have. Before n_startup_trials trials have
// completed, parameters are drawn uniformly at random (Optuna's
// RandomSampler). Pruned trials are not used, as in Optuna.
package gp
