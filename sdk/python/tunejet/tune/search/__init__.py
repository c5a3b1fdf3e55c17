"""Ray's search algorithms (``ray.tune.search``).

Searcher is Ray's base class: a subclass of your own runs in the driver,
as in Ray, and tunejet's controller asks it for each new trial's config
(docs/driver.md). Repeater is Ray's, and runs there too.
BasicVariantGenerator is random search (the default) and OptunaSearch
(``tunejet.tune.search.optuna``) tunejet's TPE: both run in tunejet's
controller, named in the experiment file. ConcurrencyLimiter sets
tune_config.max_concurrent_trials, over either kind.
"""

import copy
import math

from tunejet import _space


class Searcher:
    """Ray's Searcher: subclass it and implement ``suggest(trial_id)``
    (a config dict, ``Searcher.FINISHED`` when there are no more, or None
    to be asked again later) and ``on_trial_complete(trial_id, result=None,
    error=False)``; ``on_trial_result(trial_id, result)`` is optional.

    fit() runs it in the driver: before its first suggest, when the
    Tuner's param_space is not empty or the searcher has no metric or
    mode of its own, set_search_properties(metric, mode, param_space) is
    called once with TuneConfig's metric and mode. Its notifications come
    in the experiment's log order, each before the suggest that follows
    it there. fit() pickles it before its first call, and Tuner.restore
    replays what the killed driver's searcher saw, so save/restore and
    get_state/set_state are not needed (they are Ray's API, not called)."""

    FINISHED = "FINISHED"
    CKPT_FILE_TMPL = "searcher-state-{}.pkl"

    def __init__(self, metric=None, mode=None):
        self._metric = metric
        self._mode = mode
        if not mode or not metric:
            return
        if isinstance(mode, str):
            if mode not in ("min", "max"):
                raise ValueError("if `mode` is a str must be 'min' or 'max'!")
        elif isinstance(mode, list):
            if len(mode) != len(metric):
                raise ValueError("Metric and mode must be the same length")
        else:
            raise ValueError("Mode most either be a list or string")

    @property
    def metric(self):
        """The training result objective value attribute."""
        return getattr(self, "_metric", None)

    @property
    def mode(self):
        """Specifies if minimizing or maximizing the metric."""
        return getattr(self, "_mode", None)

    def set_search_properties(self, metric, mode, config, **spec):
        """Takes the Tuner's metric, mode and param_space; returns whether
        it took them."""
        return False

    def suggest(self, trial_id):
        raise NotImplementedError

    def on_trial_result(self, trial_id, result):
        pass

    def on_trial_complete(self, trial_id, result=None, error=False):
        raise NotImplementedError

    def add_evaluated_point(self, parameters, value, error=False, pruned=False, intermediate_values=None):
        raise NotImplementedError

    def add_evaluated_trials(self, trials_or_analysis, metric):
        raise NotImplementedError

    def set_max_concurrency(self, max_concurrent):
        return False

    def save(self, checkpoint_path):
        raise NotImplementedError

    def restore(self, checkpoint_path):
        raise NotImplementedError

    def get_state(self):
        raise NotImplementedError

    def set_state(self, state):
        raise NotImplementedError


class _Native(Searcher):
    """A search algorithm tunejet's controller runs: its type and settings
    in the experiment file. The driver never calls it."""

    _type = ""

    def __init__(self, points_to_evaluate=None, metric=None, mode=None, **settings):
        super().__init__(metric, mode)
        self.points_to_evaluate = points_to_evaluate
        self.settings = {k: v for k, v in settings.items() if v is not None}

    def suggest(self, trial_id):
        raise TypeError("%s runs in tunejet's controller, not in Python" % type(self).__name__)

    def to_spec(self):
        """Return the search algorithm in the experiment file's syntax."""
        spec = {"type": self._type}
        spec.update({k: _space._plain(v, "tune_config.search_alg." + k) for k, v in self.settings.items()})
        if self.points_to_evaluate:
            spec["points_to_evaluate"] = _space._plain(list(self.points_to_evaluate), "points_to_evaluate")
        return spec


def is_native(searcher):
    """Whether searcher runs in tunejet's controller (named in the file)."""
    return isinstance(searcher, _Native)


class BasicVariantGenerator(_Native):
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


# The config key of a repeated trial's index in its group (Ray's
# ray.tune.search.repeater.TRIAL_INDEX).
TRIAL_INDEX = "__trial_index__"


class _TrialGroup:
    """The trials that share one suggestion: the first (primary) is the
    one the inner searcher knows."""

    def __init__(self, primary_trial_id, config, max_trials):
        if type(config) is not dict:
            raise TypeError("config is not a dict, got {}".format(config))
        self.primary_trial_id = primary_trial_id
        self.config = config
        self.max_trials = max_trials
        self._scores = {primary_trial_id: None}  # trial_id -> score, None until it completes

    def add(self, trial_id):
        self._scores.setdefault(trial_id, None)

    def full(self):
        return len(self._scores) >= self.max_trials

    def count(self):
        return len(self._scores)

    def report(self, trial_id, score):
        self._scores[trial_id] = score

    def finished_reporting(self):
        return self.full() and None not in self._scores.values()

    def mean(self):
        """The mean of the scores that are numbers (Ray's nanmean)."""
        values = [s for s in self._scores.values() if not (isinstance(s, float) and math.isnan(s))]
        return sum(values) / len(values) if values else float("nan")


class Repeater(Searcher):
    """Ray's Repeater: each of searcher's suggestions runs in repeat trials
    (set num_samples to a multiple of repeat); with set_index the config
    holds the trial's index in its group at ``__trial_index__``. searcher
    sees the first trial of each group, and completes with the mean of the
    group's metric once all of them have completed. Runs in the driver,
    over a Searcher subclass of your own; tunejet's own searchers
    (BasicVariantGenerator, OptunaSearch) run in its controller and cannot
    be repeated."""

    def __init__(self, searcher, repeat=1, set_index=True):
        if is_native(searcher):
            raise ValueError(
                "Repeater(%s) is not supported: %s runs in tunejet's controller, not in the driver where "
                "Repeater runs; repeat a Searcher subclass of your own, or use num_samples with a seeded "
                "search" % (type(searcher).__name__, type(searcher).__name__)
            )
        if isinstance(searcher, ConcurrencyLimiter):
            raise ValueError(
                "Repeater(ConcurrencyLimiter(...)) is not supported: put the limiter outside, "
                "ConcurrencyLimiter(Repeater(searcher, repeat), max_concurrent)"
            )
        if not isinstance(searcher, Searcher):
            raise TypeError("Repeater takes a tune.search.Searcher, got %r" % (searcher,))
        self.searcher = searcher
        self.repeat = repeat
        self._set_index = set_index
        self._groups = []
        self._trial_id_to_group = {}
        self._current_group = None
        super().__init__(metric=searcher.metric, mode=searcher.mode)

    def suggest(self, trial_id):
        if self._current_group is None or self._current_group.full():
            config = self.searcher.suggest(trial_id)
            if config is None or config == Searcher.FINISHED:
                return config
            self._current_group = _TrialGroup(trial_id, copy.deepcopy(config), self.repeat)
            self._groups.append(self._current_group)
            index = 0
        else:
            index = self._current_group.count()
            self._current_group.add(trial_id)
        config = self._current_group.config.copy()
        if self._set_index:
            config[TRIAL_INDEX] = index
        self._trial_id_to_group[trial_id] = self._current_group
        return config

    def on_trial_result(self, trial_id, result):
        pass  # the inner searcher hears of its groups only at their end

    def on_trial_complete(self, trial_id, result=None, error=False):
        group = self._trial_id_to_group[trial_id]
        metric = self.searcher.metric
        score = result[metric] if result and metric in result else float("nan")
        group.report(trial_id, score)
        if group.finished_reporting():
            self.searcher.on_trial_complete(group.primary_trial_id, result={metric: group.mean()}, error=error)

    def set_search_properties(self, metric, mode, config, **spec):
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def get_state(self):
        state = self.__dict__.copy()
        del state["searcher"]
        return state

    def set_state(self, state):
        self.__dict__.update(state)


class ConcurrencyLimiter:
    """Limits the concurrent trials of searcher to max_concurrent: it sets
    tune_config.max_concurrent_trials, and tunejet's controller asks for a
    new trial only below it (a searcher of your own is asked as Ray's
    ConcurrencyLimiter would let it be)."""

    def __init__(self, searcher, max_concurrent, batch=False):
        if batch:
            raise ValueError("ConcurrencyLimiter(batch=True) is not supported")
        if type(max_concurrent) is not int or max_concurrent <= 0:
            raise ValueError("ConcurrencyLimiter: max_concurrent must be an int > 0, got %r" % (max_concurrent,))
        if not isinstance(searcher, Searcher):
            raise RuntimeError(
                "The `ConcurrencyLimiter` only works with `Searcher` objects (got %s). Please try to pass "
                "`max_concurrent` to the search generator directly." % type(searcher)
            )
        self.searcher = searcher
        self.max_concurrent = max_concurrent
        if not is_native(searcher):
            searcher.set_max_concurrency(max_concurrent)  # as Ray's limiter tells it

    @property
    def metric(self):
        return self.searcher.metric

    @property
    def mode(self):
        return self.searcher.mode

    def to_spec(self):
        spec = self.searcher.to_spec()
        if isinstance(spec, tuple):
            spec, limit = spec
            return spec, min(limit, self.max_concurrent)
        return spec, self.max_concurrent


__all__ = ["Searcher", "BasicVariantGenerator", "ConcurrencyLimiter", "Repeater", "TRIAL_INDEX"]
