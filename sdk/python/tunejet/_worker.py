"""One trial of a Python driver's experiment: ``python -m tunejet._worker NAME``.

The runner starts this command once per attempt, in the trial directory,
or, when the experiment reuses workers (TuneConfig.reuse_actors, the
default), once per experiment and resource set as a fork server
(tunejet._forkserver) that forks one process per attempt. It loads the trainable the driver pickled (tunejet._ship), or, the
fallback, runs the driver's script (or imports the trainable's module) to
find it. A function is called with the trial's config in the trial
directory, and the worker exits 0 when it returns; a tune.Trainable
subclass runs its step() loop (tunejet._trainable.run). An exception is
printed, from the trainable's frame on, to stderr, whose last lines become
the trial's error, and fails the attempt (exit status 1).
"""

import importlib
import inspect
import json
import numbers
import os
import sys
import types

from tunejet import _forkserver, _protocol, _session, _ship, _trainable


class _Fatal(Exception):
    """The worker cannot run the trial; the message says why."""


def find_trainable(info, name):
    """Return the trainable of the driver's fit() call info["fit"]."""
    from tunejet import _tuner  # the driver API, which only the replay needs

    _tuner._enter_worker(info)
    sys.path[:0] = [p for p in info.get("sys_path", []) if p not in sys.path]
    if "script" not in info:
        module = importlib.import_module(info["module"])
        trainable = module
        for part in info["qualname"].split("."):
            trainable = getattr(trainable, part)
        return trainable
    script = info["script"]
    trial_dir = os.getcwd()
    sys.argv = [script] + list(info.get("argv", []))
    sys.path.insert(0, os.path.dirname(script))
    main = types.ModuleType("__main__")
    main.__file__ = script
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    try:
        with open(script, "rb") as f:
            code = compile(f.read(), script, "exec")
        os.chdir(info.get("cwd") or trial_dir)
        exec(code, main.__dict__)
    except _tuner._TrainableFound as found:
        return found.trainable
    except SystemExit as e:
        raise _Fatal(
            "%s exited (status %r) before its fit() call number %d, which runs this trial"
            % (script, e.code, info["fit"] + 1)
        ) from None
    finally:
        os.chdir(trial_dir)
    raise _Fatal(
        "%s ended without reaching its fit() call number %d, which runs this trial "
        "(does the script take another path when run again?)" % (script, info["fit"] + 1)
    )


def load_trainable(info):
    """Return the trainable the driver pickled (info names its object)."""
    sys.path[:0] = [p for p in info.get("sys_path", []) if p not in sys.path]
    if info.get("argv"):
        sys.argv = list(info["argv"])  # the driver's, as the trainable may read them
    path = _protocol.get_object(info["trainable_object"])
    try:
        return _ship.unpack(path)
    except Exception as e:
        raise _Fatal(
            "cannot load the trainable the driver pickled (object %s): %s: %s (does this host have "
            "cloudpickle, and the modules the trainable imports, for %s?)"
            % (info["trainable_object"], type(e).__name__, e, sys.executable)
        ) from None


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _print_error(exc, skip):
    """Print exc's traceback without its first skip frames (the worker's),
    nor the tunejet frames that follow them (a wrapper, the class loop)."""
    import traceback  # only a failing trial needs it

    tb = exc.__traceback__
    for _ in range(skip):
        if tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename.startswith(_PACKAGE):
        tb = tb.tb_next
    sys.stderr.write("".join(traceback.format_exception(type(exc), exc, tb)))
    sys.stderr.flush()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tunejet._worker TRAINABLE_NAME (run by a tunejet runner)")
    name = sys.argv[1]
    if not _protocol.in_session():
        sys.exit("python -m tunejet._worker runs one trial of a Tuner's fit(); a tunejet runner starts it")
    trainable, info = load(name)
    if os.environ.get(_forkserver.ENV):
        _forkserver.serve(lambda: run(trainable, info))
    else:
        run(trainable, info)


def load(name):
    """Return the trainable named name and the driver's description of
    it; exit with the reason when it cannot be loaded."""
    try:
        with open(_protocol.get_object(_ship.DRIVER_OBJECT)) as f:
            info = json.load(f)
    except (OSError, RuntimeError, ValueError) as e:
        sys.exit("cannot read the driver's description (object %s): %s" % (_ship.DRIVER_OBJECT, e))
    try:
        if "trainable_object" in info:
            trainable = load_trainable(info)
        else:
            trainable = find_trainable(info, name)
    except _Fatal as e:
        sys.exit(str(e))
    except Exception as e:
        sys.stderr.write("running the script to find the trainable failed:\n")
        _print_error(e, 2)
        sys.exit(1)
    found = _ship.trainable_name(trainable)
    if found != name:
        sys.exit(
            "the driver's fit() call gives trainable %r, and this experiment runs %r "
            "(was the script changed?)" % (found, name)
        )
    return trainable, info


def run(trainable, info):
    """Run the trial this process was started (or forked) for."""
    config = _protocol.get_config()
    try:
        if _trainable.is_class_trainable(trainable):
            _trainable.run(trainable, config, info.get("trainable_settings"))
            return
        if inspect.isgeneratorfunction(trainable):
            for out in trainable(config):
                _report_output(out)
        else:
            _report_output(trainable(config))
    except Exception as e:
        _print_error(e, 1)
        sys.exit(1)


def _report_output(out):
    """Report what the trainable returned or yielded, as Ray's
    wrap_function: a dict as it is, a number as {"_metric": number},
    nothing for a falsy value; anything else is an error."""
    if not out:
        return
    if isinstance(out, dict):
        _session.report(out)
    elif isinstance(out, numbers.Number):
        _session.report({"_metric": out})
    else:
        raise ValueError(
            "Invalid return or yield value. Either return/yield a single number or a "
            "dictionary object in your trainable function."
        )


if __name__ == "__main__":
    main()
