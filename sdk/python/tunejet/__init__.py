"""tunejet's Python package: Ray Tune's driver API, and the trial side of
the trainable protocol.

Two ways to use it (Python 3.9+): the trainable protocol needs only the
standard library; the driver API pickles trainables with cloudpickle.

* A Ray Tune script changes only its imports: ``from tunejet import tune``,
  ``from tunejet import train`` and ``from tunejet.train import RunConfig,
  Checkpoint`` (Ray <= 2.6's ``from tunejet import air`` and ``from
  tunejet.air import session`` too). ``tune.Tuner(...).fit()`` writes an
  experiment file, runs it with the ``tunejet`` binary (TUNEJET_BIN, else
  ``tunejet`` on PATH) and returns a ``ResultGrid``; each trial runs the
  trainable (a function or a ``tune.Trainable`` subclass, pickled by
  value) in a process of its own, forked from a warm worker that loaded
  the trainable once (TuneConfig(reuse_actors=False): a fresh interpreter
  per trial). See sdk/python/README.md.

* A command trainable (``trainable: {command: ["python3", "train.py"]}`` in
  an experiment file) calls the functions below, which speak the protocol
  in docs/trainable-protocol.md over the runner's Unix socket.

Example of a command trainable::

    import json, os, tempfile
    import tunejet

    config = tunejet.get_config()          # the trial's config, a dict
    step = 0
    resume = tunejet.get_checkpoint()      # None on a fresh start
    if resume:
        with open(os.path.join(resume, "state.json")) as f:
            step = json.load(f)["step"]
    while step < 100:
        step += 1
        loss = train_one_epoch(config["lr"])
        with tempfile.TemporaryDirectory() as ckpt:
            with open(os.path.join(ckpt, "state.json"), "w") as f:
                json.dump({"step": step}, f)
            tunejet.report({"loss": loss}, checkpoint_dir=ckpt)
        # report() has returned: the checkpoint is staged, ckpt may go.

``report`` returns once the runner has accepted the result (and copied the
checkpoint directory, if any). When the runner answers that the trial should
stop (a stop criterion was met, a scheduler stopped or paused it, or the
experiment is stopping), ``report`` calls ``sys.exit(0)``: ``finally`` blocks
and ``with`` statements still run, and the runner sends SIGTERM, then SIGKILL,
if the process does not end. A paused trial runs again later from its latest
checkpoint (``get_checkpoint()``), so report checkpoints to make it pausable.

Exit status 0 completes the trial; any other status (an uncaught exception
exits with 1) fails it, and the last lines of stderr become its error text.

Every function raises RuntimeError when the script is not run by a tunejet
runner (``TUNEJET_SOCKET`` is not set); ``in_session()`` tells beforehand.
``report`` raises RuntimeError when the runner rejects a report, for
instance when ``checkpoint_dir`` is not a directory.

A command script whose imports are slow can have them run once per
runner instead of once per trial: put the trial's body in a function and
call ``tunejet.run_trials(body)``, and add ``fork_server: true`` to the
experiment's trainable. The runner then starts the script once as a warm
worker and forks it for each attempt (docs/trainable-protocol.md, "Warm
workers"); without ``fork_server`` the body runs once, as a plain script.

``tunejet.put(value)`` and ``tunejet.get(ref)`` are Ray's ``ray.put`` and
``ray.get``: the driver puts a (picklable) value, and a trial gets it back
from the reference, passed in its config or held by the trainable.

Metric values are sent as JSON, as Ray writes results: scalars with an
``item()`` method (NumPy, PyTorch) are converted, arrays with ``tolist()``
become lists, other numbers become ints or floats, NaN and infinities
(which JSON cannot carry) are sent as null, and any other value JSON
cannot hold (an object, a set, a date) is sent as its ``str()``.
"""

from tunejet._protocol import (
    get_attempt,
    get_checkpoint,
    get_config,
    get_experiment_name,
    get_gpu_ids,
    get_resources,
    get_trial_dir,
    get_trial_id,
    get_trial_name,
    in_session,
    report,
)
from tunejet._forkserver import run_trials
from tunejet._objects import ObjectRef, get, put
from tunejet import _lazy, _protocol

# Ray's `from ray import tune`: air, train and tune are imported when first
# used, so that a trial's process loads only what its trainable uses.
__getattr__, __dir__ = _lazy.attributes(__name__, {n: "tunejet." + n for n in ("air", "train", "tune")})

__version__ = "0.1.0"

__all__ = _protocol.__all__ + ["ObjectRef", "air", "get", "put", "run_trials", "train", "tune"]
