"""Ray's search algorithms (``ray.tune.search``), by name.

BasicVariantGenerator is random search (the default); OptunaSearch
(``tunejet.tune.search.optuna``) is tunejet's TPE, with Optuna's defaults;
ConcurrencyLimiter sets tune_config.max_concurrent_trials.
"""

from tunejet import _space


class Searcher:
    """A search algorithm of the experiment file: its type and settings."""

    _type = ""

    def __init__(self, points_to_evaluate=None, **settings):
        self.points_to_evaluate = points_to_evaluate
        self.settings = {k: v for k, v in settings.items() if v is not None}

    def to_spec(self):
        """Return the search algorithm in the experiment file's syntax."""
        spec = {"type": self._type}
        spec.update({k: _space._plain(v, "tune_config.search_alg." + k) for k, v in self.settings.items()})
        if self.points_to_evaluate:
            spec["points_to_evaluate"] = _space._plain(list(self.points_to_evaluate), "points_to_evaluate")
        return spec


class BasicVariantGenerator(Searcher):
    """Random search over the param space (grid_search values each once per
    sample), after points_to_evaluate. random_state seeds it when
    TuneConfig has no seed; max_concurrent limits concurrent trials."""

    _type = "random"

    def __init__(self, points_to_evaluate=None, max_concurrent=0, constant_grid_search=False,
                 random_state=None):
        super().__init__(points_to_evaluate)
        self.max_concurrent = max_concurrent
        self.random_state = random_state

    def to_spec(self):
        spec = super().to_spec()
        if self.max_concurrent:
            return spec, self.max_concurrent
        return spec


class Repeater:
    """Ray's Repeater (each suggestion run repeat times, the searcher told
    their average) is not supported yet: it runs in Ray's driver."""

    def __init__(self, searcher, repeat=1, set_index=True):
        raise ValueError(
            "Repeater is not supported yet: Ray runs it in the driver, and tunejet's controller does not "
            "yet ask the driver for trials; use num_samples with a seeded search instead"
        )


class ConcurrencyLimiter:
    """Limits the concurrent trials of searcher to max_concurrent."""

    def __init__(self, searcher, max_concurrent, batch=False):
        if batch:
            raise ValueError("ConcurrencyLimiter(batch=True) is not supported")
        self.searcher = searcher
        self.max_concurrent = max_concurrent

    def to_spec(self):
        spec = self.searcher.to_spec()
        if isinstance(spec, tuple):
            spec, limit = spec
            return spec, min(limit, self.max_concurrent)
        return spec, self.max_concurrent


__all__ = ["Searcher", "BasicVariantGenerator", "ConcurrencyLimiter", "Repeater"]
