"""The trial side of Ray's API: Checkpoint, report, get_checkpoint and
get_context, over the trainable protocol (tunejet._protocol)."""

import contextlib
import os
import pickle
import shutil
import tempfile

from tunejet import _protocol


# The file of a Checkpoint.from_dict, as Ray's AIR Checkpoint names it.
_DICT_FILE = "dict_checkpoint.pkl"


class Checkpoint:
    """A directory of files, as Ray's ``ray.train.Checkpoint``.

    ``Checkpoint.from_directory(d)`` wraps a directory to report;
    ``get_checkpoint()`` and ``Result.checkpoint`` return one to read.
    Checkpoints here are local directories: ``path`` is the directory.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self._temporary = False  # a directory from_dict made, removed once reported

    @classmethod
    def from_directory(cls, path):
        """Return a Checkpoint of the directory at path."""
        return cls(os.path.abspath(os.fspath(path)))

    @classmethod
    def from_dict(cls, data):
        """Return a Checkpoint of data, a picklable dict, as Ray <= 2.6's
        AIR Checkpoint.from_dict: a temporary directory holding it in
        dict_checkpoint.pkl (Ray's file name), removed once reported."""
        if not isinstance(data, dict):
            raise TypeError("Checkpoint.from_dict takes a dict, got %s" % type(data).__name__)
        path = tempfile.mkdtemp(prefix="checkpoint_tmp_")
        with open(os.path.join(path, _DICT_FILE), "wb") as f:
            pickle.dump(data, f)
        checkpoint = cls(path)
        checkpoint._temporary = True
        return checkpoint

    def to_dict(self):
        """Return the dict a Checkpoint.from_dict checkpoint holds, as Ray
        <= 2.6's AIR Checkpoint.to_dict."""
        try:
            with open(os.path.join(self.path, _DICT_FILE), "rb") as f:
                return pickle.load(f)
        except FileNotFoundError:
            raise ValueError(
                "%s holds no %s: it was not made by Checkpoint.from_dict; read its files with "
                "as_directory()" % (self.path, _DICT_FILE)
            ) from None

    @contextlib.contextmanager
    def as_directory(self):
        """Yield a local directory holding the checkpoint's files.

        The directory is the checkpoint itself: read it, do not change it.
        """
        yield self.path

    def to_directory(self, path=None):
        """Copy the checkpoint's files into path (a new temporary directory
        when None) and return that directory."""
        if path is None:
            path = tempfile.mkdtemp(prefix="checkpoint_")
        path = os.fspath(path)
        shutil.copytree(self.path, path, dirs_exist_ok=True)
        return path

    def get_metadata(self):
        """Return {}: tunejet checkpoints carry no metadata besides files."""
        return {}

    def __fspath__(self):
        return self.path

    def __eq__(self, other):
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self):
        return hash(self.path)

    def __repr__(self):
        return "Checkpoint(filesystem=local, path=%s)" % self.path


def report(metrics, *, checkpoint=None, checkpoint_dir_name=None):
    """Report one result of the trial, with an optional Checkpoint.

    As Ray's ``ray.train.report``: the checkpoint's files have been copied
    when report returns, so a temporary directory may be deleted then.
    When the trial should stop, the process exits with status 0.
    checkpoint_dir_name is accepted for Ray's signature and ignored: the
    storage names checkpoints checkpoint_NNNNNN.
    """
    del checkpoint_dir_name
    directory = None
    if checkpoint is not None:
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(
                "checkpoint must be a Checkpoint (Checkpoint.from_directory(dir)), got %s"
                % type(checkpoint).__name__
            )
        directory = checkpoint.path
    try:
        _protocol.report(dict(metrics), checkpoint_dir=directory)
    finally:
        if checkpoint is not None and checkpoint._temporary:
            shutil.rmtree(checkpoint.path, ignore_errors=True)


def get_checkpoint():
    """Return the Checkpoint to resume from, or None on a fresh start."""
    path = _protocol.get_checkpoint()
    return Checkpoint(path) if path else None


class TrainContext:
    """What a trial knows about itself, as Ray's ``TrainContext``."""

    def get_trial_id(self):
        """Return the trial's id."""
        return _protocol.get_trial_id()

    def get_trial_name(self):
        """Return the trial's name."""
        return _protocol.get_trial_name()

    def get_trial_dir(self):
        """Return the trial's directory, also the working directory."""
        return _protocol.get_trial_dir()

    def get_experiment_name(self):
        """Return the experiment's name."""
        return _protocol.get_experiment_name()

    def get_attempt(self):
        """Return the attempt: 1 for the first run of the trial, then 2, ..."""
        return _protocol.get_attempt()

    def get_trial_resources(self):
        """Return the resources the runner gave the trial, a dict such as
        {"cpu": 1, "gpu": 0.5} (TUNEJET_RESOURCES); Ray returns them as a
        placement group factory."""
        return _protocol.get_resources()

    def get_world_size(self):
        """Return 1: a trial is one process."""
        return 1

    def get_world_rank(self):
        """Return 0: a trial is one process."""
        return 0

    def get_local_rank(self):
        """Return 0: a trial is one process."""
        return 0

    def get_local_world_size(self):
        """Return 1: a trial is one process."""
        return 1

    def get_node_rank(self):
        """Return 0: a trial is one process."""
        return 0


def get_context():
    """Return the trial's TrainContext; raises RuntimeError outside a trial."""
    _protocol._require_session()
    return TrainContext()
