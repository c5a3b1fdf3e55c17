"""The price of a warm worker's design, for BenchmarkPythonTrialStart: in
a process that has imported numpy, the median of N forks of a child that
calls a function and ends as a forked trial does (os._exit), reaped by
the parent's waitpid, against calling the same function in process (what
Ray's reuse of an actor costs instead). Prints "RESULT {json}"."""

import json
import os
import statistics
import sys
import time

import numpy  # noqa: F401  (the loaded state a fork copies)


def trainable(config):
    return config["x"] * 2


def timed(n, once):
    out = []
    for _ in range(n):
        start = time.perf_counter()
        once()
        out.append(time.perf_counter() - start)
    return statistics.median(out) * 1e3


def fork_once():
    pid = os.fork()
    if pid == 0:
        trainable({"x": 1})
        os._exit(0)
    os.waitpid(pid, 0)


n = int(sys.argv[1])
print("RESULT " + json.dumps({"fork_ms": timed(n, fork_once), "call_ms": timed(n, lambda: trainable({"x": 1}))}))
