"""``ray.tune.search.optuna``: OptunaSearch is tunejet's TPE (or NSGA-II),
which runs in Go with Optuna's defaults (no Optuna needed)."""

from tunejet.tune.search import _Native


class NSGAIISampler:
    """Optuna's NSGAIISampler for ``OptunaSearch(sampler=...)``: tunejet's
    NSGA-II (``search_alg: nsga2``), which runs in Go with Optuna's defaults
    (population_size 50, mutation_prob 1/number of parameters,
    crossover_prob 0.9, uniform crossover with swapping_prob 0.5). Import
    it from here instead of ``optuna.samplers``; the arguments that take
    Python objects (crossover, constraints_func, the strategies) are not
    supported."""

    def __init__(self, population_size=50, mutation_prob=None, crossover_prob=0.9, swapping_prob=0.5, seed=None):
        self.settings = {
            "population_size": population_size,
            "mutation_prob": mutation_prob,
            "crossover_prob": crossover_prob,
            "swapping_prob": swapping_prob,
        }
        self.seed = seed


class OptunaSearch(_Native):
    """Optuna's TPE sampler. space is a dict of Tune's search space
    functions (tune.uniform, tune.choice, ...), which the Tuner then takes
    as its param_space; metric and mode are the experiment's when
    TuneConfig has none, as in Ray, and may be lists: several metrics
    optimized together (Optuna's multi-objective TPE). The sampler is TPE
    (its settings as keyword arguments: n_startup_trials, n_ei_candidates,
    multivariate, ...), or NSGA-II with sampler=NSGAIISampler(...) from
    this module. evaluated_rewards, one per point of points_to_evaluate
    (each then a whole config), make those points trials already run: TPE
    learns from them and none runs them, as Ray adds them to the study.
    Other Optuna samplers, an Optuna define-by-run function or
    distributions as space are not supported."""

    _type = "tpe"

    def __init__(self, space=None, metric=None, mode=None, points_to_evaluate=None, sampler=None,
                 seed=None, evaluated_rewards=None, **tpe_settings):
        if sampler is not None and not isinstance(sampler, NSGAIISampler):
            if type(sampler).__name__ == "NSGAIISampler":
                raise ValueError(
                    "OptunaSearch(sampler=optuna.samplers.NSGAIISampler(...)): use "
                    "tunejet.tune.search.optuna.NSGAIISampler(...), which takes the same arguments and runs in tunejet"
                )
            raise ValueError("OptunaSearch(sampler=...) takes tunejet.tune.search.optuna.NSGAIISampler only; see its docstring")
        if isinstance(sampler, NSGAIISampler):
            if tpe_settings or evaluated_rewards is not None:
                raise ValueError(
                    "OptunaSearch(sampler=NSGAIISampler(...)) takes no TPE settings or evaluated_rewards, got %s"
                    % ", ".join(sorted(tpe_settings) + (["evaluated_rewards"] if evaluated_rewards is not None else []))
                )
            if seed is None:
                seed = sampler.seed
            self._type = "nsga2"
            tpe_settings = dict(sampler.settings)
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


__all__ = ["NSGAIISampler", "OptunaSearch"]
