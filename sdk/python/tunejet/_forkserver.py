"""A warm worker: the fork server of docs/trainable-protocol.md.

A runner that reuses workers starts ``python -m tunejet._worker NAME``
once per experiment and resource set, with TUNEJET_FORK_SERVER=1 and two
pipes: requests on fd 3, replies on fd 4, one JSON object per line. The
worker loads the trainable once (imports, unpickling, the script up to its
fit() call), then forks one process per trial attempt. Each fork is a
fresh copy of the loaded worker: what a trial changes (globals, the
working directory, the environment, threads) dies with its process, and
the next trial starts from the same loaded state.

Replies: ``{"ready": true}`` once loaded, or ``{"unsafe": why}`` (then the
worker exits and the runner starts its trials as cold processes); for each
``{"op": "fork", "id", "env", "dir", "stdout", "stderr"}`` request,
``{"id", "pid"}`` or ``{"id", "error"}``; when a forked trial ends,
``{"exit": pid, "status": code}`` or ``{"exit": pid, "signal": number}``.
The worker exits when fd 3 closes (the runner is done with it). Between
requests it forks ahead (_Server): a request usually goes to a process
forked before it came.
"""

import json
import os
import sys

from tunejet import _protocol

# What only a fork server uses is imported by serve(): a cold trial's
# process, which imports this module through tunejet, does without.

ENV = "TUNEJET_FORK_SERVER"
_REQUESTS, _REPLIES = 3, 4


def run_trials(trial):
    """Run trial(), the body of a command trainable: once, or, when the
    runner started this script as a warm worker (fork_server: true in the
    experiment's trainable), once in each process forked for an attempt.
    Code before the call (imports, data loading) then runs once per
    worker instead of once per trial."""
    if os.environ.get(ENV):
        serve(trial)
    trial()


def unsafe():
    """Return why forking this process could break its trials, or None."""
    import threading

    threads = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if threads:
        return "loading the trainable started threads (%s); a fork keeps only the calling thread" % ", ".join(
            sorted(threads)
        )
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            return "loading the trainable initialized CUDA, which a forked process cannot use"
    except Exception:  # an old or partial torch: leave it to the trial
        pass
    return None


def serve(run):
    """Serve fork requests until the runner closes fd 3; each forked
    process calls run() and exits as a cold worker would.

    Between requests the worker forks ahead: it keeps as many idle forks
    ready as it has had trials running at once, each blocked on a pipe of
    its own, and hands a request to one of them instead of forking then.
    Trials that end together (a wave of same-length trials on many slots)
    then start together, rather than one fork after another; an idle fork
    has done nothing yet (copy on write), and exits when the worker does."""
    import selectors
    import signal

    why = unsafe()
    if why:
        _write({"unsafe": why})
        sys.exit(0)
    _protocol._close()  # the loading connection; each trial opens its own
    import gc

    gc.freeze()  # the loaded objects: no collection of them in the trials, and no copy on write
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(_REQUESTS, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    server = _Server(run, [wake_r, wake_w], sel)
    _write({"ready": True})
    pending = b""
    while True:
        ready = sel.select(timeout=0 if server.short() else None)
        if not ready:
            server.fork_ahead()
            continue
        for key, _ in ready:
            if key.fd == wake_r:
                os.read(wake_r, 4096)
                server.reap()
                continue
            data = os.read(_REQUESTS, 1 << 16)
            if not data:
                sys.exit(0)  # the runner is done with this worker; forked trials live on
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                server.serve(line)


class _Server:
    """The forks of a warm worker: the trials running, by pid, and the
    idle forks ready for the next requests, each with its pipe."""

    def __init__(self, run, fds, sel):
        self.run, self.fds, self.sel = run, fds, sel
        self.trials = set()
        self.ready = []  # (pid, the write end of its request pipe), oldest first
        self.peak = 0  # the most trials running at once so far

    def short(self):
        """Whether fewer forks are ready than trials have run at once."""
        return len(self.ready) < self.peak

    def serve(self, line):
        """Start the trial of one request line and reply with its pid."""
        request = json.loads(line)
        try:
            pid = None
            while self.ready and pid is None:
                pid, w = self.ready.pop(0)
                try:
                    _hand(w, line)
                except OSError:  # it died before its request came: the next one, or a fork now
                    pid = None
            if pid is None:
                pid = self._fork(request)
        except OSError as e:
            _write({"id": request["id"], "error": "fork: %s" % e})
            return
        self.trials.add(pid)
        self.peak = max(self.peak, len(self.trials))
        _write({"id": request["id"], "pid": pid})

    def fork_ahead(self):
        """Fork one idle process that waits for its request."""
        r, w = os.pipe()
        try:
            pid = self._fork(None, (r, w))
        except OSError:
            os.close(w)
            self.peak = len(self.ready)  # no more: forking fails (memory, pids)
            return
        finally:
            os.close(r)
        self.ready.append((pid, w))

    def reap(self):
        """Report every trial that has ended; forget ready forks that
        ended without one (killed from outside)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid not in self.trials:
                for i, (ready, w) in enumerate(self.ready):
                    if ready == pid:
                        os.close(w)
                        del self.ready[i]
                        break
                continue
            self.trials.discard(pid)
            if os.WIFSIGNALED(status):
                _write({"exit": pid, "signal": os.WTERMSIG(status)})
            else:
                _write({"exit": pid, "status": os.waitstatus_to_exitcode(status)})

    def _fork(self, request, pipe=None):
        """Fork the process of one trial attempt, for request now or, with
        request None, for the one that comes on pipe (its read and write
        ends); return its pid."""
        import traceback
        import warnings

        sys.stdout.flush()
        sys.stderr.flush()
        with warnings.catch_warnings():  # Python 3.12 warns of native threads (BLAS pools) it cannot tell safe
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid:
            try:
                os.setpgid(pid, pid)  # as the child does: whichever runs first
            except OSError:
                pass  # the child did, or has already exited
            return pid
        try:
            others = [w for _, w in self.ready]
            if pipe is not None:
                others.append(pipe[1])  # its own write end too: the worker's end alone keeps the pipe open
            _leave_worker(self.sel, self.fds + others)
            _fresh_state()  # a fork made ahead does it before its request comes
            if request is None:
                request = _wait_request(pipe[0])
            _become_trial(request)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        code = 0
        try:
            self.run()
        except SystemExit as e:  # as the interpreter ends on it
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        _exit(code)


def _hand(w, line):
    """Give a ready fork its request and close its pipe."""
    try:
        data = line + b"\n"
        while data:
            data = data[os.write(w, data) :]
    finally:
        os.close(w)


def _wait_request(pipe):
    """Read a ready fork's request; exit if the worker ends first."""
    data = b""
    while True:
        chunk = os.read(pipe, 1 << 16)
        if not chunk:
            break
        data += chunk
    os.close(pipe)
    if not data.strip():
        os._exit(0)  # the worker ended: no trial for this fork
    return json.loads(data)


def _exit(code):
    """End a forked trial as the interpreter's exit would — non-daemon
    threads joined, atexit functions run, files the trial left open
    flushed — without tearing down the modules it shares with the worker:
    that takes a process with pandas loaded 100 ms, this 2 (as
    multiprocessing ends its forked children)."""
    import atexit
    import gc
    import io
    import threading

    for t in threading.enumerate():
        if t is not threading.main_thread() and not t.daemon:
            t.join()
    atexit._run_exitfuncs()
    for obj in gc.get_objects():  # the trial's own: the worker's are frozen (serve)
        if isinstance(obj, io.IOBase):
            try:
                if not obj.closed and obj.writable():
                    obj.flush()
            except Exception:  # a detached or broken stream: nothing to flush
                pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def _leave_worker(sel, fds):
    """In a forked process: its own process group, the worker's signal
    handling undone, and the worker's descriptors (its pipes to the
    runner, its wake-up pipe, the ready forks' request pipes) closed, so
    that a fork never keeps another's pipe open."""
    import signal

    os.setpgid(0, 0)
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    sel.close()
    for fd in [_REQUESTS, _REPLIES] + fds:
        os.close(fd)


def _fresh_state():
    """What a forked process does before it knows its trial: fresh random
    state, and the worker's environment cleared for the trial's. Half a
    millisecond in a fresh fork (the pages it writes are copied), which
    a fork made ahead spends before its request instead of after."""
    import random

    random.seed()  # as Python itself does after a fork
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()  # numpy's global state would repeat in every trial
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()
    os.environ.clear()


def _become_trial(request):
    """Make this forked process the trial's, as a cold start would: its
    stdio, working directory and environment (random state: _fresh_state)."""
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(f, fd)
        os.close(f)
    os.chdir(request["dir"])
    os.environ.update(kv.split("=", 1) for kv in request["env"] if "=" in kv)


def _write(reply):
    data = (json.dumps(reply, separators=(",", ":")) + "\n").encode()
    while data:
        data = data[os.write(_REPLIES, data) :]
