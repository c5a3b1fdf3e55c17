"""The scripts under examples/ray, each Ray Tune usage with only its
imports changed, run end to end: each checks its own results with assert
and must exit 0. Two run at a time, each in a fresh HOME."""

import concurrent.futures
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests import support

RAY_EXAMPLES = os.path.join(support.REPO, "examples", "ray")


def setUpModule():
    support.binary()


def tearDownModule():
    support.remove_built()


def run(script):
    """Run script in a fresh HOME; return its exit status and output."""
    home = tempfile.mkdtemp(prefix="tunejet-home-")
    try:
        proc = subprocess.run(
            [sys.executable, script],
            cwd=home,
            env=support.environ(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=support.SCRIPT_TIMEOUT_S,
        )
        return proc.returncode, proc.stdout
    finally:
        shutil.rmtree(home, ignore_errors=True)


class RayExamplesTest(unittest.TestCase):
    def test_every_script_passes(self):
        scripts = sorted(glob.glob(os.path.join(RAY_EXAMPLES, "*.py")))
        self.assertGreaterEqual(len(scripts), 10, scripts)
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            outcomes = dict(zip(scripts, pool.map(run, scripts)))
        for script, (code, out) in outcomes.items():
            with self.subTest(script=os.path.basename(script)):
                self.assertEqual(code, 0, "%s exited with status %d:\n%s" % (script, code, out[-4000:]))


if __name__ == "__main__":
    unittest.main()
