"""``ray.tune.search.optuna``: OptunaSearch is tunejet's TPE, which runs in
Go with Optuna's TPE defaults (no Optuna needed)."""

from tunejet.tune.search import Searcher


class OptunaSearch(Searcher):
    """Optuna's TPE sampler. space, sampler and evaluated_rewards are not
    supported: the space is the Tuner's param_space, the sampler is TPE
    (its settings as keyword arguments: n_startup_trials, n_ei_candidates,
    multivariate, ...). metric and mode must be TuneConfig's."""

    _type = "tpe"

    def __init__(self, space=None, metric=None, mode=None, points_to_evaluate=None, sampler=None,
                 seed=None, evaluated_rewards=None, **tpe_settings):
        for name, value in (("space", space), ("sampler", sampler), ("evaluated_rewards", evaluated_rewards)):
            if value is not None:
                raise ValueError("OptunaSearch(%s=...) is not supported; see its docstring" % name)
        if metric is not None or mode is not None:
            raise ValueError("OptunaSearch: give metric and mode to TuneConfig")
        super().__init__(points_to_evaluate, seed=seed, **tpe_settings)


__all__ = ["OptunaSearch"]
