"""Ray Tune's callbacks (``ray.tune.Callback``), fed from the event log.

fit() runs its RunConfig's callbacks in the driver: the tunejet process
relays the experiment's events over a pair of pipes (tunejet._driver,
docs/driver.md), _Dispatcher folds them into Trial objects as Ray's
controller keeps them, and calls each callback's hooks with Ray's keyword
arguments. An event is acknowledged once every hook it calls has
returned, and the tunejet process keeps the last acknowledged event (the
driver's cursor) in JetStream: after a driver dies and the experiment is
restored, the relay replays the events up to the cursor to be folded
without hooks, then sends the rest, so each hook sees each event once.

``iteration``, which Ray counts in steps of its tuning loop, is here the
event's log sequence: it grows through the experiment and its restores.
"""

import os
import warnings

from tunejet._session import Checkpoint


class Callback:
    """Ray Tune's callback base class: override the hooks you need. Each
    is called with keyword arguments, as Ray calls them; take ``**info``
    for what later versions add.

    setup is called once per fit() (and per restored fit()) before any
    other hook; on_step_begin and on_step_end are never called (tunejet
    has no tuning loop in the driver); on_trial_restore is called when an
    attempt starts from a checkpoint, after on_trial_start.
    """

    def setup(self, stop=None, num_samples=None, total_num_samples=None, **info):
        pass

    def on_step_begin(self, iteration, trials, **info):
        pass

    def on_step_end(self, iteration, trials, **info):
        pass

    def on_trial_start(self, iteration, trials, trial, **info):
        pass

    def on_trial_restore(self, iteration, trials, trial, **info):
        pass

    def on_trial_save(self, iteration, trials, trial, **info):
        pass

    def on_trial_result(self, iteration, trials, trial, result, **info):
        pass

    def on_trial_complete(self, iteration, trials, trial, **info):
        pass

    def on_trial_recover(self, iteration, trials, trial, **info):
        pass

    def on_trial_error(self, iteration, trials, trial, **info):
        pass

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        pass

    def on_experiment_end(self, trials, **info):
        pass

    def get_state(self):
        return None

    def set_state(self, state):
        pass


class Trial:
    """A trial as the driver's callbacks see it: Ray's common attributes,
    folded from the events the driver has received."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"

    def __init__(self, trial_id, experiment_path, trainable_name):
        self.trial_id = trial_id
        self.trainable_name = trainable_name
        self.config = {}
        self.experiment_tag = ""
        self.trial_name = "%s_%s" % (trainable_name, trial_id)
        self.status = Trial.PENDING
        self.last_result = {}
        self.checkpoint = None
        self.num_failures = 0
        self.error_msg = None
        self.end_reason = None
        self._experiment_path = experiment_path
        self._dir_name = trial_id

    @property
    def path(self):
        """The trial's folder in storage (a path, or a URL's)."""
        return _join(self._experiment_path, self._dir_name)

    local_path = path
    logdir = path

    @property
    def error_file(self):
        """The trial's error.txt, once it ended ERROR; else None."""
        return _join(self.path, "error.txt") if self.status == Trial.ERROR else None

    @property
    def evaluated_params(self):
        return _flatten(self.config)

    @property
    def custom_trial_name(self):
        return None

    def is_finished(self):
        return self.status in (Trial.TERMINATED, Trial.ERROR)

    def __str__(self):
        return self.trial_name

    def __repr__(self):
        return self.trial_name


def _join(base, name):
    if "://" not in base:
        return os.path.join(base, name)
    root, sep, query = base.partition("?")
    return root.rstrip("/") + "/" + name + sep + query


def _flatten(config, prefix=""):
    out = {}
    for k, v in config.items():
        key = prefix + str(k)
        if isinstance(v, dict) and v:
            out.update(_flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def check(callbacks):
    """Return callbacks as a list, refusing what is not a Callback."""
    if callbacks is None:
        return []
    if isinstance(callbacks, Callback):
        raise TypeError("RunConfig.callbacks must be a list of tune.Callback, got one Callback: wrap it in a list")
    out = list(callbacks)
    for cb in out:
        if not isinstance(cb, Callback):
            raise TypeError(
                "RunConfig.callbacks: %r is not a tune.Callback (tunejet.tune.Callback, Ray's "
                "ray.tune.Callback)" % (cb,)
            )
    return out


class _Dispatcher:
    """Folds relayed events into Trials and calls the callbacks' hooks."""

    def __init__(self, callbacks, experiment_path, trainable_name, setup_info, on_setup=None):
        self.callbacks = callbacks
        self.on_setup = on_setup
        self.experiment_path = experiment_path
        self.trainable_name = trainable_name
        self.setup_info = dict(setup_info)
        self.trials = {}  # trial_id -> Trial, in creation order
        self.set_up = False
        self.ended = False

    def trial(self, trial_id):
        t = self.trials.get(trial_id)
        if t is None:  # created before the log this run reads (a restore from a state file)
            t = self.trials[trial_id] = Trial(trial_id, self.experiment_path, self.trainable_name)
        return t

    def handle(self, msg):
        """Fold one event, and call its hooks unless it is a replay."""
        kind, data = msg.get("type"), msg.get("data") or {}
        calls = []  # (hook name, kwargs), in order
        if kind == "experiment.started":
            n = data.get("num_trials")
            if isinstance(n, int) and n >= 0:
                self.setup_info["total_num_samples"] = n
        elif kind == "trial.created":
            t = self.trial(data["trial_id"])
            t.config = data.get("config") or {}
            t.experiment_tag = data.get("experiment_tag", "")
            t.trial_name = data.get("trial_name") or t.trial_name
            t._dir_name = data.get("dir_name") or t._dir_name
        elif kind == "trial.started":
            t = self.trial(data["trial_id"])
            t.status = Trial.RUNNING
            calls.append(("on_trial_start", {"trial": t}))
            if data.get("restored_from"):
                calls.append(("on_trial_restore", {"trial": t}))
        elif kind == "trial.reported":
            t = self.trial(data["trial_id"])
            results = list(data.get("earlier") or []) + [data.get("result") or {}]
            for result in results:
                calls.append(("on_trial_result", {"trial": t, "result": result}))
        elif kind == "trial.checkpointed":
            t = self.trial(data["trial_id"])
            ref = data.get("checkpoint") or {}
            location = ref.get("location") or (t._dir_name + "/" + ref.get("name", ""))
            calls.append(("on_checkpoint", {"trial": t, "checkpoint": Checkpoint(_join(self.experiment_path, location))}))
            calls.append(("on_trial_save", {"trial": t}))
        elif kind == "trial.failed":
            t = self.trial(data["trial_id"])
            if data.get("counted", True):
                t.num_failures += 1
            t.error_msg = data.get("error")
            if data.get("final"):  # no trial.completed follows: the trial is ERROR
                t.status = Trial.ERROR
                calls.append(("on_trial_error", {"trial": t}))
            else:
                t.status = Trial.PENDING
                calls.append(("on_trial_recover", {"trial": t}))
        elif kind == "trial.paused":
            self.trial(data["trial_id"]).status = Trial.PAUSED
        elif kind == "trial.stop_requested":
            # The controller's stop ends a trial that is not running at
            # once (no trial.completed follows), as the fold does.
            t = self.trial(data["trial_id"])
            if t.status in (Trial.PENDING, Trial.PAUSED):
                t.status, t.end_reason = Trial.TERMINATED, data.get("reason")
                t._ended_seq = msg.get("seq")
                calls.append(("on_trial_complete", {"trial": t}))
        elif kind == "experiment.restored":
            # The restored run starts its unfinished trials anew.
            for t in self.trials.values():
                if t.status in (Trial.RUNNING, Trial.PAUSED):
                    t.status = Trial.PENDING
        elif kind == "trial.completed":
            t = self.trial(data["trial_id"])
            was = t.status
            t.status = data.get("status") or Trial.TERMINATED
            t.end_reason = data.get("reason")
            if t.status != Trial.ERROR:
                calls.append(("on_trial_complete", {"trial": t}))
            elif was != Trial.ERROR:  # else its final trial.failed called on_trial_error
                calls.append(("on_trial_error", {"trial": t}))
        elif kind == "experiment.completed":
            calls.append(("on_experiment_end", {}))
        if not self.set_up:
            self.set_up = True
            if self.on_setup is not None:
                self.on_setup()
            self._call("setup", self.setup_info)
        replay = msg.get("replay")
        for hook, kwargs in calls:
            # The fold goes on through a replay; hooks do not.
            if hook == "on_trial_result":
                kwargs["trial"].last_result = kwargs["result"]
            elif hook == "on_checkpoint":
                kwargs["trial"].checkpoint = kwargs["checkpoint"]
            if replay:
                continue
            trials = list(self.trials.values())
            if hook == "on_experiment_end":
                self.ended = True
                self._call(hook, {"trials": trials})
            else:
                self._call(hook, dict(kwargs, iteration=msg.get("seq", 0), trials=trials))

    def _call(self, hook, kwargs):
        for cb in self.callbacks:
            getattr(cb, hook)(**kwargs)


def save(path, callbacks):
    """Keep callbacks beside the experiment at path (a local folder), for
    Tuner.restore, as Ray keeps them in its pickled RunConfig. Returns
    whether they were kept."""
    if "://" in path:
        warnings.warn(
            "RunConfig.callbacks are not kept beside an experiment in a bucket (%s): pass them again "
            "with Tuner.restore(..., callbacks=[...])" % path
        )
        return False
    try:
        data = dumps(callbacks)
    except Exception as e:  # what cannot be pickled is passed again to restore
        warnings.warn(
            "RunConfig.callbacks cannot be pickled (%s): Tuner.restore will not have them; pass "
            "them again with Tuner.restore(..., callbacks=[...])" % e
        )
        return False
    write(path, CALLBACKS_FILE, data)
    return True


def dumps(obj):
    """The one place that pickles what the driver keeps beside an
    experiment (its callbacks, its stopper and searcher): cloudpickle when
    importable, else pickle (a class defined in the script is then found
    again by its name, the script having run again up to restore())."""
    try:
        import cloudpickle as pickler
    except ImportError:
        import pickle as pickler
    return pickler.dumps(obj)


def write(path, name, data):
    """Write data to the file name in the experiment's local folder path,
    whole or not at all."""
    os.makedirs(path, exist_ok=True)
    tmp = os.path.join(path, "." + name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(path, name))


def read(path, name):
    """Unpickle the file name that write kept at path; None when there is
    none. An unloadable file raises."""
    file = os.path.join(path, name) if "://" not in path else None
    if file is None or not os.path.exists(file):
        return None
    import pickle  # cloudpickle's output loads with pickle

    with open(file, "rb") as f:
        return pickle.load(f)


def load(path):
    """Return the callbacks save kept at path, [] when there are none."""
    return check(read(path, CALLBACKS_FILE) or [])


# The file in the experiment's folder that keeps its driver's callbacks.
CALLBACKS_FILE = "tunejet_callbacks.pkl"
