"""``ray.tune.search.optuna``: OptunaSearch is tunejet's TPE, which runs in
Go with Optuna's TPE defaults (no Optuna needed)."""

from tunejet.tune.search import _Native


class OptunaSearch(_Native):
    """Optuna's TPE sampler. space is a dict of Tune's search space
    functions (tune.uniform, tune.choice, ...), which the Tuner then takes
    as its param_space; metric and mode are the experiment's when
    TuneConfig has none, as in Ray. The sampler is TPE (its settings as
    keyword arguments: n_startup_trials, n_ei_candidates, multivariate,
    ...); sampler= (another Optuna sampler), an Optuna define-by-run
    function or distributions as space, and evaluated_rewards are not
    supported."""

    _type = "tpe"

    def __init__(self, space=None, metric=None, mode=None, points_to_evaluate=None, sampler=None,
                 seed=None, evaluated_rewards=None, **tpe_settings):
        for name, value in (("sampler", sampler), ("evaluated_rewards", evaluated_rewards)):
            if value is not None:
                raise ValueError("OptunaSearch(%s=...) is not supported; see its docstring" % name)
        if space is not None and not isinstance(space, dict):
            raise ValueError(
                "OptunaSearch(space=...) takes a dict of Tune's search space functions "
                "(tune.uniform, tune.choice, ...); a define-by-run function is not supported"
            )
        super().__init__(points_to_evaluate, metric, mode, seed=seed, **tpe_settings)
        self.space = space


__all__ = ["OptunaSearch"]
