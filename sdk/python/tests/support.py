"""What the end-to-end tests share: the tunejet binary, and running a
driver script in a fresh HOME (its own results folder and JetStream store)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(SDK))
EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ray_examples")

# A script that runs longer than this is stuck: it fails the test.
SCRIPT_TIMEOUT_S = 300

_built = None  # the temporary directory of a binary built by binary()


def binary():
    """Return the tunejet binary: TUNEJET_BIN, else one built once with go
    build into a temporary directory."""
    global _built
    path = os.environ.get("TUNEJET_BIN")
    if path:
        return path
    if _built is None:
        go = shutil.which("go")
        if go is None:
            raise RuntimeError("set TUNEJET_BIN to a tunejet binary, or put go on PATH to build one")
        _built = tempfile.mkdtemp(prefix="tunejet-bin-")
        subprocess.run([go, "build", "-o", os.path.join(_built, "tunejet"), "./cmd/tunejet"], cwd=REPO, check=True)
    return os.path.join(_built, "tunejet")


def remove_built():
    """Remove the binary built by binary(), if any."""
    if _built is not None:
        shutil.rmtree(_built, ignore_errors=True)


def environ(home):
    """Return the environment of a driver script run with HOME=home."""
    env = dict(os.environ)
    env.pop("NATS_URL", None)  # the driver runs the embedded stack
    env.update(
        HOME=home,
        TUNEJET_BIN=binary(),
        PYTHONPATH=SDK,
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
    )
    return env


def run_script(test, script, *args, home):
    """Run script with args in home and return its stdout; a non-zero exit
    fails the test with the script's output."""
    proc = subprocess.run(
        [sys.executable, script, *args],
        cwd=home,
        env=environ(home),
        capture_output=True,
        text=True,
        timeout=SCRIPT_TIMEOUT_S,
    )
    if proc.returncode != 0:
        test.fail("%s exited with status %d\nstdout:\n%s\nstderr:\n%s" % (script, proc.returncode, proc.stdout, proc.stderr))
    return proc.stdout


def eventually(test, condition, what, timeout_s=120, interval_s=0.05):
    """Poll condition until it is true; fail the test after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            test.fail("timed out waiting for %s" % what)
        time.sleep(interval_s)


def result_line(out):
    """The JSON after "RESULT " on a line of a driver script's output."""
    for line in out.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise AssertionError("no RESULT line in:\n" + out)


class HomeTest(unittest.TestCase):
    """A test with a fresh HOME of its own (self.home) for the driver
    scripts it runs; write(name, text) puts a file there."""

    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="tunejet-home-")
        self.addCleanup(shutil.rmtree, self.home, True)

    def write(self, name, text):
        path = os.path.join(self.home, name)
        with open(path, "w") as f:
            f.write(text)
        return path
