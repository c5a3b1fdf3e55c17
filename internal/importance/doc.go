// Package importance computes hyperparameter importance: how much of the
// variation of a metric across trials each parameter explains. It is pure:
// no I/O, no clock, and the same arguments and seed give the same result.
//
// # The method
//
// Fanova is fANOVA (Hutter, Hoos and Leyton-Brown, "An Efficient Approach
// for Assessing Hyperparameter Importance", ICML 2014,
// http://proceedings.mlr.press/v32/hutter14.html) as Optuna's
// FanovaImportanceEvaluator computes it, ported from Optuna at commit
// 1d8ce7bb: optuna/importance/_fanova/_evaluator.py (the settings and the
// encoding), _fanova.py (the forest and the averaging) and _tree.py (the
// decomposition of one tree), optuna/_transform.py (the encoding) and
// optuna/importance/__init__.py (the normalization).
//
//  1. Encoding. Each parameter becomes columns as _SearchSpaceTransform
//     with transform_log and transform_step false makes them: a numeric
//     parameter one column of its values, bounded by its domain's bounds
//     (not in log space, not widened by half a step); a categorical one a
//     0/1 column per choice, bounded by [0, 1]. A parameter with a single
//     possible value is left out and gets 0, as Optuna leaves it out; so is
//     one whose trials all hold the same value, which no tree could split
//     on anyway.
//  2. Forest. 64 regression trees, as scikit-learn's RandomForestRegressor
//     with n_estimators 64, max_depth 64, min_samples_split 2,
//     min_samples_leaf 1 and its defaults otherwise: each tree is fitted
//     on a bootstrap sample of the trials (n draws with replacement,
//     carried as weights), and each node takes the best split over all
//     features (tried in a random order) and all midpoints between
//     consecutive distinct values, by weighted variance reduction, until a
//     node holds a single distinct trial or a constant target.
//  3. Decomposition. For each tree, under the uniform distribution over
//     the bounded search space: the variance of the tree's prediction (its
//     leaves' values weighted by their volumes), and for each parameter
//     the variance of its marginal prediction, the prediction averaged
//     over all the other columns, which is constant on each cell between
//     consecutive thresholds the tree uses on the parameter's columns. The
//     parameter's fraction in the tree is the second over the first.
//  4. Each parameter's fraction is averaged over the trees whose variance
//     is not 0, and the averages are scaled to sum to 1.
//
// # Where it differs from Optuna
//
// The result is fANOVA's, not Optuna's digits: scikit-learn draws its
// bootstrap samples and feature orders from NumPy's generator, this
// package from a PCG generator of math/rand/v2 seeded by (seed, tree
// index), so the forests differ as two seeds' forests differ. The
// computation is otherwise the same, with these exceptions:
//
//   - The marginal of a parameter is computed from the leaves, each adding
//     its value to the cells its box spans, instead of walking the tree
//     once per cell; the sums are the same, the cost one pass over the
//     leaves.
//   - With more than MaxSamples (2,000) trials, each tree's bootstrap
//     sample draws MaxSamples trials, scikit-learn's max_samples, where
//     Optuna draws as many as there are trials. On 10,000 trials of five
//     parameters (one a choice of four) the forest took 0.5 s to 0.65 s of CPU
//     without the cap and 0.15 s with it (BenchmarkImportance10k, on a
//     shared 2-core machine); the planted-parameter test on 5,000 trials
//     checks that the ranking survives it.
//   - A constant target, where Optuna's fANOVA raises an error, gives every
//     parameter 0. When the fractions sum to 0 although the target varies
//     (it depends on the parameters through interactions only),
//     get_param_importances gives every parameter 1/n; here only the
//     parameters that vary share 1.
//   - A categorical parameter of more than MaxOneHotChoices choices is one
//     column of its choice index, bounded by [-0.5, last+0.5], instead of
//     one-hot: the marginal of a one-hot parameter takes every corner of
//     its columns, 2^choices cells per tree, which Optuna pays too.
//   - Bounds that do not hold every value are widened to, so that every
//     trial lies in the space the volumes are measured in.
//
// Note that optuna-dashboard itself uses PED-ANOVA
// (PedAnovaImportanceEvaluator, optuna/importance/_ped_anova/), as Optuna's
// docs/source/reference/importance.rst says, and so does
// get_param_importances by default since Optuna 5.0 (commit 773f01bd2);
// it is cheaper and gives different values. This package computes fANOVA,
// FanovaImportanceEvaluator, the default before Optuna 5.0.
package importance
