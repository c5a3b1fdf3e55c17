"""``ray.tune.search.bayesopt``: BayesOptSearch is tunejet's Gaussian-process
search, which runs in Go (no bayes_opt package needed)."""

import warnings

from tunejet.tune.search import _Native


class BayesOptSearch(_Native):
    """Gaussian-process Bayesian optimization in tunejet's controller
    (search_alg bayesopt: Optuna's GPSampler, docs/api.md), in place of
    Ray's wrapper of the bayes_opt package. space is a dict of Tune's
    search space functions, which the Tuner then takes as its param_space;
    metric and mode are the experiment's when TuneConfig has none, as in
    Ray. random_search_steps (Ray's default 10) configs are drawn at random
    first; random_state, when given, seeds the experiment (Ray's default is
    42, tunejet's the experiment's seed). Unlike bayes_opt, any bounded
    domain is modeled (integers, steps, log scales, choices), not only
    uniform floats.

    The acquisition is log expected improvement, not bayes_opt's upper
    confidence bound: utility_kwargs is accepted, with a warning, and has
    no effect, as have patience, skip_duplicate and verbose. analysis=
    (warm-starting from another experiment) is not supported."""

    _type = "bayesopt"

    def __init__(self, space=None, metric=None, mode=None, points_to_evaluate=None, utility_kwargs=None,
                 random_state=None, random_search_steps=10, verbose=0, patience=5, skip_duplicate=True,
                 analysis=None, **gp_settings):
        if analysis is not None:
            raise ValueError("BayesOptSearch(analysis=...) is not supported: tunejet's bayesopt learns "
                             "from the experiment's own trials")
        if space is not None and not isinstance(space, dict):
            raise ValueError("BayesOptSearch(space=...) takes a dict of Tune's search space functions "
                             "(tune.uniform, tune.choice, ...)")
        if utility_kwargs is not None:
            warnings.warn("BayesOptSearch(utility_kwargs=...) has no effect: tunejet's bayesopt maximizes "
                          "log expected improvement (Optuna's GPSampler)", stacklevel=2)
        gp_settings.setdefault("n_startup_trials", random_search_steps)
        super().__init__(points_to_evaluate, metric, mode, seed=random_state, **gp_settings)
        self.space = space


__all__ = ["BayesOptSearch"]
