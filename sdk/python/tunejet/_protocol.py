"""The trainable protocol's client: a command trainable's side of
docs/trainable-protocol.md, over the runner's Unix socket.

The package re-exports these functions as ``tunejet.report``,
``tunejet.get_checkpoint`` and so on; see the package's docstring.
"""

import json
import math
import numbers
import os
import socket
import sys
import threading

__all__ = [
    "report",
    "get_checkpoint",
    "get_config",
    "get_trial_dir",
    "get_trial_id",
    "get_trial_name",
    "get_experiment_name",
    "get_attempt",
    "get_gpu_ids",
    "get_resources",
    "in_session",
]

# The longest request or reply line the runner accepts, newline excluded.
MAX_LINE_SIZE = 1 << 20

_lock = threading.Lock()
_sock = None  # the connection to the runner, opened by the first report
_reader = None  # buffered reader on _sock
_pid = None  # the process that opened _sock; a forked child opens its own


def in_session():
    """Return True when the script runs under a tunejet runner."""
    return bool(os.environ.get("TUNEJET_SOCKET"))


def report(metrics, checkpoint_dir=None):
    """Report one result of the trial, with an optional checkpoint.

    metrics is a dict, for example ``{"loss": 0.25}``; a value JSON cannot
    hold is sent as its string, as Ray writes it (see _jsonable).
    checkpoint_dir, when given, is a directory whose files become the
    trial's checkpoint; the runner has copied them when report returns, so
    the directory may be deleted then. Exits the process with status 0 when
    the runner says the trial should stop.
    """
    if not isinstance(metrics, dict):
        raise TypeError("metrics must be a dict, got %s" % type(metrics).__name__)
    request = {"op": "report", "metrics": _jsonable(metrics)}
    if checkpoint_dir is not None:
        path = os.fspath(checkpoint_dir)
        if not path:
            raise ValueError("checkpoint_dir must be a directory path, not ''")
        request["checkpoint_dir"] = os.path.abspath(path)
    reply = _request(request)
    if reply.get("stop"):
        _close()
        sys.exit(0)


def get_checkpoint():
    """Return the directory of the checkpoint to resume from, or None.

    It is a local copy of the trial's latest checkpoint, present only when
    this attempt resumes (after a failure, or on a restored experiment).
    """
    _require_session()
    return os.environ.get("TUNEJET_CHECKPOINT_DIR") or None


def get_object(name):
    """Return a local file holding the bytes of the object stored under
    name (the trainable protocol's get_object); tunejet.get reads it."""
    return _request({"op": "get_object", "name": name})["path"]


def get_config():
    """Return the trial's config, a dict (from TUNEJET_CONFIG)."""
    raw = _env("TUNEJET_CONFIG")
    try:
        config = json.loads(raw)
    except ValueError as e:
        raise RuntimeError("TUNEJET_CONFIG is not valid JSON: %s" % e) from e
    if not isinstance(config, dict):
        raise RuntimeError("TUNEJET_CONFIG is not a JSON object: %.100s" % raw)
    return config


def get_trial_dir():
    """Return the trial directory, absolute; also the working directory."""
    return _env("TUNEJET_TRIAL_DIR")


def get_trial_id():
    """Return the trial's id."""
    return _env("TUNEJET_TRIAL_ID")


def get_trial_name():
    """Return the trial's display name."""
    return _env("TUNEJET_TRIAL_NAME")


def get_experiment_name():
    """Return the experiment's name."""
    return _env("TUNEJET_EXPERIMENT")


def get_attempt():
    """Return the attempt number: 1 for the first run of the trial, then 2, ..."""
    raw = _env("TUNEJET_ATTEMPT")
    try:
        return int(raw)
    except ValueError:
        raise RuntimeError("TUNEJET_ATTEMPT is not an integer: %r" % raw) from None


def get_gpu_ids():
    """Return the ids of the GPUs the runner gave the trial, a list of
    ints (Ray's ray.get_gpu_ids()); CUDA_VISIBLE_DEVICES names the same
    devices. Empty for a trial that asked for no GPU."""
    _require_session()
    raw = os.environ.get("TUNEJET_GPU_IDS", "")
    return [int(i) if i.isdigit() else i for i in raw.split(",") if i]


def get_resources():
    """Return the resources the runner gave the trial: a dict of amounts,
    {"cpu": 1} unless the experiment asked for others."""
    _require_session()
    raw = os.environ.get("TUNEJET_RESOURCES")
    if not raw:
        return {"cpu": 1}
    try:
        return json.loads(raw)
    except ValueError as e:
        raise RuntimeError("TUNEJET_RESOURCES is not valid JSON: %s" % e) from e


def _require_session():
    if not in_session():
        raise RuntimeError(
            "not running under a tunejet runner: TUNEJET_SOCKET is not set "
            "(run the experiment with `tunejet run experiment.yaml`)"
        )


def _env(name):
    _require_session()
    value = os.environ.get(name)
    if value is None:
        raise RuntimeError("%s is not set by the tunejet runner" % name)
    return value


def _jsonable(value):
    """Return value as JSON values, as Ray's SafeFallbackEncoder writes a
    result: NaN and infinities as None, item() scalars (NumPy, PyTorch)
    unwrapped, arrays by tolist(), other integral numbers as ints and other
    numbers as floats; anything else that JSON cannot hold (an object, a
    set, a complex number) as str(value)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    for unwrap in ("item", "tolist"):
        method = getattr(value, unwrap, None)
        if callable(method):
            try:
                plain = method()
            except (TypeError, ValueError):
                continue  # item() of an array with several elements
            if plain is not value:
                return _jsonable(plain)
    try:
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Number):
            return _jsonable(float(value))
    except (TypeError, ValueError, OverflowError):
        pass  # complex
    return str(value)


def _request(request):
    """Send one request and return its reply, a dict with "ok": true."""
    line = json.dumps(request, allow_nan=False, separators=(",", ":")).encode("utf-8")
    if len(line) > MAX_LINE_SIZE:
        raise ValueError(
            "%s request is %d bytes, over the %d-byte limit"
            % (request["op"], len(line), MAX_LINE_SIZE)
        )
    with _lock:
        raw = _exchange(line + b"\n")
    try:
        reply = json.loads(raw)
    except ValueError as e:
        raise RuntimeError("bad reply from the tunejet runner: %.200r" % raw) from e
    if not isinstance(reply, dict) or reply.get("ok") is not True:
        error = reply.get("error") if isinstance(reply, dict) else None
        raise RuntimeError(
            "tunejet runner rejected the %s request: %s"
            % (request["op"], error or "no reason given")
        )
    return reply


def _exchange(line):
    """Write line and read one reply line; call with _lock held."""
    reader = _connect()
    try:
        _sock.sendall(line)
        raw = reader.readline(MAX_LINE_SIZE + 2)
    except OSError as e:
        _close_locked()
        raise RuntimeError("lost the connection to the tunejet runner: %s" % e) from e
    if not raw.endswith(b"\n"):
        _close_locked()
        if raw:
            raise RuntimeError("reply from the tunejet runner is too long or cut off")
        raise RuntimeError("the tunejet runner closed the connection")
    return raw


def _connect():
    """Return the reader of the connection, opening it if needed."""
    global _sock, _reader, _pid
    if _sock is not None and _pid == os.getpid():
        return _reader
    _require_session()
    path = os.environ["TUNEJET_SOCKET"]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as e:
        sock.close()
        raise RuntimeError(
            "cannot connect to the tunejet runner at %s: %s" % (path, e)
        ) from e
    _sock, _reader, _pid = sock, sock.makefile("rb"), os.getpid()
    return _reader


def _close():
    with _lock:
        _close_locked()


def _close_locked():
    global _sock, _reader, _pid
    if _sock is not None and _pid == os.getpid():
        _reader.close()
        _sock.close()
    _sock, _reader, _pid = None, None, None
