"""Result and ResultGrid, as Ray's, read from an experiment's storage."""

import glob
import json
import math
import os
import pathlib

from tunejet._session import Checkpoint


class TuneError(Exception):
    """An experiment that could not run, as Ray's ``ray.tune.TuneError``."""


class TrialError(TuneError):
    """A trial's failure: its text is the trial's error, for a Python
    trainable the traceback of the exception it raised."""


_SCOPES = ("last", "all", "avg", "last-5-avg", "last-10-avg")


class Result:
    """One trial's outcome, as Ray's ``ray.train.Result``.

    metrics is the trial's last result, config its config, checkpoint its
    latest Checkpoint (None without one), path its directory in storage
    (log_dir too, as a pathlib.Path, for Ray <= 2.6's scripts),
    error a TrialError when it ended in ERROR (else None), and
    best_checkpoints the kept checkpoints with the result each came with.
    """

    def __init__(self, record):
        self.trial_id = record.get("trial_id", "")
        self.trial_name = record.get("trial_name", "")
        self.status = record.get("status", "")
        self.config = record.get("config") or {}
        self.metrics = dict(record.get("metrics") or {})
        self.metrics.setdefault("config", self.config)
        self.path = record.get("path", "")
        self.num_failures = record.get("num_failures", 0)
        self.end_reason = record.get("end_reason", "")
        self.error = TrialError(record["error"]) if record.get("error") else None
        checkpoint = record.get("checkpoint")
        self.checkpoint = Checkpoint(checkpoint) if checkpoint else None
        self._best = record.get("best_checkpoints") or []
        self._history = None

    @property
    def log_dir(self):
        """The trial's folder as a pathlib.Path, as Ray <= 2.6's
        Result.log_dir (Ray 2.7 on names it path); None when the storage
        is a bucket, which has no local folder."""
        if not self.path or "://" in self.path:
            return None
        return pathlib.Path(self.path)

    @property
    def best_checkpoints(self):
        """The kept checkpoints, oldest first, as (Checkpoint, metrics) pairs."""
        by_name = {}
        for row in self.history():
            name = row.get("checkpoint_dir_name")
            if name:
                by_name[name] = row
        return [(Checkpoint(p), by_name.get(os.path.basename(p), {})) for p in self._best]

    @property
    def metrics_dataframe(self):
        """Every result of the trial as a pandas DataFrame (pandas needed)."""
        pandas = _pandas()
        return pandas.DataFrame([_flatten(row) for row in self.history()])

    def history(self):
        """Return every result of the trial, oldest first, from its
        result.json (a local storage path only; [] when there is none)."""
        if self._history is None:
            self._history = _read_results(os.path.join(self.path, "result.json"))
        return self._history

    def __repr__(self):
        shown = {k: v for k, v in self.metrics.items() if k != "config"}
        return "Result(metrics=%r, path=%r, error=%r)" % (shown, self.path, self.error)


class ResultGrid:
    """The results of an experiment, as Ray's ``ray.tune.ResultGrid``:
    a sequence of Result, one per trial."""

    def __init__(self, experiment_path, results, metric=None, mode=None, loader=None):
        self.experiment_path = experiment_path
        self._loaded = None if results is None else list(results)
        self._loader = loader  # returns the trial records when results is None
        self._objectives = None
        if isinstance(metric, (list, tuple)):
            # Several metrics: get_best_result needs one named, as in Ray.
            modes = mode if isinstance(mode, (list, tuple)) else [mode] * len(metric)
            self._objectives = list(zip(metric, modes))
            metric = mode = None
        self._metric = metric
        self._mode = mode

    @property
    def _results(self):
        if self._loaded is None:
            self._loaded = [Result(r) for r in self._loader()]
        return self._loaded

    def __len__(self):
        return len(self._results)

    def __getitem__(self, i):
        return self._results[i]

    def __iter__(self):
        return iter(self._results)

    @property
    def errors(self):
        """The TrialErrors of the trials that ended in ERROR."""
        return [r.error for r in self._results if r.error is not None]

    @property
    def num_errors(self):
        """How many trials ended in ERROR."""
        return sum(1 for r in self._results if r.status == "ERROR")

    @property
    def num_terminated(self):
        """How many trials ended TERMINATED."""
        return sum(1 for r in self._results if r.status == "TERMINATED")

    @property
    def best_results(self):
        """The Pareto front of an experiment of several metrics (Optuna's
        study.best_trials): the TERMINATED trials with a finite last value
        of every metric that no other such trial dominates (at least as
        good in every metric, by its mode, and better in one), in trial
        order. For an experiment of one metric, [get_best_result()]."""
        if self._objectives is None:
            return [self.get_best_result()]
        points = []
        for r in self._results:
            if r.status != "TERMINATED":
                continue
            values = [_number(_lookup(r.metrics, m)) for m, _ in self._objectives]
            if any(v is None or not math.isfinite(v) for v in values):
                continue
            points.append((r, [v if mode == "min" else -v for v, (_, mode) in zip(values, self._objectives)]))

        def dominates(a, b):
            return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))

        return [r for r, p in points if not any(dominates(q, p) for _, q in points)]

    def get_best_result(self, metric=None, mode=None, scope="last", filter_nan_and_inf=True):
        """Return the best trial's Result, as Ray's: metric and mode default
        to TuneConfig's; scope is last, all, avg, last-5-avg or last-10-avg."""
        metric = metric or self._metric
        mode = mode or self._mode
        if not metric:
            raise ValueError(
                "No metric is provided. Either pass in a `metric` arg to `get_best_result` "
                "or specify a metric in the `TuneConfig` of your `Tuner`."
            )
        if not mode:
            raise ValueError(
                "No mode is provided. Either pass in a `mode` arg to `get_best_result` "
                "or specify a mode in the `TuneConfig` of your `Tuner`."
            )
        if mode not in ("min", "max"):
            raise ValueError("mode must be 'min' or 'max', got %r" % mode)
        if scope not in _SCOPES:
            raise ValueError("scope must be one of %s, got %r" % (", ".join(_SCOPES), scope))
        best, best_value = None, None
        for r in self._results:
            value = _score(r, metric, mode, scope)
            if value is None or (filter_nan_and_inf and not math.isfinite(value)):
                continue
            if best is None or (value < best_value if mode == "min" else value > best_value):
                best, best_value = r, value
        if best is None:
            raise RuntimeError(
                "No best trial found for the given metric: %s. This means that no trial has "
                "reported this metric%s." % (metric, ", or all values reported for this metric are NaN" if filter_nan_and_inf else "")
            )
        return best

    def get_dataframe(self, filter_metric=None, filter_mode=None):
        """Return one row per trial (its last result, or its best by
        filter_metric and filter_mode) as a pandas DataFrame (pandas needed)."""
        pandas = _pandas()
        if (filter_metric is None) != (filter_mode is None):
            raise ValueError("give both filter_metric and filter_mode, or neither")
        rows = []
        for r in self._results:
            row = r.metrics
            if filter_metric:
                scored = [h for h in r.history() if _number(_lookup(h, filter_metric)) is not None]
                if scored:
                    pick = min if filter_mode == "min" else max
                    row = pick(scored, key=lambda h: _number(_lookup(h, filter_metric)))
            row = dict(row)
            row["config"] = r.config
            flat = _flatten(row)
            flat["logdir"] = r.path
            rows.append(flat)
        return pandas.DataFrame(rows)

    def __repr__(self):
        return "ResultGrid<[\n%s\n]>" % ",\n".join("  " + repr(r) for r in self._results)


def _score(result, metric, mode, scope):
    if scope == "last":
        return _number(_lookup(result.metrics, metric))
    values = [_number(_lookup(h, metric)) for h in result.history()]
    values = [v for v in values if v is not None]
    if not values:
        return _number(_lookup(result.metrics, metric)) if scope == "all" else None
    if scope == "all":
        return min(values) if mode == "min" else max(values)
    if scope.startswith("last-"):
        values = values[-int(scope.split("-")[1]):]
    return sum(values) / len(values)


def _lookup(result, metric):
    """result's value of metric; a name with slashes that is not a key
    ("val/loss") is looked up in nested dicts, as Ray flattens results."""
    if metric in result or "/" not in metric:
        return result.get(metric)
    value = result
    for part in metric.split("/"):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _number(v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def _flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        key = prefix + str(k)
        if isinstance(v, dict):
            out.update(_flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def _read_results(path):
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    rows = []
    for line in lines:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue  # a line cut off by a crash
    return rows


def _pandas():
    try:
        import pandas
    except ImportError:
        raise ImportError(
            "pandas is needed for DataFrames and is not installed: pip install pandas "
            "(Result.metrics, Result.history() and iterating a ResultGrid need nothing)"
        ) from None
    return pandas


def read_spec(experiment_path):
    """Return the experiment file of the experiment from its newest state
    file (local paths only), or None."""
    files = sorted(glob.glob(os.path.join(glob.escape(experiment_path), "experiment_state-*.json")))
    if not files:
        return None
    try:
        with open(files[-1]) as f:
            spec = json.load(f)["state"]["spec"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return spec if isinstance(spec, dict) else None


def read_objective(experiment_path):
    """Return (metric, mode) of the experiment from its newest state file
    (local paths only), or (None, None); with several metrics, the lists
    of them and of their modes."""
    tc = (read_spec(experiment_path) or {}).get("tune_config")
    if not isinstance(tc, dict):
        return None, None
    if tc.get("metrics"):
        return tc.get("metrics"), tc.get("modes")
    return tc.get("metric"), tc.get("mode")
