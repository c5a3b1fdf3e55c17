"""The driver's end of the pipes to the tunejet process (docs/driver.md).

fit() passes the tunejet process two pipes as inherited file descriptors
(``--driver-fds R,W``): tunejet writes JSON lines to W and reads the
driver's from R. Today tunejet sends ``{"kind": "event", ...}`` and the
driver answers each event that is not a replay with ``{"kind": "ack",
"seq": N}`` once its callbacks' hooks have returned; requests and replies
over the same pipes are to come.
"""

import json
import os

from tunejet import _callbacks


class Driver:
    """The pipes of one fit(), and the callbacks they feed."""

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
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
        """Handle events until the tunejet process closes its end. A hook's
        exception propagates (call close() then); after a KeyboardInterrupt
        serve may be called again."""
        while not self._closed:
            line = self._events.readline()
            if not line:
                return
            msg = json.loads(line)
            if msg.get("kind") != "event":
                continue  # kinds of later versions
            self.dispatcher.handle(msg)
            if msg.get("replay"):
                continue
            try:
                self._out.write(b'{"kind": "ack", "seq": %d}\n' % msg["seq"])
            except BrokenPipeError:
                return  # the tunejet process is gone: its exit status tells

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


def for_fit(tuner, path, trainable_name):
    """Return the Driver of tuner's fit() of the experiment at path, None
    when it has no callbacks.

    A fresh fit() runs its RunConfig's callbacks and keeps them beside the
    experiment for Tuner.restore (_callbacks.save) when it starts; a
    restored one runs those given to Tuner.restore(callbacks=...), else
    the kept ones."""
    restore = tuner._restore
    if restore:
        given = restore.get("callbacks")
        callbacks = _callbacks.check(given) if given is not None else _callbacks.load(path)
        setup = {"stop": None, "num_samples": None, "total_num_samples": None}
    else:
        given = tuner._run_config.callbacks
        callbacks = _callbacks.check(given)
        setup = {"stop": tuner._run_config.stop, "num_samples": tuner._tune_config.num_samples, "total_num_samples": None}
    if not callbacks:
        return None

    def keep():
        if given is not None:
            _callbacks.save(path, callbacks)

    return Driver(_callbacks._Dispatcher(callbacks, path, trainable_name, setup, on_setup=keep))
