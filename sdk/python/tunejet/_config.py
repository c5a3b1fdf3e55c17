"""TuneConfig, RunConfig and their parts, in Ray's names, and how each
becomes the experiment file's keys."""

import dataclasses
import datetime
import os
import secrets
from typing import Any, Optional

from tunejet import _callbacks, _space


@dataclasses.dataclass
class FailureConfig:
    """As Ray's: retries of a failed trial, from its latest checkpoint.

    max_failures: 0 means the first failure is final, -1 retries forever.
    fail_fast: True stops the experiment at the first trial error; "raise"
    also makes fit() raise.
    """

    max_failures: int = 0
    fail_fast: Any = False

    def to_spec(self):
        return {"max_failures": self.max_failures, "fail_fast": self.fail_fast}


@dataclasses.dataclass
class CheckpointConfig:
    """As Ray's: how many checkpoints to keep and how to rank them.

    checkpoint_frequency and checkpoint_at_end apply to class trainables
    (tune.Trainable), whose trials' workers read them; a function trainable
    refuses them, as in Ray. route is
    tunejet's: "auto" (a runner that can write the storage writes each
    checkpoint straight into it, as Ray's workers do; else the bytes go
    through NATS), "storage" (straight, or an error) or "object_store".
    """

    num_to_keep: Optional[int] = None
    checkpoint_score_attribute: Optional[str] = None
    checkpoint_score_order: str = "max"
    checkpoint_frequency: int = 0
    checkpoint_at_end: Optional[bool] = None
    route: Optional[str] = None

    def to_spec(self):
        if self.checkpoint_frequency < 0:
            raise ValueError("checkpoint_frequency must be >=0, got %s" % self.checkpoint_frequency)
        spec = {"checkpoint_score_order": self.checkpoint_score_order}
        if self.num_to_keep is not None:
            spec["num_to_keep"] = self.num_to_keep
        if self.checkpoint_score_attribute is not None:
            spec["checkpoint_score_attribute"] = self.checkpoint_score_attribute
        if self.route is not None:
            if self.route not in ("auto", "storage", "object_store"):
                raise ValueError(
                    "CheckpointConfig: route must be auto, storage or object_store, got %r" % (self.route,)
                )
            spec["route"] = self.route
        return spec


@dataclasses.dataclass
class ScalingConfig:
    """As Ray's ``ray.train.ScalingConfig``, for ``tune.with_resources``:
    the trial holds total_resources, Ray's sum of trainer_resources (1 CPU
    when unset) and num_workers times resources_per_worker (1 CPU, or 1
    GPU with use_gpu, when unset). A trial is one process: the workers are
    not started, their share goes to that process. placement_strategy is
    accepted and not used; accelerator_type is refused.
    """

    trainer_resources: Optional[dict] = None
    num_workers: int = 1
    use_gpu: bool = False
    resources_per_worker: Optional[dict] = None
    placement_strategy: str = "PACK"
    accelerator_type: Optional[str] = None

    def __post_init__(self):
        if self.resources_per_worker:
            gpus = self.resources_per_worker.get("GPU", 0)
            if not self.use_gpu and gpus > 0:
                raise ValueError(
                    "`use_gpu` is False but `GPU` was found in `resources_per_worker`. Either set "
                    "`use_gpu` to True or remove `GPU` from `resources_per_worker."
                )
            if self.use_gpu and gpus == 0:
                raise ValueError(
                    "`use_gpu` is True but `GPU` is set to 0 in `resources_per_worker`. Either set "
                    "`use_gpu` to False or request a positive number of `GPU` in `resources_per_worker."
                )
        if self.accelerator_type:
            raise ValueError("ScalingConfig.accelerator_type is not supported: name the resource instead")

    @property
    def total_resources(self):
        """The resources of the trial's process, by Ray's names ("CPU", "GPU")."""
        if self.trainer_resources is None:
            trainer = {"CPU": 1}
        else:
            trainer = {k: v for k, v in self.trainer_resources.items() if v != 0}
        if self.resources_per_worker is None:
            worker = {"GPU": 1} if self.use_gpu else {"CPU": 1}
        else:
            worker = {k: v for k, v in self.resources_per_worker.items() if v != 0}
        if self.use_gpu:
            worker.setdefault("GPU", 1)
        total = dict(trainer)
        for k, v in worker.items():
            total[k] = total.get(k, 0) + v * self.num_workers
        return total


_SYNC_PLACEHOLDERS = ("source", "target", "exclude")


def _check_template(key, template, allowed, required):
    """Refuses a template with a placeholder other than allowed, or without
    one of required, as the experiment file's check does."""
    if not isinstance(template, str) or not template.strip():
        raise ValueError(f"{key} must be a non-empty shell command string, got {template!r}")
    import string

    try:
        names = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as e:
        raise ValueError(f"{key}: {e} in {template!r} (write {{{{ and }}}} for literal braces)") from None
    for n in sorted(names - set(allowed)):
        hint = " (Ray's {options} is {exclude} here)" if n == "options" else ""
        raise ValueError(f"{key}: unknown placeholder {{{n}}} in {template!r}{hint}")
    for n in required:
        if n not in names:
            raise ValueError(f"{key}: {template!r} must hold {{{n}}}")


@dataclasses.dataclass
class CommandSyncer:
    """A syncer of shell commands (Ray's CommandBasedClient), for storage
    tunejet does not open itself (rclone, hdfs dfs, rsync over ssh).

    Each is a format string run with sh -c: {source} and {target} are the
    paths, shell-quoted; {exclude} is SyncConfig.exclude, each pattern
    rendered with exclude_template. sync_up copies the experiment folder to
    <upload_dir>/<name>; sync_down brings it back for a restore; delete
    removes a dropped checkpoint's folder under it.
    """

    sync_up: str
    sync_down: Optional[str] = None
    delete: Optional[str] = None
    exclude_template: Optional[str] = None

    def to_spec(self):
        _check_template("syncer.sync_up", self.sync_up, _SYNC_PLACEHOLDERS, ("source", "target"))
        spec = {"sync_up": self.sync_up}
        if self.sync_down:
            _check_template("syncer.sync_down", self.sync_down, _SYNC_PLACEHOLDERS, ("source", "target"))
            spec["sync_down"] = self.sync_down
        if self.delete:
            _check_template("syncer.delete", self.delete, ("target",), ("target",))
            spec["delete"] = self.delete
        if self.exclude_template:
            _check_template("syncer.exclude_template", self.exclude_template, ("pattern",), ("pattern",))
            spec["exclude_template"] = self.exclude_template
        return spec


@dataclasses.dataclass
class SyncConfig:
    """As Ray's: how often results and state are written to storage.

    upload_dir (Ray <= 2.6) mirrors <storage_path>/<name> there every
    sync_period and at the end, with syncer: a CommandSyncer or a dict of
    its templates ({"sync_up": ..., "sync_down": ..., "delete": ...}), or
    without one to a bucket URL or folder tunejet opens. exclude lists
    fnmatch patterns the mirror leaves out, such as "*/checkpoint_*".
    """

    sync_period: float = 300
    sync_timeout: float = 1800
    sync_artifacts: bool = False
    sync_artifacts_on_checkpoint: bool = True
    upload_dir: Optional[str] = None
    syncer: Any = None
    exclude: Optional[list] = None

    def to_spec(self):
        spec = {
            "sync_period": self.sync_period,
            "sync_timeout": self.sync_timeout,
            "sync_artifacts": self.sync_artifacts,
            "sync_artifacts_on_checkpoint": self.sync_artifacts_on_checkpoint,
        }
        if self.syncer is not None and self.syncer != "auto":
            syncer = self.syncer
            if isinstance(syncer, dict):
                unknown = sorted(set(syncer) - {"sync_up", "sync_down", "delete", "exclude_template"})
                if unknown:
                    raise ValueError(f"SyncConfig.syncer: unknown keys {unknown}; valid: sync_up, sync_down, delete, exclude_template")
                syncer = CommandSyncer(**syncer)
            if not isinstance(syncer, CommandSyncer):
                raise ValueError("SyncConfig.syncer must be a CommandSyncer or a dict of its templates; a Python Syncer object cannot run in tunejet's syncer")
            if not self.upload_dir:
                raise ValueError("SyncConfig.syncer needs upload_dir, the remote its commands copy the experiment folder to")
            spec["syncer"] = syncer.to_spec()
        if self.upload_dir:
            spec["upload_dir"] = self.upload_dir
        if self.exclude:
            if isinstance(self.exclude, str) or not all(isinstance(p, str) and p for p in self.exclude):
                raise ValueError(f"SyncConfig.exclude must be a list of non-empty patterns, got {self.exclude!r}")
            spec["exclude"] = list(self.exclude)
        return spec


@dataclasses.dataclass
class RunConfig:
    """As Ray's: where results go, when trials stop, failures, checkpoints.

    storage_path defaults to ~/tunejet_results (Ray: ~/ray_results) and may
    be a bucket URL (s3://, gs://); name defaults to Ray's
    "<trainable>_<date>_<time>", with "_" and 4 hex characters appended
    when that name is taken (two fit() calls within a second). stop is a
    dict of result keys to thresholds, a Stopper, a stop function
    (trial_id, result) -> bool, or a list of Stoppers and functions: those
    of tunejet.tune.stopper run in tunejet's controller, the others in the
    driver, as in Ray (tunejet._driver). callbacks are tune.Callback objects, which fit()
    runs in the driver as Ray does, fed from the experiment's event log
    (docs/driver.md). verbose (Ray's 0 to 3) and progress_reporter (a
    tune.CLIReporter) set the status table the tunejet process prints;
    log_to_file is accepted and not used.
    """

    name: Optional[str] = None
    storage_path: Optional[str] = None
    stop: Any = None
    failure_config: Optional[FailureConfig] = None
    checkpoint_config: Optional[CheckpointConfig] = None
    sync_config: Optional[SyncConfig] = None
    verbose: Any = None
    progress_reporter: Any = None
    callbacks: Any = None
    log_to_file: Any = False
    storage_filesystem: Any = None

    def to_spec(self):
        spec = {}
        if self.storage_filesystem is not None:
            raise ValueError("RunConfig.storage_filesystem is not supported: give storage_path a URL")
        if self.callbacks is not None:
            _callbacks.check(self.callbacks)  # run by fit() in the driver (tunejet._driver)
        stop, stoppers = _stop_spec(self.stop)
        if stop:
            spec["stop"] = stop
        if stoppers:
            spec["stoppers"] = stoppers
        if self.failure_config is not None:
            spec["failure_config"] = self.failure_config.to_spec()
        if self.checkpoint_config is not None:
            spec["checkpoint_config"] = self.checkpoint_config.to_spec()
        if self.sync_config is not None:
            spec["sync_config"] = self.sync_config.to_spec()
        return spec


def _stop_parts(stop):
    """Split RunConfig.stop into (stop criteria, built-in stoppers, driver
    stoppers): a dict is criteria; tunejet.tune.stopper's own stoppers go to
    the file; a Stopper subclass of the user's, a FunctionStopper or a stop
    function run in the driver (a CombinedStopper or a list may mix them)."""
    from tunejet.tune import stopper

    if stop is None:
        return None, [], []
    if isinstance(stop, dict):
        for k, v in stop.items():
            if isinstance(v, dict):
                raise ValueError(
                    "Stopping criteria is now flattened by default. Use forward slashes to "
                    "nest values `key1/key2/key3`."
                )
            if not isinstance(v, (int, float)):
                raise TypeError("stop[%r] must be a number, got %r" % (k, v))
        return dict(stop), [], []
    if isinstance(stop, stopper.CombinedStopper):
        stop = list(stop.stoppers)
    if isinstance(stop, (list, tuple)):
        builtin, driver = [], []
        for s in stop:
            if isinstance(s, (dict, list, tuple)):
                raise TypeError("RunConfig.stop: a list holds Stoppers or stop functions, got %r" % (s,))
            _, b, d = _stop_parts(s)
            builtin += b
            driver += d
        return None, builtin, driver
    if isinstance(stop, stopper.Stopper):
        return (None, [stop], []) if stopper.is_builtin(stop) else (None, [], [stop])
    if callable(stop):
        return None, [], [stopper.FunctionStopper(stop)]
    raise TypeError("RunConfig.stop must be a dict, a Stopper or a function, got %s" % type(stop).__name__)


def _stop_spec(stop):
    """Return (stop criteria, stoppers) for the file from RunConfig.stop."""
    from tunejet.tune import stopper

    criteria, builtin, _ = _stop_parts(stop)
    if not builtin:
        return criteria, None
    if isinstance(stop, stopper.Stopper) and not isinstance(stop, stopper.CombinedStopper):
        return criteria, stop.to_spec()
    stoppers = []
    for s in builtin:
        spec = s.to_spec()
        stoppers += spec if isinstance(spec, list) else [spec]
    return criteria, stoppers


class _AnyStopper:
    """The driver's stopper made of several: a trial stops when any of them
    says so (in order, as Ray's CombinedStopper asks them), the experiment
    when any stop_all does."""

    def __init__(self, stoppers):
        self.stoppers = list(stoppers)

    def __call__(self, trial_id, result):
        return any(s(trial_id, result) for s in self.stoppers)

    def stop_all(self):
        return any(s.stop_all() for s in self.stoppers)

    @property
    def _driver_name(self):
        return "+".join(_object_name(s) for s in self.stoppers)


def _object_name(obj):
    """A driver object's name, for the file's driver section and explain:
    its class's (a stop function's own name)."""
    name = getattr(obj, "_driver_name", None)
    if isinstance(name, str) and name:
        return name
    return type(obj).__name__


def driver_stopper(stop):
    """The stopper RunConfig.stop has the driver run, or None."""
    _, _, driver = _stop_parts(stop)
    if not driver:
        return None
    return driver[0] if len(driver) == 1 else _AnyStopper(driver)


def driver_searcher(search_alg):
    """The Searcher TuneConfig.search_alg has the driver run (a
    ConcurrencyLimiter's searcher), or None for tunejet's own."""
    from tunejet.tune import search

    own = _searcher(search_alg)
    if isinstance(own, search.Searcher) and not search.is_native(own):
        return own
    return None


def driver_spec(stopper, searcher):
    """The experiment file's driver section, or None."""
    spec = {}
    if stopper is not None:
        spec["stopper"] = _object_name(stopper)
    if searcher is not None:
        spec["searcher"] = _object_name(searcher)
    return spec or None


@dataclasses.dataclass
class TuneConfig:
    """As Ray's: the objective, the number of samples, the search algorithm
    and the scheduler.

    search_alg and scheduler take a name ("tpe", "asha"), a dict with a
    "type" and Ray's settings, or the classes of tunejet.tune.search and
    tunejet.tune.schedulers; a tune.search.Searcher subclass of the user's
    (or a Repeater) runs in the driver, as in Ray (tunejet._driver). seed makes the run repeatable (tunejet picks
    one when unset). reuse_actors (default: on) lets each runner keep a
    warm worker per trainable and resource set, which has imported the
    trainable once and forks a process per trial; False starts a fresh
    interpreter per trial, as before (sdk/python/README.md, "Warm workers").
    reproducible (tunejet's own; default off) makes the configs of
    OptunaSearch and BayesOptSearch the same for the same seed whatever
    the timing: trial k learns from the trials numbered up to k −
    max_concurrent_trials alone, and waits for them to finish.
    warm_start (tunejet's own) names another experiment's directory
    (<storage_path>/<name>) whose finished trials seed those searchers.
    """

    metric: Optional[str] = None
    mode: Optional[str] = None
    search_alg: Any = None
    scheduler: Any = None
    num_samples: int = 1
    max_concurrent_trials: Optional[int] = None
    time_budget_s: Any = None
    seed: Optional[int] = None
    reuse_actors: Any = None
    trial_name_creator: Any = None
    trial_dirname_creator: Any = None
    chdir_to_trial_dir: Any = None
    reproducible: bool = False
    warm_start: Optional[str] = None

    def to_spec(self):
        if self.trial_name_creator is not None or self.trial_dirname_creator is not None:
            raise ValueError(
                "TuneConfig.trial_name_creator and trial_dirname_creator are not supported: "
                "tunejet names trials <trainable>_<id> as Ray does by default"
            )
        if self.reuse_actors is not None and not isinstance(self.reuse_actors, bool):
            raise ValueError("TuneConfig.reuse_actors must be True, False or None, got %r" % (self.reuse_actors,))
        # Ray's report() returns once the driver has processed the result:
        # a trial stops or pauses at the result that decided it.
        spec = {"num_samples": self.num_samples, "wait_for_decisions": True}
        metric, mode = self.metric, self.mode
        searcher = _searcher(self.search_alg)
        own = (getattr(searcher, "metric", None), getattr(searcher, "mode", None))
        if own != (None, None):
            if (metric, mode) != (None, None):
                raise ValueError(
                    "You passed a `metric` or `mode` argument to `Tuner()`, but the searcher you are using "
                    "was already instantiated with their own `metric` and `mode` parameters. Either remove "
                    "the arguments from your searcher or from `Tuner()`."
                )
            metric, mode = own
        if metric is not None:
            spec["metric"] = metric
        if mode is not None:
            spec["mode"] = mode
        concurrency = self.max_concurrent_trials
        search = _tuner_part(self.search_alg, "search_alg")
        if isinstance(search, tuple):  # ConcurrencyLimiter
            search, limit = search
            concurrency = limit if not concurrency else min(concurrency, limit)
        if search is not None:
            spec["search_alg"] = search
        scheduler = _tuner_part(self.scheduler, "scheduler")
        if scheduler is not None:
            spec["scheduler"] = scheduler
        if concurrency:
            spec["max_concurrent_trials"] = concurrency
        if self.time_budget_s is not None:
            budget = self.time_budget_s
            if isinstance(budget, datetime.timedelta):
                budget = budget.total_seconds()
            spec["time_budget_s"] = budget
        if self.reproducible:
            spec["reproducible"] = True
        if self.warm_start:
            spec["warm_start"] = os.fspath(self.warm_start)
        seed = self.seed
        if seed is None and isinstance(getattr(self.search_alg, "random_state", None), int):
            seed = self.search_alg.random_state  # BasicVariantGenerator's
        if seed is not None:
            spec["seed"] = seed
        return spec


def _searcher(search_alg):
    """The searcher search_alg is, or wraps (ConcurrencyLimiter)."""
    from tunejet.tune import search

    if isinstance(search_alg, search.ConcurrencyLimiter):
        return search_alg.searcher
    return search_alg


def _tuner_part(value, key):
    """Return a search_alg or scheduler for the file: a name, a dict, or
    (for a ConcurrencyLimiter) a (search_alg, max_concurrent) pair."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        return _space._plain(value, "tune_config." + key)
    if key == "search_alg" and driver_searcher(value) is not None:
        # The driver runs it (the file's driver section); a limiter's bound
        # stays the file's.
        return (None, value.max_concurrent) if value is not _searcher(value) else None
    to_spec = getattr(value, "to_spec", None)
    if callable(to_spec):
        return to_spec()
    raise TypeError(
        "tune_config.%s must be a name, a dict {\"type\": ...} or a class of tunejet.tune, got %s"
        % (key, type(value).__name__)
    )


def default_storage_path():
    """Return Ray's default storage folder, named for tunejet."""
    return os.path.join(os.path.expanduser("~"), "tunejet_results")


# The default names this process has given: a second fit() within the
# same second must not take the first one's.
_default_names = set()


def default_name(trainable_name, storage_path):
    """Return Ray's default experiment name, <trainable>_<local date_time>,
    made unique: when this process already gave it, or the folder
    <storage_path>/<name> exists (a local storage path), "_" and 4 hex
    characters are appended, as Ray does to a trial folder that exists."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    base = name = "%s_%s" % (trainable_name, stamp)
    local = "://" not in storage_path
    while name in _default_names or (local and os.path.exists(os.path.join(storage_path, name))):
        name = "%s_%s" % (base, secrets.token_hex(2))
    _default_names.add(name)
    return name
