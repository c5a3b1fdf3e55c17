"""The conformance suite's trainable as a command: config["behave"] picks
what it does, as conformanceTrainable in executor_test.go does in Go. It
runs through tunejet.run_trials: once as a plain command, and in each
attempt forked from a warm worker when the runner starts it as one."""

import os
import signal
import sys
import tempfile
import time

import tunejet


def main():
    config = tunejet.get_config()
    behave = config["behave"]

    if behave == "report":
        for step in range(1, 4):
            tunejet.report({"step": step, "x": config["x"]})
    elif behave == "info":
        tunejet.report({
            "experiment": tunejet.get_experiment_name(), "trial_id": tunejet.get_trial_id(),
            "trial_name": tunejet.get_trial_name(), "trial_dir": tunejet.get_trial_dir(),
            "attempt": tunejet.get_attempt(),
        })
    elif behave == "checkpoint":
        for step in range(1, 3):
            with tempfile.TemporaryDirectory() as ckpt:
                with open(os.path.join(ckpt, "state"), "w") as f:
                    f.write(str(step))
                tunejet.report({"step": step}, checkpoint_dir=ckpt)
    elif behave == "resume":
        with open(os.path.join(tunejet.get_checkpoint(), "state")) as f:
            step = int(f.read())
        tunejet.report({"step": step + 1})
    elif behave == "loop":
        step = 0
        while True:
            step += 1
            tunejet.report({"step": step})
    elif behave == "crash":
        for i in range(30):
            print("line %d" % i, file=sys.stderr)
        print("fatal: out of cheese", file=sys.stderr)
        sys.exit(3)
    elif behave == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        with open("hanging", "w"):
            pass
        while True:
            time.sleep(3600)
    else:
        sys.exit("unknown behaviour %r" % behave)


tunejet.run_trials(main)
