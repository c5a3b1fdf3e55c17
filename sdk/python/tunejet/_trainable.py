"""Ray's class trainables: ``tune.Trainable`` and the loop a trial's
worker runs them with.

A trial makes one instance (``__init__`` calls ``setup(config)``), loads
its latest checkpoint when it resumes (``load_checkpoint``), then calls
``step()`` again and again: each call is one training_iteration, reported
with tunejet.train.report. When a checkpoint is due (every
checkpoint_frequency iterations, ``should_checkpoint`` in the result, or
at the end with checkpoint_at_end) ``save_checkpoint`` writes it into a
temporary folder that goes with that iteration's report. The loop ends
when a result says ``done``, or when the runner stops the trial (a stop
criterion, a scheduler): report() then exits the process, or the runner
sends SIGTERM, and ``cleanup()`` runs on the way out either way.

Checkpoints are Ray 2.x's: save_checkpoint returns None (the files are in
the folder it was given), that folder's path, or a dict, pickled into the
folder as ``_dict_checkpoint.pkl`` and given back to load_checkpoint as a
dict. Each checkpoint also holds ``.tunejet_trainable.json``: the
iteration and times it was saved at, and the checkpoint settings, so that
a resumed trial counts on from there.
"""

import copy
import json
import os
import pickle
import shutil
import signal
import tempfile
import time

from tunejet import _protocol

# Ray's file for a dict returned by save_checkpoint.
DICT_CHECKPOINT_FILE = "_dict_checkpoint.pkl"
# The trainable's own state in each checkpoint.
STATE_FILE = ".tunejet_trainable.json"


class Trainable:
    """Ray's class trainable API (``ray.tune.Trainable``).

    Subclass it and override ``setup(config)``, ``step()`` (returns a
    result dict: one training_iteration), ``save_checkpoint(checkpoint_dir)``
    and ``load_checkpoint(checkpoint)``, and ``cleanup()``. Each trial
    attempt runs one instance in its own process; ``reset_config`` is
    never called, as no instance is reused for another trial.
    """

    def __init__(self, config=None, logger_creator=None, storage=None):
        del logger_creator, storage  # Ray's, not used
        self.config = config or {}
        self._iteration = 0
        self._time_total = 0.0
        self._timesteps_total = None
        self._episodes_total = None
        self._time_since_restore = 0.0
        self._timesteps_since_restore = 0
        self._iterations_since_restore = 0
        self._last_result = None
        self._restored = False
        self.setup(copy.deepcopy(self.config))

    def setup(self, config):
        """Override for the trial's initialization; config is a copy of
        self.config."""

    def step(self):
        """Override: run one training iteration and return its result, a
        dict. ``done: True`` ends the trial; ``should_checkpoint: True``
        saves a checkpoint with this result."""
        raise NotImplementedError

    def save_checkpoint(self, checkpoint_dir):
        """Override: write the state into checkpoint_dir and return None
        (or checkpoint_dir), or return a dict to be pickled."""
        raise NotImplementedError

    def load_checkpoint(self, checkpoint):
        """Override: restore the state from checkpoint, the dict that
        save_checkpoint returned or else the checkpoint's folder."""
        raise NotImplementedError

    def cleanup(self):
        """Override to release what the trial holds when it ends."""

    def reset_config(self, new_config):
        """Ray's hook to reuse an instance for another config; never called
        here (each trial attempt is a fresh process). Returns False."""
        return False

    def get_config(self):
        """Return the config the trial was started with."""
        return self.config

    @property
    def iteration(self):
        """The current training_iteration: steps so far, counting those
        before the checkpoint the trial resumed from."""
        return self._iteration

    @property
    def training_iteration(self):
        """Same as iteration."""
        return self._iteration

    @property
    def logdir(self):
        """The trial's directory (the working directory), with a trailing /."""
        return os.path.join(_protocol.get_trial_dir(), "")

    @property
    def trial_id(self):
        """The trial's id ("default" outside a trial, as in Ray)."""
        return _protocol.get_trial_id() if _protocol.in_session() else "default"

    @property
    def trial_name(self):
        """The trial's name ("default" outside a trial, as in Ray)."""
        return _protocol.get_trial_name() if _protocol.in_session() else "default"

    @property
    def trial_resources(self):
        """The resources the trial holds, a dict such as {"cpu": 1}."""
        return _protocol.get_resources() if _protocol.in_session() else None

    def train(self):
        """Run step() once and return its result with Ray's counters
        (training_iteration, time_this_iter_s, done, ...) filled in."""
        start = time.time()
        result = self.step()
        if not isinstance(result, dict):
            raise TypeError("step() needs to return a dict, got %s" % type(result).__name__)
        result = dict(result)
        self._iteration += 1
        self._iterations_since_restore += 1
        took = result.get("time_this_iter_s")
        if took is None:
            took = time.time() - start
        self._time_total += took
        self._time_since_restore += took
        if result.get("timesteps_this_iter") is not None:
            self._timesteps_total = (self._timesteps_total or 0) + result["timesteps_this_iter"]
            self._timesteps_since_restore += result["timesteps_this_iter"]
        if result.get("episodes_this_iter") is not None:
            self._episodes_total = (self._episodes_total or 0) + result["episodes_this_iter"]
        if self._timesteps_total is not None:
            result.setdefault("timesteps_total", self._timesteps_total)
        if self._episodes_total is not None:
            result.setdefault("episodes_total", self._episodes_total)
        result.setdefault("done", False)
        result.setdefault("training_iteration", self._iteration)
        self._last_result = result
        return result

    def save(self, checkpoint_dir, settings=None):
        """Save a checkpoint into checkpoint_dir (Ray 2.x's rules for what
        save_checkpoint returns) with the trainable's state file."""
        out = self.save_checkpoint(checkpoint_dir)
        if isinstance(out, dict):
            with open(os.path.join(checkpoint_dir, DICT_CHECKPOINT_FILE), "wb") as f:
                _pickler().dump(out, f)
        elif out is not None and os.path.abspath(os.fspath(out)) != os.path.abspath(checkpoint_dir):
            raise ValueError(
                "The returned checkpoint path from `save_checkpoint` must be None or the same as the "
                "provided path argument. Got %s != %s" % (out, checkpoint_dir)
            )
        state = {
            "iteration": self._iteration,
            "time_total": self._time_total,
            "timesteps_total": self._timesteps_total,
            "episodes_total": self._episodes_total,
            "settings": settings or {},
        }
        with open(os.path.join(checkpoint_dir, STATE_FILE), "w") as f:
            json.dump(state, f)

    def restore(self, checkpoint_dir):
        """Load the checkpoint in checkpoint_dir: the counters, then
        load_checkpoint with the dict or the folder."""
        state = read_state(checkpoint_dir)
        self._iteration = state.get("iteration", 0)
        self._time_total = state.get("time_total", 0.0)
        self._timesteps_total = state.get("timesteps_total")
        self._episodes_total = state.get("episodes_total")
        self._time_since_restore = 0.0
        self._timesteps_since_restore = 0
        self._iterations_since_restore = 0
        dict_file = os.path.join(checkpoint_dir, DICT_CHECKPOINT_FILE)
        if os.path.exists(dict_file):
            with open(dict_file, "rb") as f:
                self.load_checkpoint(pickle.load(f))
        else:
            self.load_checkpoint(checkpoint_dir)
        self._restored = True

    def stop(self):
        """Release what the trial holds: calls cleanup()."""
        self.cleanup()


def _pickler():
    try:
        import cloudpickle

        return cloudpickle
    except ImportError:
        return pickle


def read_state(checkpoint_dir):
    """Return the trainable's state saved in checkpoint_dir, or {} (a
    checkpoint written otherwise)."""
    try:
        with open(os.path.join(checkpoint_dir, STATE_FILE)) as f:
            state = json.load(f)
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def is_class_trainable(trainable):
    """Return True when trainable is a Trainable subclass."""
    return isinstance(trainable, type) and issubclass(trainable, Trainable)


def _saves(cls):
    return cls.save_checkpoint is not Trainable.save_checkpoint


def resolve_settings(cls, settings):
    """Return the checkpoint settings of a trial of cls: checkpoint_frequency,
    checkpoint_at_end (Ray's None: True for a class that implements
    save_checkpoint) and the stop dict."""
    settings = dict(settings or {})
    at_end = settings.get("checkpoint_at_end")
    return {
        "checkpoint_frequency": int(settings.get("checkpoint_frequency") or 0),
        "checkpoint_at_end": _saves(cls) if at_end is None else bool(at_end),
        "stop": settings.get("stop") or {},
    }


def _stop_met(stop, result):
    """Ray's stop rule on a result: result[key] >= threshold for a key
    ("a/b" nests)."""
    for key, threshold in stop.items():
        value = result
        for part in key.split("/"):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if value >= threshold:
            return True
    return False


class _Terminated(BaseException):
    """SIGTERM from the runner, raised so that cleanup() runs."""


def _terminated(signum, frame):
    raise _Terminated()


def run(cls, config, settings):
    """Run one trial of the Trainable subclass cls with config. settings
    are the driver's checkpoint settings, or None on a restored run, whose
    trials take them from the checkpoint they resume from."""
    checkpoint = _protocol.get_checkpoint()
    if settings is None and checkpoint:
        settings = read_state(checkpoint).get("settings")
    settings = resolve_settings(cls, settings)
    signal.signal(signal.SIGTERM, _terminated)
    try:
        _loop(cls(config), checkpoint, settings)
    except _Terminated:
        # cleanup() has run: end as SIGTERM ends a process, for the runner.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _loop(instance, checkpoint, settings):
    try:
        if checkpoint:
            instance.restore(checkpoint)
        while True:
            result = instance.train()
            done = bool(result.get("done")) or _stop_met(settings["stop"], result)
            freq = settings["checkpoint_frequency"]
            due = (
                bool(result.get("should_checkpoint"))
                or (freq > 0 and instance.iteration % freq == 0)
                or (done and settings["checkpoint_at_end"])
            )
            if due:
                folder = tempfile.mkdtemp(prefix="checkpoint_")
                try:
                    instance.save(folder, settings)
                    _protocol.report(result, checkpoint_dir=folder)
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
            else:
                _protocol.report(result)
            if result.get("done"):
                return
    finally:
        instance.stop()
