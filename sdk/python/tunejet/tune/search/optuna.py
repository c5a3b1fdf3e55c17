"""``ray.tune.search.optuna``: OptunaSearch is tunejet's TPE, which runs in
Go with Optuna's TPE defaults (no Optuna needed)."""

from tunejet.tune.search import _Native


class OptunaSearch(_Native):
    """Optuna's TPE sampler. space is a dict of Tune's search space
    functions (tune.uniform, tune.choice, ...), which the Tuner then takes
    as its param_space; metric and mode are the experiment's when
    TuneConfig has none, as in Ray. The sampler is TPE (its settings as
    keyword arguments: n_startup_trials, n_ei_candidates, multivariate,
    ...). evaluated_rewards, one per point of points_to_evaluate (each
    then a whole config), make those points trials already run: TPE
    learns from them and none runs them, as Ray adds them to the study.
    sampler= (another Optuna sampler), an Optuna define-by-run function or
    distributions as space are not supported."""

    _type = "tpe"

    def __init__(self, space=None, metric=None, mode=None, points_to_evaluate=None, sampler=None,
                 seed=None, evaluated_rewards=None, **tpe_settings):
        if sampler is not None:
            raise ValueError("OptunaSearch(sampler=...) is not supported; see its docstring")
        if evaluated_rewards is not None:
            if len(evaluated_rewards) != len(points_to_evaluate or []):
                raise ValueError(
                    "evaluated_rewards has %d values and points_to_evaluate %d points: give one value per point"
                    % (len(evaluated_rewards), len(points_to_evaluate or []))
                )
            tpe_settings["evaluated_rewards"] = [float(r) for r in evaluated_rewards]
        if space is not None and not isinstance(space, dict):
            raise ValueError(
                "OptunaSearch(space=...) takes a dict of Tune's search space functions "
                "(tune.uniform, tune.choice, ...); a define-by-run function is not supported"
            )
        super().__init__(points_to_evaluate, metric, mode, seed=seed, **tpe_settings)
        self.space = space


__all__ = ["OptunaSearch"]
