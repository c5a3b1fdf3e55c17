"""A driver whose trials all fail sees why at the end of fit(): the
errored trials' table, each with its error's last line and its
error.txt, before "No best trial"; the script checks them the Ray way,
with ResultGrid.errors and num_errors."""

import json
import os
import shutil
import tempfile
import textwrap
import unittest

from tests import support

ALL_FAIL = textwrap.dedent(
    '''
    import json
    from tunejet import train, tune


    def trainable(config):
        import no_such_module_here  # noqa: F401


    grid = tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=train.RunConfig(name="all_fail", storage_path="results"),
    ).fit()
    print("RESULT " + json.dumps({
        "num_errors": grid.num_errors,
        "errors": [str(e) for e in grid.errors],
        "paths": [r.path for r in grid],
    }))
    '''
)

CAUSE = "ModuleNotFoundError: No module named 'no_such_module_here'"


def setUpModule():
    support.binary()


class ErroredTrialsTest(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="tunejet-home-")
        self.addCleanup(shutil.rmtree, self.home, True)

    def test_fit_prints_why_trials_failed(self):
        script = os.path.join(self.home, "driver.py")
        with open(script, "w") as f:
            f.write(ALL_FAIL)
        out = support.run_script(self, script, home=self.home)
        result = json.loads(next(l for l in out.splitlines() if l.startswith("RESULT "))[len("RESULT "):])
        self.assertEqual(result["num_errors"], 2)
        self.assertTrue(all(CAUSE in e for e in result["errors"]), result["errors"])
        table = out.find("Number of errored trials: 2")
        self.assertGreaterEqual(table, 0, out)
        self.assertGreater(out.find("No best trial"), table, out)
        for path in result["paths"]:
            error_file = os.path.join(path, "error.txt")
            line = next((l for l in out[table:].splitlines() if error_file in l), "")
            self.assertTrue(line.endswith(CAUSE), "no line names %s with the cause:\n%s" % (error_file, out))
            self.assertTrue(os.path.exists(error_file), error_file)


if __name__ == "__main__":
    unittest.main()
