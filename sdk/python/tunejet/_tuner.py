"""Tuner: Ray Tune's driver, running experiments with the tunejet binary.

fit() writes an experiment file whose trainable is the command
``python -m tunejet._worker <trainable name>``, runs ``tunejet run
--new-run FILE`` (a new run even where the name has state, as Ray's)
and reads the results back from storage. The trainable goes to each
trial's worker by value, as in Ray: pickled with cloudpickle
(tunejet._ship), as the experiment's object TRAINABLE_OBJECT. What else
the worker needs travels as the object DRIVER_OBJECT (both are stored
with the objects of tunejet.put), which each worker reads over the
trainable protocol: so the trials run alike on the embedded stack and on a
deployment's runners, and the trainable's command stays the same across
restores.

The fallback, when cloudpickle is missing or the trainable cannot be
pickled (fit() warns why): the worker runs the driver's script again, as
__main__ with the driver's argv, sys.path and working directory, until
the script's fit() call of the same rank: in a worker, Tuner records its
trainable and fit() raises _TrainableFound, so that the experiment does
not run again; the worker then calls that trainable with the trial's
config.
"""

import collections
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import warnings

from tunejet import _config, _driver, _functions, _objects, _reporter, _result, _ship, _space, _trainable
from tunejet._trainable import Trainable  # noqa: F401  (tune.Trainable)

# The object that carries the driver's description to workers.
DRIVER_OBJECT = _ship.DRIVER_OBJECT

# How many of the tunejet process's last stderr lines an error quotes.
_STDERR_TAIL = 20


class _TrainableFound(BaseException):
    """Raised by fit() in a worker at the fit() call it is to run: carries
    the trainable given to that call's Tuner. A BaseException, so that a
    script's ``except Exception`` around fit() does not swallow it."""

    def __init__(self, trainable):
        super().__init__("trainable found")
        self.trainable = trainable


class _Worker:
    """A worker's view of the driver: which fit() call it runs, the
    experiment paths of the driver's earlier fit() calls and the driver's
    can_restore answers, replayed in order."""

    def __init__(self, info):
        self.target = info["fit"]
        self.fits = info.get("fits") or []
        self.records = info.get("fit_records") or []
        self.can_restore = list(info.get("can_restore") or [])
        self.binary = info.get("bin")
        self.count = 0


_worker = None  # a _Worker in a trial's process, else None

# The driver's history, passed to its workers so that they take the same
# path through the script: experiment paths of finished fit() calls and
# can_restore answers, in call order.
_fits = []
# The trial records each finished fit() call read back, by its rank: a
# worker's replay of the script sees what the driver saw, not what storage
# holds by the time the trial runs (a restore may have changed it).
_fit_records = {}
_can_restore_answers = []


def _enter_worker(info):
    """Switch this process to worker mode (called by tunejet._worker)."""
    global _worker
    _worker = _Worker(info)


def with_parameters(trainable, **kwargs):
    """Return trainable with kwargs passed to each call, as Ray's.

    The objects go to the trials pickled with the trainable. A class
    trainable (a tune.Trainable subclass) gets them as keyword arguments
    of its setup(config, **kwargs).
    """
    _check_function(trainable)
    if _trainable.is_class_trainable(trainable):
        return _subclass(trainable, setup=_setup_with(trainable, kwargs))

    @functools.wraps(trainable)
    def inner(config):
        return trainable(config, **kwargs)

    return inner


def with_resources(trainable, resources):
    """Return trainable with the resources each of its trials needs, as
    Ray's: a dict of amounts, ``{"cpu": 2, "gpu": 0.5, "memory": 4e9,
    "my_custom": 1}`` (cpu defaults to 1; a GPU fraction below 1 shares a
    device; memory is in bytes), or a train.ScalingConfig, whose
    total_resources the trial holds. A runner starts a trial only when its
    free capacity fits, and gives it its GPUs (CUDA_VISIBLE_DEVICES). An
    amount may be ``{"config": "key"}``: the trial's own config value at
    that key, which is how trials of one experiment ask for different
    amounts (Ray's ``lambda config: ...``, which tunejet cannot run)."""
    _check_function(trainable)
    spec = _resources_spec(resources)
    if _trainable.is_class_trainable(trainable):
        return _subclass(trainable, _tunejet_resources=spec)

    @functools.wraps(trainable)
    def inner(config, *args, **kwargs):
        return trainable(config, *args, **kwargs)

    inner._tunejet_resources = spec
    return inner


def _setup_with(cls, kwargs):
    def setup(self, config):
        return cls.setup(self, config, **kwargs)

    return setup


def _subclass(cls, **attrs):
    """Return a subclass of the class trainable cls with attrs, under
    cls's name (the trainable's name in trial names and restores)."""
    attrs.setdefault("__module__", cls.__module__)
    attrs.setdefault("__qualname__", cls.__qualname__)
    attrs.setdefault("__doc__", cls.__doc__)
    return type(cls.__name__, (cls,), attrs)


_RESOURCE_NAMES = {"cpu": "cpu", "gpu": "gpu", "memory": "memory"}


def _resources_spec(resources):
    """Return resources in the experiment file's syntax."""
    if isinstance(resources, _config.ScalingConfig):
        resources = resources.total_resources
    if callable(resources):
        raise TypeError(
            "tune.with_resources: a function of the config is not supported (tunejet runs no "
            "Python to place trials): give the amounts, and {\"config\": \"key\"} for an amount "
            "that is the trial's config value at key, e.g. {\"gpu\": {\"config\": \"gpus\"}}"
        )
    if not isinstance(resources, dict):
        raise TypeError(
            "tune.with_resources: resources must be a dict such as {\"cpu\": 2, \"gpu\": 1}, got %s "
            "(placement group factories are not supported)" % type(resources).__name__
        )
    out = {}
    for name, amount in resources.items():
        key = _RESOURCE_NAMES.get(str(name).lower(), str(name))
        if isinstance(amount, dict):
            if set(amount) != {"config"} or not isinstance(amount["config"], str) or not amount["config"]:
                raise ValueError(
                    "tune.with_resources: %s: %r is neither a number nor {\"config\": \"key\"}" % (name, amount)
                )
            out[key] = {"config": amount["config"]}
            continue
        if isinstance(amount, bool) or not isinstance(amount, (int, float)):
            raise ValueError("tune.with_resources: %s must be a number, got %r" % (name, amount))
        if amount < 0:
            raise ValueError("tune.with_resources: %s must be >= 0, got %r" % (name, amount))
        out[key] = amount
    return out


def _check_function(trainable):
    if isinstance(trainable, type):
        if _trainable.is_class_trainable(trainable):
            return
        raise TypeError(
            "the class %s is not a trainable: subclass tune.Trainable, or pass a function that "
            "takes the config and calls tunejet.train.report" % trainable.__name__
        )
    if not callable(trainable):
        raise TypeError(
            "the trainable must be a function taking the config or a tune.Trainable subclass, "
            "got %r (registered trainable names are not supported)" % (trainable,)
        )


def _check_function_checkpoints(cc):
    """Refuse the checkpoint settings of class trainables for a function,
    with Ray's errors."""
    if cc is None:
        return
    if cc.checkpoint_at_end:
        raise ValueError(
            "'checkpoint_at_end' cannot be used with a function trainable. You should include one "
            "last call to `train.report(metrics=..., checkpoint=...)` at the end of your training "
            "loop to get this behavior."
        )
    if cc.checkpoint_frequency:
        raise ValueError(
            "'checkpoint_frequency' cannot be set for a function trainable. You will need to report "
            "a checkpoint every `checkpoint_frequency` iterations within your training loop using "
            "`train.report(metrics=..., checkpoint=...)` to get this behavior."
        )


_trainable_name = _ship.trainable_name


class Tuner:
    """Ray's Tuner: ``Tuner(trainable, param_space=..., tune_config=...,
    run_config=...).fit()`` runs the experiment and returns a ResultGrid.

    trainable is a function taking the config dict, or a tune.Trainable
    subclass; it goes to the trials pickled by value (cloudpickle).
    """

    def __init__(self, trainable=None, *, param_space=None, tune_config=None, run_config=None, _restore=None):
        if _worker is None:
            _check_function(trainable)
        self._trainable = trainable
        self._param_space = param_space
        self._tune_config = tune_config or _config.TuneConfig()
        self._run_config = run_config or _config.RunConfig()
        if _worker is None and not _trainable.is_class_trainable(trainable):
            _check_function_checkpoints(self._run_config.checkpoint_config)
        self._restore = _restore
        self._experiment_path = _restore["path"] if _restore else None
        self._records = None  # what get_results read last

    @classmethod
    def restore(
        cls,
        path,
        trainable,
        resume_unfinished=True,
        resume_errored=False,
        restart_errored=False,
        param_space=None,
        storage_filesystem=None,
        _resume_config=None,
        sync_config=None,
        callbacks=None,
        num_samples=None,
    ):
        """Return a Tuner whose fit() continues the experiment at path, as
        Ray's: finished trials are kept, unfinished ones resume from their
        latest checkpoint, errored ones stay ERROR unless resume_errored
        (from their checkpoint) or restart_errored (from scratch).
        param_space re-specifies the same keys.

        sync_config (tunejet's; Ray's restore takes none) is the
        experiment's train.SyncConfig, passed like trainable: its
        upload_dir, syncer and exclude are the caller's, never read from
        the stored state. When path holds no experiment_state-*.json and
        it gives an upload_dir, fit() first brings path back from
        <upload_dir>/<name> with the syncer's sync_down; the restored run
        then mirrors there with them. Without it, a restore from a state
        file does not mirror, and one from the event log keeps the
        experiment's mirror. Its other settings are not used.

        callbacks (tunejet's) are the restored fit()'s RunConfig callbacks;
        without it, those the first fit() kept beside the experiment (Ray
        restores them from its pickled RunConfig). Each hook sees each
        event once across the runs (docs/driver.md).

        num_samples (tunejet's; Ray's restore keeps the TuneConfig) sets
        the experiment's num_samples: a larger one adds trials to it, even
        when it had finished, and the searcher learns from every trial so
        far (`tunejet restore --num-samples`); a smaller one is refused."""
        if storage_filesystem is not None:
            raise ValueError("storage_filesystem is not supported: give path as a URL")
        if _worker is None:
            _check_function(trainable)
        restore = {
            "path": _absolute(os.fspath(path)),
            "resume_unfinished": resume_unfinished,
            "resume_errored": resume_errored,
            "restart_errored": restart_errored,
        }
        if sync_config is not None:
            if not isinstance(sync_config, _config.SyncConfig):
                raise ValueError("sync_config must be a SyncConfig, got %r" % (sync_config,))
            restore["sync_config"] = sync_config.to_spec()  # checked here, as Tuner() checks run_config
        if callbacks is not None:
            restore["callbacks"] = callbacks
        if num_samples is not None:
            if isinstance(num_samples, bool) or not isinstance(num_samples, int) or (num_samples < 1 and num_samples != -1):
                raise ValueError("num_samples must be a count >= 1, or -1 to sample until stopped; got %r" % (num_samples,))
            restore["num_samples"] = num_samples
        return cls(trainable, param_space=param_space, _restore=restore)

    @classmethod
    def can_restore(cls, path, storage_filesystem=None):
        """Return True when the experiment at path has state to restore."""
        if storage_filesystem is not None:
            raise ValueError("storage_filesystem is not supported: give path as a URL")
        if _worker is not None:
            return _worker.can_restore.pop(0) if _worker.can_restore else True
        binary = _binary()
        proc = subprocess.run(
            [binary, "can-restore", _absolute(os.fspath(path))],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if proc.returncode not in (0, 1):
            raise _result.TuneError(
                "tunejet can-restore exited with status %d: %s" % (proc.returncode, proc.stderr.strip())
            )
        answer = proc.returncode == 0
        _can_restore_answers.append(answer)
        return answer

    def fit(self):
        """Run the experiment to its end and return its ResultGrid.

        Ctrl-C stops it cleanly (the trials' state is kept), prints how to
        restore it and raises KeyboardInterrupt.
        """
        if _worker is not None:
            return self._worker_fit()
        # The rank of this call among the script's fit() calls, which the
        # workers count too: taken first, whatever happens next.
        rank = len(_fits)
        _fits.append(None)
        binary = _binary()
        trainable_name = _trainable_name(self._trainable)
        workdir = tempfile.mkdtemp(prefix="tunejet-driver-")
        try:
            if self._restore:
                path = self._restore["path"]
                args = self._restore_args(binary, workdir, trainable_name)
            else:
                spec = self._spec(trainable_name)
                path = _experiment_path(spec["run_config"]["storage_path"], spec["name"])
                file = os.path.join(workdir, "experiment.json")
                with open(file, "w") as f:
                    json.dump(spec, f, indent=2)
                # A new run even where the name has state, as Ray's fit().
                args = [binary, "run", "--new-run", file]
            args += _reporter.args(self._run_config.verbose, self._run_config.progress_reporter)
            driver = os.path.join(workdir, "driver.json")
            with open(driver, "w") as f:
                json.dump(self._worker_info(binary, rank, workdir, args), f)
            args += ["--object=" + a for a in _objects.write_all(os.path.join(workdir, "objects"))]
            args.append("--object=%s=%s" % (DRIVER_OBJECT, driver))
            self._experiment_path = path
            _fits[rank] = path
            _run(args, _environ(), path, trainable_name, _driver.for_fit(self, path, trainable_name))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        grid = self.get_results()
        _fit_records[rank] = self._records
        fc = self._run_config.failure_config
        if fc is not None and str(fc.fail_fast).lower() == "raise" and grid.errors:
            raise grid.errors[0]
        return grid

    def get_results(self):
        """Return the ResultGrid of the experiment, read from its storage."""
        if self._experiment_path is None:
            raise RuntimeError("fit() has not run: there are no results yet")
        metric, mode = self._tune_config.metric, self._tune_config.mode
        if self._restore or not metric:
            metric, mode = _result.read_objective(self._experiment_path)
        self._records = _load_records(_binary(), self._experiment_path)
        return _result.ResultGrid(self._experiment_path, [_result.Result(r) for r in self._records], metric, mode)

    def _param_space_with_searcher(self):
        """The param space: the Tuner's, or its searcher's space (Ray's
        OptunaSearch(space=...)), which the Tuner's may then not repeat."""
        from tunejet.tune import search

        searcher = _config._searcher(self._tune_config.search_alg)
        space = getattr(searcher, "space", None) if search.is_native(searcher) else None
        if space is None:
            return self._param_space or {}
        if self._param_space and _space._has_domain(self._param_space):
            raise ValueError(
                "You passed a `param_space` parameter to `Tuner()` with unresolved parameters, but the "
                "search algorithm was already instantiated with a search space. Make sure that `config` "
                "does not contain any more parameter definitions - include them in the search algorithm's "
                "search space if necessary."
            )
        return {**(self._param_space or {}), **space}

    def _spec(self, trainable_name):
        rc = self._run_config
        storage = rc.storage_path or _config.default_storage_path()
        if "://" not in storage:
            storage = _absolute(storage)
        name = rc.name or _config.default_name(trainable_name, storage)
        run_config = {"storage_path": storage}
        run_config.update(rc.to_spec())
        spec = {
            "name": name,
            "trainable": _trainable_spec(trainable_name, self._trainable, self._tune_config.reuse_actors),
            "param_space": _space.to_spec(self._param_space_with_searcher()),
            "tune_config": self._tune_config.to_spec(),
            "run_config": run_config,
        }
        # What the driver runs, as Ray does (tunejet._driver): a stopper
        # and a searcher of the user's.
        driver = _config.driver_spec(
            _config.driver_stopper(rc.stop), _config.driver_searcher(self._tune_config.search_alg)
        )
        # sample_from and PBT's functions run in the driver too; a
        # function mutation the param space lacks gives each trial its
        # first value, as Ray's PBT fills the config.
        functions = _functions.collect(self._param_space_with_searcher(), self._tune_config.scheduler)
        for path in functions.fills(self._param_space_with_searcher()):
            _functions.set_path(spec["param_space"], path, {"sample_from": functions.sample_from[path].name})
        if driver or functions:
            spec["driver"] = driver or {}
        return spec

    def _restore_args(self, binary, workdir, trainable_name):
        r = self._restore
        file = os.path.join(workdir, "experiment.json")
        experiment = {"trainable": _trainable_spec(trainable_name, self._trainable)}
        if r.get("sync_config"):
            experiment["run_config"] = {"sync_config": r["sync_config"]}
        with open(file, "w") as f:
            json.dump(experiment, f, indent=2)
        args = [binary, "restore", r["path"], file]
        if not r["resume_unfinished"]:
            args.append("--resume-unfinished=false")
        if r["resume_errored"]:
            args.append("--resume-errored")
        if r["restart_errored"]:
            args.append("--restart-errored")
        if r.get("num_samples") is not None:
            args += ["--num-samples", str(r["num_samples"])]
        if self._param_space is not None:
            space = os.path.join(workdir, "param_space.json")
            with open(space, "w") as f:
                json.dump(_space.to_spec(self._param_space), f, indent=2)
            args += ["--param-space", space]
        return args

    def _worker_info(self, binary, rank, workdir, args):
        """Return the description of this fit() call for its workers, and
        add to args the object of the trainable, pickled by value; when it
        cannot be, warn why and describe the replay of the script instead."""
        data, why = _ship.pack(self._trainable)
        if data is None:
            warnings.warn(
                "tunejet: the trainable %s does not go to the trials by value: %s; so each trial "
                "runs the script again up to this fit() call to find it"
                % (_trainable_name(self._trainable), why),
                stacklevel=3,
            )
            info = self._driver_info(binary, rank)
        else:
            file = os.path.join(workdir, "trainable.pkl")
            with open(file, "wb") as f:
                f.write(data)
            args.append("--object=%s=%s" % (_ship.TRAINABLE_OBJECT, file))
            cwd = os.getcwd()
            info = {
                "trainable_object": _ship.TRAINABLE_OBJECT,
                "bin": binary,
                "cwd": cwd,
                "sys_path": [p or cwd for p in sys.path],
                "argv": list(sys.argv),
            }
        if not self._restore:
            info["trainable_settings"] = self._trainable_settings()
        return info

    def _trainable_settings(self):
        """Return what a class trainable's loop needs of the run config:
        the checkpoint frequency, checkpoint at end and the stop dict."""
        cc = self._run_config.checkpoint_config or _config.CheckpointConfig()
        stop = self._run_config.stop
        return {
            "checkpoint_frequency": cc.checkpoint_frequency,
            "checkpoint_at_end": cc.checkpoint_at_end,
            "stop": dict(stop) if isinstance(stop, dict) else {},
        }

    def _driver_info(self, binary, rank):
        """Return what a worker needs to find this fit() call's trainable."""
        main = sys.modules.get("__main__")
        script = getattr(main, "__file__", None)
        info = {
            "fit": rank,
            "fits": _fits[:rank],
            "fit_records": [_fit_records.get(k) for k in range(rank)],
            "can_restore": list(_can_restore_answers),
            "bin": binary,
            "cwd": os.getcwd(),
            "sys_path": [p for p in sys.path if p],
        }
        if script:
            info["script"] = os.path.abspath(script)
            info["argv"] = sys.argv[1:]
        else:
            module = getattr(self._trainable, "__module__", None)
            qualname = getattr(self._trainable, "__qualname__", "")
            if not module or module == "__main__" or "<" in qualname:
                raise _result.TuneError(
                    "the trainable must be defined in the script that calls fit(), or be a "
                    "top-level function of an importable module: %r is neither" % (self._trainable,)
                )
            info["module"], info["qualname"] = module, qualname
        return info

    def _worker_fit(self):
        k = _worker.count
        _worker.count += 1
        if k == _worker.target:
            raise _TrainableFound(self._trainable)
        if k < len(_worker.fits) and _worker.fits[k]:
            # An earlier fit() of the driver: its results as the driver read
            # them (else, from an older driver, read from storage when used).
            path, binary = _worker.fits[k], _worker.binary
            metric, mode = self._tune_config.metric, self._tune_config.mode
            if k < len(_worker.records) and _worker.records[k] is not None:
                return _result.ResultGrid(path, [_result.Result(r) for r in _worker.records[k]], metric, mode)
            return _result.ResultGrid(path, None, metric, mode, loader=lambda: _load_records(binary, path))
        if k < len(_worker.fits):
            raise _result.TuneError("fit() call %d of the script failed in the driver" % (k + 1))
        raise RuntimeError("fit() call %d of the script comes after the one this trial runs" % (k + 1))


def _environ():
    """Return the tunejet process's environment: PYTHONPATH so that the
    workers of the embedded stack import this package (a deployment's
    runners need it installed, or on their own PYTHONPATH)."""
    env = dict(os.environ)
    if "TUNEJET_LOG_FORMAT" not in env and sys.stderr.isatty():
        env["TUNEJET_LOG_FORMAT"] = "console"  # its stderr is a pipe to ours
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [package_parent] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def _trainable_spec(trainable_name, trainable, reuse_actors=None):
    spec = {"command": [sys.executable, "-m", "tunejet._worker", trainable_name], "name": trainable_name}
    if reuse_actors is not False:
        # Runners keep a warm worker that forks each trial (tunejet._forkserver).
        spec["fork_server"] = True
    resources = getattr(trainable, "_tunejet_resources", None)
    if resources:
        spec["resources"] = resources
    return spec


def _absolute(path):
    if "://" in path:
        return path
    return os.path.abspath(os.path.expanduser(path))


def _experiment_path(storage, name):
    if "://" not in storage:
        return os.path.join(storage, name)
    base, sep, query = storage.partition("?")
    return base.rstrip("/") + "/" + name + sep + query


def _binary():
    """Return the tunejet binary: TUNEJET_BIN, else tunejet on PATH."""
    binary = os.environ.get("TUNEJET_BIN") or shutil.which("tunejet")
    if not binary:
        raise _result.TuneError(
            "the tunejet binary was not found: set TUNEJET_BIN to its path or put tunejet on "
            "PATH (in the repository, `make build` builds bin/tunejet)"
        )
    if not os.access(binary, os.X_OK):
        raise _result.TuneError("TUNEJET_BIN=%s is not an executable file" % binary)
    return binary


def _run(args, env, path, trainable_name, driver=None):
    """Run the tunejet process to its end, its stdout on ours and its
    stderr both on ours and kept for errors. Ctrl-C is forwarded once per
    press (the second one makes tunejet exit at once), then re-raised.
    With a driver (callbacks), this thread runs their hooks on the events
    tunejet relays; a hook's exception stops the experiment and is raised."""
    fds = ()
    if driver is not None:
        args, fds = args + driver.args(), driver.child_fds
    proc = subprocess.Popen(args, env=env, stderr=subprocess.PIPE, start_new_session=True, pass_fds=fds)
    if driver is not None:
        driver.started()
    tail = collections.deque(maxlen=_STDERR_TAIL)

    def copy():
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace")
            tail.append(line.rstrip("\n"))
            sys.stderr.write(line)
            sys.stderr.flush()

    copier = threading.Thread(target=copy, daemon=True)
    copier.start()
    interrupted = False
    failed = None  # a hook's exception
    while True:
        try:
            if driver is not None and not interrupted:
                try:
                    driver.serve()
                except Exception as e:  # noqa: BLE001 (raised below, once tunejet has ended)
                    failed = e
                driver.close()
            code = proc.wait()
            break
        except KeyboardInterrupt:
            interrupted = True
            if driver is not None:
                driver.close()  # no more hooks: the event being handled is not acknowledged
            proc.send_signal(signal.SIGINT)
    copier.join()
    proc.stderr.close()
    if failed is not None:
        raise failed
    if interrupted or code == 130:
        sys.stderr.write(
            "Resume it from Python with:\n    tuner = Tuner.restore(%r, trainable=%s)\n    tuner.fit()\n"
            % (path, trainable_name)
        )
        raise KeyboardInterrupt
    if code != 0:
        raise _result.TuneError(
            "%s exited with status %d:\n%s" % (" ".join(args[:2]), code, "\n".join(tail))
        )


def _load_records(binary, path):
    """Return the trial records of `tunejet results PATH --json`."""
    proc = subprocess.run([binary, "results", path, "--json"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise _result.TuneError("cannot read the results at %s: %s" % (path, proc.stderr.strip()))
    return json.loads(proc.stdout).get("trials") or []


def load_results(binary, path, metric=None, mode=None):
    """Return the ResultGrid of the experiment at path."""
    return _result.ResultGrid(path, [_result.Result(r) for r in _load_records(binary, path)], metric, mode)
