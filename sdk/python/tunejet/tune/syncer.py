"""Ray's ``ray.tune.syncer``: the command syncer of SyncConfig.syncer.

A Python Syncer subclass cannot run inside tunejet's syncer service;
give the shell commands instead (CommandSyncer, Ray's CommandBasedClient).
"""

from tunejet._config import CommandSyncer, SyncConfig

__all__ = ["CommandSyncer", "SyncConfig"]
