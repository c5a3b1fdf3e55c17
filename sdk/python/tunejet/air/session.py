"""Ray <= 2.6's ``ray.air.session``: the trial side, as functions.

report and get_checkpoint are tunejet.train's; the others ask the
trial's TrainContext (train.get_context()).
"""

from tunejet._session import get_checkpoint, get_context, report


def get_trial_id():
    """Return the trial's id."""
    return get_context().get_trial_id()


def get_trial_name():
    """Return the trial's name."""
    return get_context().get_trial_name()


def get_trial_dir():
    """Return the trial's directory, also the working directory."""
    return get_context().get_trial_dir()


def get_experiment_name():
    """Return the experiment's name."""
    return get_context().get_experiment_name()


def get_trial_resources():
    """Return the trial's resources, a dict such as {"cpu": 1}."""
    return get_context().get_trial_resources()


def get_world_size():
    """Return 1: a trial is one process."""
    return get_context().get_world_size()


def get_world_rank():
    """Return 0: a trial is one process."""
    return get_context().get_world_rank()


def get_local_rank():
    """Return 0: a trial is one process."""
    return get_context().get_local_rank()


def get_local_world_size():
    """Return 1: a trial is one process."""
    return get_context().get_local_world_size()


def get_node_rank():
    """Return 0: a trial is one process."""
    return get_context().get_node_rank()


__all__ = [
    "report",
    "get_checkpoint",
    "get_trial_id",
    "get_trial_name",
    "get_trial_dir",
    "get_experiment_name",
    "get_trial_resources",
    "get_world_size",
    "get_world_rank",
    "get_local_rank",
    "get_local_world_size",
    "get_node_rank",
]
