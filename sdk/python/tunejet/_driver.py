"""The driver's end of the pipes to the tunejet process (docs/driver.md).

fit() passes the tunejet process two pipes as inherited file descriptors
(``--driver-fds R,W``): tunejet writes JSON lines to W and reads the
driver's from R. tunejet sends ``{"kind": "event", ...}``, which the driver
folds and feeds to its callbacks, and answers each event that is not a
replay with ``{"kind": "ack", "seq": N}`` once their hooks have returned;
and ``{"kind": "request", ...}``, the controller's questions to the
driver's stopper, searcher and functions (sample_from, PBT's: see
tunejet._functions), which it answers with ``{"kind": "reply", ...}``.

The stopper and searcher see one history, live or replayed: the
searcher's notifications (on_trial_result, on_trial_complete) are called
lazily, all those of the events up to a call's ``through``, in log order,
just before the call; and a ``driver.answered`` event this process did not
answer itself (a killed driver did) makes the same call again, its answer
ignored. So the calls they see are a function of the log alone. The
functions keep no state a decision depends on: a recorded answer of theirs
is not called again.
"""

import json
import os
import warnings

from tunejet import _callbacks, _config, _functions, _result

# The file in the experiment's folder that keeps its driver's stopper and
# searcher (and the search properties the searcher was given), pickled
# before their first call.
OBJECTS_FILE = "tunejet_driver.pkl"


class Driver:
    """The pipes of one fit(), and the callbacks and objects they feed."""

    def __init__(self, dispatcher, objects=None, keep=None):
        self.dispatcher = dispatcher
        self.objects = objects if objects is not None else Objects()
        self._keep = keep
        events_r, events_w = os.pipe()  # tunejet → driver
        acks_r, acks_w = os.pipe()  # driver → tunejet
        self.child_fds = (acks_r, events_w)
        self._events = os.fdopen(events_r, "rb")
        self._out = os.fdopen(acks_w, "wb", buffering=0)
        self._closed = False

    def args(self):
        """The tunejet flag that names the pipes' ends it inherits."""
        return ["--driver-fds", "%d,%d" % self.child_fds]

    def started(self):
        """Close the tunejet process's ends here, once it has them: the
        driver then reads EOF when that process ends."""
        for fd in self.child_fds:
            os.close(fd)

    def serve(self):
        """Handle events and requests until the tunejet process closes its
        end. An exception of a hook, the stopper or the searcher propagates
        (call close() then); after a KeyboardInterrupt serve may be called
        again."""
        while not self._closed:
            line = self._events.readline()
            if not line:
                # The tunejet process has ended: the searcher is told of
                # the trials that completed since its last call.
                self.objects.notify(float("inf"))
                return
            msg = json.loads(line)
            if self._keep is not None:
                keep, self._keep = self._keep, None
                keep()
            kind = msg.get("kind")
            if kind == "event":
                self.dispatcher.handle(msg)
                self.objects.event(msg, self.dispatcher)
                if msg.get("replay"):
                    continue
                out = {"kind": "ack", "seq": msg["seq"]}
            elif kind == "request":
                out = self.objects.request(msg)
            else:
                continue  # kinds of later versions
            try:
                self._out.write(json.dumps(out).encode() + b"\n")
            except BrokenPipeError:
                return  # the tunejet process is gone: its exit status tells
            if kind == "request" and self.objects.missing_error:
                raise self.objects.missing_error

    def close(self):
        """Close the driver's ends: the tunejet process sees its driver gone
        (it stops the experiment, which stays restorable)."""
        if self._closed:
            return
        self._closed = True
        for f in (self._out, self._events):
            try:
                f.close()
            except OSError:
                pass


class Objects:
    """The driver's stopper and searcher: the notifications the searcher is
    owed, and the answers given, by key.

    properties is (metric, mode, param_space), given to the searcher's
    set_search_properties by prepare(); missing says why a restore has no
    objects (a request for one then gets an error reply and fails fit)."""

    def __init__(self, stopper=None, searcher=None, properties=None, missing=None, functions=None):
        self.stopper = stopper
        self.searcher = searcher
        self.functions = functions if functions is not None else _functions.Functions()
        self.properties = properties
        self.missing = missing
        self.missing_error = None
        self.pending = []  # (seq, method name, args, kwargs): the searcher's notifications not yet called
        self.answers = {}  # key -> (answer, by): answered here or replayed
        self.mine = set()  # the keys this process answered
        self._completed = set()  # trials whose on_trial_complete is pending or called

    def names(self):
        f = self.functions
        return {
            "stop": _config._object_name(self.stopper) if self.stopper is not None else None,
            "suggest": _config._object_name(self.searcher) if self.searcher is not None else None,
            "sample": "sample_from" if f.sample_from else None,
            "explore": f.explore_name() if f.mutations or f.custom_explore_fn else None,
        }

    def prepare(self):
        """Give the searcher the Tuner's metric, mode and param space, as
        Ray's Tuner does before the first suggest: when the param space is
        not empty, or the searcher has no metric or mode of its own. A
        searcher that takes no param space while it holds domains is
        refused, as by Ray."""
        if self.searcher is None or self.properties is None:
            return
        metric, mode, config = self.properties
        searcher = self.searcher
        if not config and searcher.metric is not None and searcher.mode is not None:
            return
        took = searcher.set_search_properties(metric, mode, config or {})
        from tunejet import _space

        if not took and config and _space._has_domain(config):
            raise ValueError(
                "You passed a `param_space` parameter to `Tuner()` with unresolved parameters, but the "
                "search algorithm was already instantiated with a search space. Make sure that `config` "
                "does not contain any more parameter definitions - include them in the search algorithm's "
                "search space if necessary."
            )

    def event(self, msg, dispatcher):
        """Buffer the searcher's notifications that the event implies (the
        dispatcher has folded it), and replay a recorded answer."""
        kind, data, seq = msg.get("type"), msg.get("data") or {}, msg.get("seq", 0)
        if kind == "driver.answered":
            self._replay(data)
            return
        if self.searcher is None:
            return
        if kind == "experiment.completed":
            # No call follows the end: what the searcher is owed is called
            # now, as Ray tells it of each trial that completes.
            self.notify(seq)
        elif kind == "trial.reported":
            for result in list(data.get("earlier") or []) + [data.get("result") or {}]:
                self.pending.append((seq, "on_trial_result", (data["trial_id"], result), {}))
        elif kind in ("trial.completed", "trial.failed", "trial.stop_requested"):
            trial_id = data["trial_id"]
            error = data.get("status") == "ERROR" if kind == "trial.completed" else kind == "trial.failed"
            if kind == "trial.failed" and not data.get("final"):
                return  # a retry follows
            if kind == "trial.stop_requested" and getattr(dispatcher.trial(trial_id), "_ended_seq", None) != seq:
                return  # a running trial: its trial.completed follows
            if trial_id in self._completed:
                return  # a terminal trial ends once
            self._completed.add(trial_id)
            result = dict(dispatcher.trial(trial_id).last_result or {})
            self.pending.append((seq, "on_trial_complete", (trial_id,), {"result": result, "error": error}))

    def notify(self, through):
        """Call the searcher's notifications of the events up to through,
        in log order."""
        while self.pending and self.pending[0][0] <= through:
            _, name, args, kwargs = self.pending.pop(0)
            getattr(self.searcher, name)(*args, **kwargs)

    def request(self, msg):
        """Return the reply to a request: the cached answer of its key, or
        the object's, called after its notifications."""
        rid, key, method = msg.get("id"), msg.get("key"), msg.get("method")
        if key in self.answers:
            answer, by = self.answers[key]
            return {"kind": "reply", "id": rid, "answer": answer, "by": by}
        names = self.names()
        if method not in names:
            return {"kind": "reply", "id": rid, "error": "unknown method %r" % (method,)}
        if names[method] is None:
            error = self._no_object(method)
            return {"kind": "reply", "id": rid, "error": error}
        answer = self._call(method, msg)
        if not answer.get("wait"):  # a wait is asked again, and never recorded
            self.answers[key] = (answer, names[method])
            self.mine.add(key)
        return {"kind": "reply", "id": rid, "answer": answer, "by": names[method]}

    def _no_object(self, method):
        what = {"stop": "stopper", "suggest": "searcher", "sample": "sample_from functions"}.get(method, "PBT functions")
        error = "this driver has no %s%s" % (what, ": " + self.missing if self.missing else "")
        self.missing_error = _result.TuneError(
            "the experiment asks the driver's %s, and this fit() has none%s"
            % (what, " (%s)" % self.missing if self.missing else "")
        )
        return error

    def _replay(self, data):
        """Make a recorded answer's call again, unless this process gave it."""
        key, method = data.get("key"), data.get("method")
        if key in self.answers:
            return  # answered here: already called
        names = self.names()
        if method in names and names[method] is None:
            self._no_object(method)
            raise self.missing_error
        if method in ("stop", "suggest"):
            # The stopper and the searcher keep state; sample_from and
            # PBT's functions draw values the log already holds.
            self._call(method, data)
        self.answers[key] = (data.get("answer"), data.get("by"))

    def _call(self, method, inputs):
        """Call the object for method with inputs (a request, or a recorded
        answer's data); return its answer."""
        if method == "sample":
            return {"config": self.functions.sample(inputs.get("config") or {})}
        if method == "explore":
            return {"config": self.functions.explore(inputs.get("config") or {}, inputs.get("resample") or [])}
        self.notify(inputs.get("through", 0))
        trial_id = inputs.get("trial_id")
        if method == "stop":
            stop = bool(self.stopper(trial_id, inputs.get("result") or {}))
            return {"stop": stop, "stop_all": bool(self.stopper.stop_all())}
        from tunejet.tune.search import Searcher

        config = self.searcher.suggest(trial_id)
        if config is None:
            return {"wait": True}
        if isinstance(config, str) and config == Searcher.FINISHED:
            return {"finished": True}
        if not isinstance(config, dict):
            raise TypeError(
                "%s.suggest(%r) returned %r: a config dict, Searcher.FINISHED or None"
                % (type(self.searcher).__name__, trial_id, config)
            )
        try:
            config = json.loads(json.dumps(config, default=_plain, allow_nan=False))
        except (TypeError, ValueError) as e:
            raise TypeError(
                "%s.suggest(%r) returned a config that is not JSON (%s): %r"
                % (type(self.searcher).__name__, trial_id, e, config)
            ) from None
        return {"config": config}


def _plain(value):
    """A numpy scalar or array as its Python value, for json."""
    for name in ("item", "tolist"):
        f = getattr(value, name, None)
        if callable(f):
            return f()
    raise TypeError("%s is not JSON serializable" % type(value).__name__)


def _fresh_objects(tuner, path):
    """The objects of a fresh fit() and their pickle (None when there are
    none, or when the experiment is in a bucket, where they are not kept)."""
    stopper = _config.driver_stopper(tuner._run_config.stop)
    searcher = _config.driver_searcher(tuner._tune_config.search_alg)
    functions = _functions.collect(tuner._param_space_with_searcher(), tuner._tune_config.scheduler)
    if stopper is None and searcher is None and not functions:
        return None, None
    tc = tuner._tune_config
    properties = (tc.metric, tc.mode, tuner._param_space or {})
    kept = {"stopper": stopper, "searcher": searcher, "properties": properties, "functions": functions}
    data = None
    if "://" in path:
        warnings.warn(
            "the driver's stopper, searcher and functions are not kept beside an experiment in a bucket (%s): "
            "Tuner.restore cannot continue it" % path
        )
    else:
        try:
            data = _callbacks.dumps(kept)
        except Exception as e:  # noqa: BLE001 (said with why)
            raise TypeError(
                "RunConfig.stop, TuneConfig.search_alg or a function of the param space or of PBT cannot be "
                "pickled (%s): fit() keeps what the driver runs beside the experiment, for Tuner.restore" % e
            ) from e
    return Objects(stopper, searcher, properties, functions=functions), data


def _restored_objects(tuner, path):
    """The objects fit() kept beside the experiment at path, for a restore.
    An experiment whose file names driver objects it does not have fails
    here, before anything runs."""
    try:
        kept = _callbacks.read(path, OBJECTS_FILE)
    except Exception as e:  # noqa: BLE001 (said with why)
        raise _result.TuneError(
            "cannot load the driver's stopper and searcher kept at %s (%s: %s): the experiment cannot "
            "continue without them" % (os.path.join(path, OBJECTS_FILE), type(e).__name__, e)
        ) from e
    if kept is None:
        spec = _result.read_spec(path)
        named = (spec or {}).get("driver")
        if named is not None:
            what = json.dumps(named) if named else "functions of its param space or of PBT"
            raise _result.TuneError(
                "the experiment at %s has its driver run %s, and %s is missing: Tuner.restore cannot "
                "continue it without them" % (path, what, os.path.join(path, OBJECTS_FILE))
            )
        if spec is not None:
            return None  # its file names no driver objects
        # No state file says: a driver that answers any request with why.
        return Objects(missing="no %s at %s" % (OBJECTS_FILE, path))
    metric, mode, config = kept.get("properties") or (None, None, {})
    if tuner._param_space is not None:
        config = tuner._param_space  # Ray's restore(param_space=...) re-specifies it
    return Objects(kept.get("stopper"), kept.get("searcher"), (metric, mode, config), functions=kept.get("functions"))


def for_fit(tuner, path, trainable_name):
    """Return the Driver of tuner's fit() of the experiment at path, None
    when it has no callbacks, no driver stopper, no driver searcher and no
    functions (sample_from, PBT's).

    A fresh fit() runs its RunConfig's callbacks, stopper and searcher, and
    keeps them beside the experiment for Tuner.restore (_callbacks.save,
    OBJECTS_FILE) when it starts; a restored one runs the callbacks given
    to Tuner.restore(callbacks=...), else the kept ones, and the kept
    stopper and searcher."""
    restore = tuner._restore
    data = None
    if restore:
        given = restore.get("callbacks")
        callbacks = _callbacks.check(given) if given is not None else _callbacks.load(path)
        setup = {"stop": None, "num_samples": None, "total_num_samples": None}
        objects = _restored_objects(tuner, path)
    else:
        given = tuner._run_config.callbacks
        callbacks = _callbacks.check(given)
        setup = {"stop": tuner._run_config.stop, "num_samples": tuner._tune_config.num_samples, "total_num_samples": None}
        objects, data = _fresh_objects(tuner, path)
    if not callbacks and objects is None:
        return None
    if objects is not None:
        objects.prepare()

    def keep():
        if given is not None:
            _callbacks.save(path, callbacks)
        if data is not None:
            _callbacks.write(path, OBJECTS_FILE, data)

    return Driver(_callbacks._Dispatcher(callbacks, path, trainable_name, setup), objects, keep=keep)
