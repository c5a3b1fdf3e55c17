"""The driver's answers to the controller's requests (docs/driver.md,
"Requests: the driver's decisions"), with this test standing in for the
tunejet process at the other end of the pipes: it writes events and
requests, and reads the acks and replies. No tunejet binary is needed.

The Stopper and Searcher APIs are Ray's (python/ray/tune/stopper/stopper.py,
python/ray/tune/search/searcher.py, python/ray/tune/search/repeater.py of
ray-project/ray)."""

import json
import os
import pickle
import shutil
import tempfile
import unittest

from tunejet import _callbacks, _config, _driver, _result, train, tune
from tunejet.tune import search, stopper
from tunejet.tune.search.optuna import OptunaSearch


class Recording(search.Searcher):
    """Suggests {"x": n} for its n-th suggest, FINISHED after `last`, None
    when told to wait; records every call in order."""

    def __init__(self, last=10, metric=None, mode=None):
        super().__init__(metric=metric, mode=mode)
        self.calls = []
        self.n = 0
        self.last = last
        self.wait = False

    def set_search_properties(self, metric, mode, config, **spec):
        self.calls.append(("set_search_properties", metric, mode, config))
        self._metric, self._mode = metric, mode
        return True

    def suggest(self, trial_id):
        self.calls.append(("suggest", trial_id))
        if self.wait:
            return None
        if self.n >= self.last:
            return search.Searcher.FINISHED
        self.n += 1
        return {"x": self.n}

    def on_trial_result(self, trial_id, result):
        self.calls.append(("result", trial_id, result["training_iteration"]))

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.calls.append(("complete", trial_id, (result or {}).get("training_iteration"), error))


class NoInit(tune.Stopper):
    """Ray's custom Stopper, without super().__init__(): stops a trial at
    its max_iter-th result, and the experiment after `all_after` stops."""

    def __init__(self, max_iter=3, all_after=2):
        self.max_iter = max_iter
        self.all_after = all_after
        self.stopped = []
        self.calls = []

    def __call__(self, trial_id, result):
        self.calls.append((trial_id, result["training_iteration"]))
        if result["training_iteration"] >= self.max_iter:
            self.stopped.append(trial_id)
            return True
        return False

    def stop_all(self):
        return len(self.stopped) >= self.all_after


def reported(seq, trial_id, *iterations, replay=False):
    results = [{"training_iteration": i, "loss": 1.0 / i} for i in iterations]
    data = {"trial_id": trial_id, "attempt": 1, "result": results[-1]}
    if len(results) > 1:
        data["earlier"] = results[:-1]
    return event(seq, "trial.reported", data, replay)


def completed(seq, trial_id, status="TERMINATED", replay=False):
    return event(seq, "trial.completed", {"trial_id": trial_id, "attempt": 1, "status": status, "reason": "x"}, replay)


def event(seq, kind, data, replay=False):
    msg = {"kind": "event", "seq": seq, "type": kind, "data": data}
    if "trial_id" in data:
        msg["trial_id"] = data["trial_id"]
    if replay:
        msg["replay"] = True
    return msg


def answered(seq, key, answer, by, replay=False, **inputs):
    data = dict(inputs, key=key, answer=answer, by=by)
    data["method"] = key.split("/")[0]
    return event(seq, "driver.answered", data, replay)


def suggest(rid, index, through):
    trial_id = "t%d" % index
    return {"kind": "request", "id": rid, "method": "suggest", "key": "suggest/%d" % index, "through": through,
            "trial_id": trial_id, "index": index}


def stop(rid, trial_id, iteration, through):
    return {"kind": "request", "id": rid, "method": "stop", "key": "stop/%s/%d" % (trial_id, iteration),
            "through": through, "trial_id": trial_id, "result": {"training_iteration": iteration}}


class Pipes:
    """The tunejet end of a Driver's pipes: feed() writes messages, closes
    them, runs serve() to the end and returns what the driver wrote."""

    def __init__(self, test, objects, callbacks=(), keep=None):
        self.dispatcher = _callbacks._Dispatcher(list(callbacks), "/tmp/exp", "f", {"stop": None})
        self.driver = _driver.Driver(self.dispatcher, objects, keep=keep)
        test.addCleanup(self.driver.close)
        self.acks_r, self.events_w = self.driver.child_fds
        self.raised = None

    def feed(self, *messages):
        with os.fdopen(self.events_w, "wb") as f:
            for m in messages:
                f.write(json.dumps(m).encode() + b"\n")
        try:
            self.driver.serve()
        except Exception as e:  # noqa: BLE001 (the test looks at it)
            self.raised = e
        self.driver.close()
        with os.fdopen(self.acks_r, "rb") as f:
            return [json.loads(line) for line in f]


class RequestsTest(unittest.TestCase):
    def test_notifications_are_called_lazily_in_log_order(self):
        searcher = Recording()
        objects = _driver.Objects(searcher=searcher)
        out = Pipes(self, objects).feed(
            reported(5, "t0", 1, 2),  # two results in one event
            completed(6, "t0"),
            reported(8, "t1", 1),
            suggest(1, 2, through=6),
            completed(9, "t1", status="ERROR"),
            suggest(2, 3, through=9),
        )
        self.assertEqual(out, [
            {"kind": "ack", "seq": 5},
            {"kind": "ack", "seq": 6},
            {"kind": "ack", "seq": 8},
            {"kind": "reply", "id": 1, "answer": {"config": {"x": 1}}, "by": "Recording"},
            {"kind": "ack", "seq": 9},
            {"kind": "reply", "id": 2, "answer": {"config": {"x": 2}}, "by": "Recording"},
        ])
        self.assertEqual(searcher.calls, [
            ("result", "t0", 1),
            ("result", "t0", 2),
            ("complete", "t0", 2, False),  # with the trial's last result
            ("suggest", "t2"),  # t1's result (seq 8) comes after through=6
            ("result", "t1", 1),
            ("complete", "t1", 1, True),
            ("suggest", "t3"),
        ])

    def test_the_end_tells_the_searcher_what_it_is_owed(self):
        # No request follows the experiment's last trials: their
        # notifications are called at experiment.completed, in log order
        # (replayed too), and those left at the end of the pipe then.
        searcher = Recording()
        Pipes(self, _driver.Objects(searcher=searcher)).feed(
            reported(1, "t0", 1, replay=True),
            completed(2, "t0", replay=True),
            event(3, "experiment.completed", {}, replay=True),
        )
        self.assertEqual(searcher.calls, [("result", "t0", 1), ("complete", "t0", 1, False)])
        searcher = Recording()
        Pipes(self, _driver.Objects(searcher=searcher)).feed(reported(1, "t0", 1), completed(2, "t0"))
        self.assertEqual(searcher.calls, [("result", "t0", 1), ("complete", "t0", 1, False)], "at the pipe's end")

    def test_a_final_failure_completes_the_trial_once(self):
        searcher = Recording()
        Pipes(self, _driver.Objects(searcher=searcher)).feed(
            reported(1, "t0", 1),
            event(2, "trial.failed", {"trial_id": "t0", "attempt": 1, "error": "boom", "final": False}),
            event(3, "trial.failed", {"trial_id": "t0", "attempt": 2, "error": "boom", "final": True}),
            completed(4, "t0", status="ERROR"),
            suggest(1, 1, through=4),
        )
        self.assertEqual(searcher.calls, [("result", "t0", 1), ("complete", "t0", 1, True), ("suggest", "t1")])

    def test_a_stop_of_a_trial_not_running_completes_it(self):
        # The controller's stop request ends a PENDING or PAUSED trial (the
        # fold's rule, and no trial.completed follows): the searcher and
        # the callbacks hear of it then; a RUNNING trial ends by its
        # trial.completed. A restore makes the unfinished trials PENDING.
        searcher = Recording()
        ended = []

        class Ends(tune.Callback):
            def on_trial_complete(self, iteration, trials, trial, **info):
                ended.append(trial.trial_id)

        stopping = {"reason": "stopper: S stopped the trial at training_iteration 1"}
        Pipes(self, _driver.Objects(searcher=searcher), callbacks=[Ends()]).feed(
            event(1, "trial.created", {"trial_id": "t0", "index": 0, "config": {}}),
            event(2, "trial.created", {"trial_id": "t1", "index": 1, "config": {}}),
            event(3, "trial.started", {"trial_id": "t1", "attempt": 1}),
            event(4, "trial.stop_requested", dict(stopping, trial_id="t0")),  # PENDING: ends now
            event(5, "trial.stop_requested", dict(stopping, trial_id="t1")),  # RUNNING: ends later
            suggest(1, 2, through=5),
            event(6, "experiment.restored", {"resume": {}, "source": "log"}),
            event(7, "trial.stop_requested", dict(stopping, trial_id="t1")),  # PENDING after the restore
            suggest(2, 3, through=7),
        )
        self.assertEqual(searcher.calls, [
            ("complete", "t0", None, False), ("suggest", "t2"), ("complete", "t1", None, False), ("suggest", "t3"),
        ])
        self.assertEqual(ended, ["t0", "t1"])

    def test_sample_and_explore_call_the_functions(self):
        # sample: each sample_from function with Ray's spec view (one that
        # reads another's value is called after it); explore: each
        # resampled key's function, then custom_explore_fn. A recorded
        # answer is not called again: the log holds its values.
        from tunejet import _functions

        calls = []

        def area(spec):
            calls.append("area")
            return spec.config.height * spec.config["width"]

        def height(spec):
            calls.append("height")
            return spec.config.width * 10

        def clamp(config):
            calls.append("clamp")
            return dict(config, lr=min(config["lr"], 0.5))

        functions = _functions.Functions(
            sample_from={("area",): area, ("nested", "height"): lambda spec: spec.config.nested.h, ("height",): height},
            mutations={"lr": lambda: 0.9, "opt.momentum": lambda: 0.7}, custom_explore_fn=clamp)
        out = Pipes(self, _driver.Objects(functions=functions)).feed(
            answered(2, "sample/0", {"config": {"width": 1}}, "sample_from", through=1, trial_id="t0", index=0,
                     config={"width": 1, "height": None}),
            {"kind": "request", "id": 1, "method": "sample", "key": "sample/1", "through": 2, "trial_id": "t1", "index": 1,
             "config": {"width": 2, "height": None, "area": None, "nested": {"h": 5, "height": None}}},
            {"kind": "request", "id": 2, "method": "explore", "key": "explore/t1/4", "through": 2, "trial_id": "t1",
             "config": {"width": 2, "lr": None, "opt": {"momentum": None, "beta": 0.9}}, "resample": ["lr", "opt.momentum"]},
        )
        self.assertEqual(out, [
            {"kind": "ack", "seq": 2},
            {"kind": "reply", "id": 1, "by": "sample_from", "answer": {"config": {
                "width": 2, "height": 20, "area": 40, "nested": {"h": 5, "height": 5}}}},
            {"kind": "reply", "id": 2, "by": "clamp", "answer": {"config": {
                "width": 2, "lr": 0.5, "opt": {"momentum": 0.7, "beta": 0.9}}}},
        ])
        self.assertEqual(calls.count("height"), 1)
        self.assertEqual(calls[-1], "clamp")

    def test_sample_from_functions_in_a_cycle_fail(self):
        from tunejet import _functions

        functions = _functions.Functions(sample_from={("a",): lambda s: s.config.b, ("b",): lambda s: s.config.a})
        with self.assertRaisesRegex(ValueError, "in a cycle"):
            functions.sample({"a": None, "b": None})

    def test_a_recorded_answer_not_its_own_is_replayed(self):
        # A killed driver answered suggest/0 and stop/t0/1; this one gets
        # them as events, replays included, and makes the same calls
        # (their answers ignored), each after the notifications up to its
        # through.
        searcher, stops = Recording(), NoInit(max_iter=1)
        objects = _driver.Objects(stopper=stops, searcher=searcher)
        out = Pipes(self, objects).feed(
            answered(3, "suggest/0", {"config": {"x": 99}}, "Recording", replay=True, through=2, trial_id="t0", index=0),
            reported(4, "t0", 1, replay=True),
            answered(6, "stop/t0/1", {"stop": False, "stop_all": False}, "NoInit", through=4, trial_id="t0",
                     result={"training_iteration": 1}),
            suggest(1, 1, through=6),
            suggest(2, 0, through=6),  # asked again: the recorded answer, no call
        )
        self.assertEqual(searcher.calls, [("suggest", "t0"), ("result", "t0", 1), ("suggest", "t1")])
        self.assertEqual(stops.calls, [("t0", 1)], "the recorded stop was called again")
        self.assertEqual(out, [
            {"kind": "ack", "seq": 6},
            {"kind": "reply", "id": 1, "answer": {"config": {"x": 2}}, "by": "Recording"},
            {"kind": "reply", "id": 2, "answer": {"config": {"x": 99}}, "by": "Recording"},
        ])

    def test_its_own_answer_is_not_called_again(self):
        searcher = Recording()
        out = Pipes(self, _driver.Objects(searcher=searcher)).feed(
            suggest(1, 0, through=2),
            suggest(2, 0, through=2),  # a controller that died before its event asks again
            answered(3, "suggest/0", {"config": {"x": 1}}, "Recording", through=2, trial_id="t0", index=0),
        )
        self.assertEqual(searcher.calls, [("suggest", "t0")])
        self.assertEqual(out, [
            {"kind": "reply", "id": 1, "answer": {"config": {"x": 1}}, "by": "Recording"},
            {"kind": "reply", "id": 2, "answer": {"config": {"x": 1}}, "by": "Recording"},
            {"kind": "ack", "seq": 3},
        ])

    def test_searcher_answers(self):
        searcher = Recording(last=1)
        pipes = Pipes(self, _driver.Objects(searcher=searcher))
        waiting = {"kind": "request", "id": 9, "method": "suggest", "key": "suggest/5", "through": 0, "trial_id": "t5", "index": 5}

        out = pipes.feed(suggest(1, 0, through=0), suggest(2, 1, through=0))
        self.assertEqual([m["answer"] for m in out], [{"config": {"x": 1}}, {"finished": True}])
        searcher.wait = True
        out = Pipes(self, _driver.Objects(searcher=searcher)).feed(waiting, waiting)
        self.assertEqual([m["answer"] for m in out], [{"wait": True}, {"wait": True}])
        self.assertEqual(searcher.calls[-2:], [("suggest", "t5"), ("suggest", "t5")], "a wait is not cached")

    def test_stopper_answers(self):
        stops = NoInit(max_iter=2, all_after=2)
        out = Pipes(self, _driver.Objects(stopper=stops)).feed(
            stop(1, "a", 1, 0), stop(2, "a", 2, 0), stop(3, "b", 2, 0), stop(4, "b", 2, 0),
        )
        self.assertEqual([(m["answer"], m["by"]) for m in out], [
            ({"stop": False, "stop_all": False}, "NoInit"),
            ({"stop": True, "stop_all": False}, "NoInit"),
            ({"stop": True, "stop_all": True}, "NoInit"),
            ({"stop": True, "stop_all": True}, "NoInit"),  # cached: no call
        ])
        self.assertEqual(stops.calls, [("a", 1), ("a", 2), ("b", 2)])

    def test_a_stop_function_and_a_mix(self):
        def at_two(trial_id, result):
            return result["training_iteration"] >= 2

        rc = train.RunConfig(stop=[stopper.MaximumIterationStopper(5), at_two, NoInit(max_iter=1, all_after=1)])
        self.assertEqual(rc.to_spec()["stoppers"], [{"type": "maximum_iteration", "max_iter": 5}])
        mixed = tune.Tuner(lambda c: None, run_config=rc)._spec("f")
        self.assertEqual(mixed["driver"], {"stopper": "at_two+NoInit"})
        objects = _driver.Objects(stopper=_config.driver_stopper(rc.stop))
        out = Pipes(self, objects).feed(stop(1, "a", 1, 0), stop(2, "b", 2, 0))
        # Asked in order, as Ray's CombinedStopper asks: at_two lets a go,
        # NoInit stops it (and then all); at_two stops b before NoInit sees it.
        self.assertEqual([m["answer"] for m in out], [{"stop": True, "stop_all": True}, {"stop": True, "stop_all": True}])
        self.assertEqual(out[0]["by"], "at_two+NoInit")
        self.assertEqual(objects.stopper.stoppers[1].calls, [("a", 1)])
        only = tune.Tuner(lambda c: None, run_config=train.RunConfig(stop=at_two))._spec("f")
        self.assertEqual(only["driver"], {"stopper": "at_two"})
        self.assertNotIn("stoppers", only["run_config"])
        objects = _driver.Objects(stopper=stopper.FunctionStopper(at_two))
        out = Pipes(self, objects).feed(stop(1, "a", 2, 0), stop(2, "a", 1, 0))
        self.assertEqual([m["answer"] for m in out], [{"stop": True, "stop_all": False}, {"stop": False, "stop_all": False}])

    def test_a_user_exception_fails_the_fit(self):
        class Broken(tune.Stopper):
            def __call__(self, trial_id, result):
                raise KeyError("mean_accuracy")

            def stop_all(self):
                return False

        pipes = Pipes(self, _driver.Objects(stopper=Broken()))
        out = pipes.feed(stop(1, "a", 1, 0), stop(2, "a", 2, 0))
        self.assertEqual(out, [], "no reply: the exception ends the driver")
        self.assertIsInstance(pipes.raised, KeyError)

        class BadSearch(Recording):
            def on_trial_result(self, trial_id, result):
                raise ValueError("bad result")

        pipes = Pipes(self, _driver.Objects(searcher=BadSearch()))
        out = pipes.feed(reported(1, "t0", 1), suggest(1, 1, through=1))
        self.assertEqual(out, [{"kind": "ack", "seq": 1}], "the event is acked; the request gets no reply")
        self.assertEqual(str(pipes.raised), "bad result")

    def test_error_replies(self):
        # A method of a later version: an error reply, and serving goes on.
        out = Pipes(self, _driver.Objects(searcher=Recording())).feed(
            {"kind": "request", "id": 1, "method": "rank", "key": "rank/1", "through": 0},
            suggest(2, 0, through=0),
        )
        self.assertEqual(out[0], {"kind": "reply", "id": 1, "error": "unknown method 'rank'"})
        self.assertEqual(out[1]["answer"], {"config": {"x": 1}})
        # A restore without the objects: an error reply, and fit() fails with why.
        pipes = Pipes(self, _driver.Objects(missing="no tunejet_driver.pkl at /x"))
        out = pipes.feed(stop(1, "a", 1, 0))
        self.assertEqual(out, [{"kind": "reply", "id": 1, "error": "this driver has no stopper: no tunejet_driver.pkl at /x"}])
        self.assertIsInstance(pipes.raised, _result.TuneError)
        self.assertIn("asks the driver's stopper", str(pipes.raised))

    def test_callbacks_and_requests_share_the_pipes(self):
        class Count(tune.Callback):
            results = 0

            def on_trial_result(self, iteration, trials, trial, result, **info):
                Count.results += 1

        out = Pipes(self, _driver.Objects(searcher=Recording()), callbacks=[Count()]).feed(
            reported(1, "t0", 1, replay=True), reported(2, "t0", 2), suggest(1, 1, through=2),
        )
        self.assertEqual(Count.results, 1, "the replayed event calls no hook")
        self.assertEqual(out, [{"kind": "ack", "seq": 2}, {"kind": "reply", "id": 1, "answer": {"config": {"x": 1}}, "by": "Recording"}])


class RepeaterTest(unittest.TestCase):
    def test_groups_share_a_suggestion_and_report_their_mean(self):
        inner = Recording(metric="loss", mode="min")
        rep = search.Repeater(inner, repeat=2)
        self.assertEqual((rep.metric, rep.mode), ("loss", "min"))
        configs = [rep.suggest("t%d" % i) for i in range(4)]
        self.assertEqual(configs, [{"x": 1, "__trial_index__": 0}, {"x": 1, "__trial_index__": 1},
                                   {"x": 2, "__trial_index__": 0}, {"x": 2, "__trial_index__": 1}])
        self.assertEqual([c for c in inner.calls if c[0] == "suggest"], [("suggest", "t0"), ("suggest", "t2")])

        completes = []
        inner.on_trial_complete = lambda trial_id, result=None, error=False: completes.append((trial_id, result))
        rep.on_trial_complete("t1", {"loss": 1.0})
        self.assertEqual(completes, [], "the group is not complete")
        rep.on_trial_complete("t0", {"loss": 3.0})
        rep.on_trial_complete("t2", {"other": 1})  # no metric: nan, left out of the mean
        rep.on_trial_complete("t3", {"loss": 5.0})
        self.assertEqual(completes, [("t0", {"loss": 2.0}), ("t2", {"loss": 5.0})])
        self.assertEqual(search.Repeater(Recording(), repeat=2, set_index=False).suggest("a"), {"x": 1})
        self.assertEqual(search.TRIAL_INDEX, "__trial_index__")
        from tunejet.tune.search.repeater import TRIAL_INDEX, Repeater
        self.assertIs(Repeater, search.Repeater)
        self.assertEqual(TRIAL_INDEX, search.TRIAL_INDEX)

    def test_finished_and_wait_pass_through(self):
        inner = Recording(last=0)
        self.assertEqual(search.Repeater(inner, 2).suggest("a"), search.Searcher.FINISHED)
        inner.wait = True
        self.assertIsNone(search.Repeater(inner, 2).suggest("a"))

    def test_a_native_searcher_cannot_be_repeated(self):
        for native in (search.BasicVariantGenerator(), OptunaSearch()):
            with self.assertRaisesRegex(ValueError, r"runs in tunejet's controller, not in the driver"):
                search.Repeater(native, repeat=3)
        with self.assertRaisesRegex(ValueError, "put the limiter outside"):
            search.Repeater(search.ConcurrencyLimiter(Recording(), 2), repeat=3)


class SpecTest(unittest.TestCase):
    def test_a_searcher_of_ones_own_is_the_drivers(self):
        tuner = tune.Tuner(lambda c: None, param_space={"lr": 0.1},
                           tune_config=tune.TuneConfig(search_alg=search.ConcurrencyLimiter(Recording(), 2), num_samples=4))
        spec = tuner._spec("f")
        self.assertEqual(spec["driver"], {"searcher": "Recording"})
        self.assertNotIn("search_alg", spec["tune_config"])
        self.assertEqual(spec["tune_config"]["max_concurrent_trials"], 2)
        # A searcher of one's own may hold a "space" of its own: it is not
        # OptunaSearch's, which becomes the param space.
        spaced = Recording()
        spaced.space = {"x": [1, 2]}
        spec = tune.Tuner(lambda c: None, param_space={"c": 1}, tune_config=tune.TuneConfig(search_alg=spaced))._spec("f")
        self.assertEqual(spec["param_space"], {"c": 1})
        spec = tune.Tuner(lambda c: None, tune_config=tune.TuneConfig(search_alg=search.Repeater(Recording(), 2)))._spec("f")
        self.assertEqual(spec["driver"], {"searcher": "Repeater"})
        # tunejet's own searchers stay in the file.
        spec = tune.Tuner(lambda c: None, tune_config=tune.TuneConfig(search_alg=OptunaSearch(seed=1)))._spec("f")
        self.assertNotIn("driver", spec)
        self.assertEqual(spec["tune_config"]["search_alg"], {"type": "tpe", "seed": 1})
        self.assertIsInstance(OptunaSearch(), search.Searcher)
        # A searcher with its own metric and mode, and TuneConfig's: Ray's error.
        with self.assertRaisesRegex(ValueError, "already instantiated with their own `metric` and `mode`"):
            tune.TuneConfig(metric="a", mode="max", search_alg=Recording(metric="loss", mode="min")).to_spec()
        with self.assertRaisesRegex(TypeError, "must be a name"):
            tune.TuneConfig(search_alg=object()).to_spec()

    def test_set_search_properties_before_the_first_call(self):
        searcher = Recording()
        objects = _driver.Objects(searcher=searcher, properties=("loss", "min", {"lr": 0.1}))
        objects.prepare()
        self.assertEqual(searcher.calls, [("set_search_properties", "loss", "min", {"lr": 0.1})])
        # Its own metric and mode and no param space: not called.
        own = Recording(metric="acc", mode="max")
        _driver.Objects(searcher=own, properties=(None, None, {})).prepare()
        self.assertEqual(own.calls, [])

        class Ignores(search.Searcher):
            def suggest(self, trial_id):
                return {}

        objects = _driver.Objects(searcher=Ignores(), properties=(None, None, {"lr": tune.uniform(0, 1)}))
        with self.assertRaisesRegex(ValueError, "with unresolved parameters"):
            objects.prepare()


class KeptTest(unittest.TestCase):
    def setUp(self):
        self.path = tempfile.mkdtemp(prefix="tunejet-exp-")
        self.addCleanup(shutil.rmtree, self.path, True)

    def test_fit_keeps_the_objects_before_their_first_call_and_restore_takes_them(self):
        searcher, stops = Recording(), NoInit()
        tuner = tune.Tuner(lambda c: None, param_space={"lr": 0.5},
                           tune_config=tune.TuneConfig(metric="loss", mode="min", search_alg=searcher),
                           run_config=train.RunConfig(stop=stops))
        driver = _driver.for_fit(tuner, self.path, "f")
        self.addCleanup(driver.close)
        self.assertEqual(searcher.calls, [("set_search_properties", "loss", "min", {"lr": 0.5})])
        self.assertFalse(os.path.exists(os.path.join(self.path, _driver.OBJECTS_FILE)), "kept once the run has begun")
        acks_r, events_w = driver.child_fds
        os.write(events_w, json.dumps(suggest(1, 0, through=0)).encode() + b"\n")
        os.close(events_w)
        driver.serve()
        driver.close()
        with os.fdopen(acks_r, "rb") as f:
            self.assertEqual(json.loads(f.readline())["answer"], {"config": {"x": 1}})
        with open(os.path.join(self.path, _driver.OBJECTS_FILE), "rb") as f:
            kept = pickle.load(f)
        self.assertEqual(kept["searcher"].calls, [], "pickled before any call")
        self.assertEqual(kept["properties"], ("loss", "min", {"lr": 0.5}))

        restored = tune.Tuner.restore(self.path, lambda c: None, param_space={"lr": 0.7})
        driver = _driver.for_fit(restored, self.path, "f")
        self.addCleanup(driver.close)
        self.assertEqual(type(driver.objects.stopper).__name__, "NoInit")
        self.assertEqual(driver.objects.searcher.calls, [("set_search_properties", "loss", "min", {"lr": 0.7})])

    def test_a_restore_without_the_objects_fails_before_running(self):
        with open(os.path.join(self.path, "experiment_state-2026.json"), "w") as f:
            json.dump({"state": {"spec": {"driver": {"searcher": "Mine"}}}}, f)
        tuner = tune.Tuner.restore(self.path, lambda c: None)
        with self.assertRaisesRegex(tune.TuneError, r'driver run \{"searcher": "Mine"\}, and .*tunejet_driver.pkl is missing'):
            _driver.for_fit(tuner, self.path, "f")
        with open(os.path.join(self.path, _driver.OBJECTS_FILE), "wb") as f:
            f.write(b"not a pickle")
        with self.assertRaisesRegex(tune.TuneError, "cannot load the driver's stopper and searcher"):
            _driver.for_fit(tuner, self.path, "f")

    def test_no_driver_without_callbacks_or_objects(self):
        self.assertIsNone(_driver.for_fit(tune.Tuner(lambda c: None), self.path, "f"))
        with open(os.path.join(self.path, "experiment_state-2026.json"), "w") as f:
            json.dump({"state": {"spec": {"tune_config": {}}}}, f)
        self.assertIsNone(_driver.for_fit(tune.Tuner.restore(self.path, lambda c: None), self.path, "f"))

    def test_objects_that_cannot_be_pickled_are_refused(self):
        import threading

        class Locked(Recording):
            def __init__(self):
                super().__init__()
                self.lock = threading.Lock()

        tuner = tune.Tuner(lambda c: None, tune_config=tune.TuneConfig(search_alg=Locked()))
        with self.assertRaisesRegex(TypeError, "cannot be pickled"):
            _driver.for_fit(tuner, self.path, "f")


if __name__ == "__main__":
    unittest.main()
