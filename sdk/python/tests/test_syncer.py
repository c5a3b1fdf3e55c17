"""SyncConfig's upload_dir, command syncer and exclude patterns, as the
experiment file takes them, and a restore that brings a deleted experiment
folder back with them and mirrors the restored run."""

import glob
import json
import os
import shutil
import tempfile
import textwrap
import unittest

from tests import support
from tunejet import train, tune
from tunejet.tune.syncer import CommandSyncer


class SyncConfigTest(unittest.TestCase):
    def test_command_syncer_in_the_file(self):
        sc = train.SyncConfig(
            upload_dir="remote:bucket/tune",
            syncer=CommandSyncer(sync_up="rclone copy {exclude} {source} {target}", sync_down="rclone copy {source} {target}", delete="rclone purge {target}"),
            exclude=["*/checkpoint_*"],
        )
        spec = sc.to_spec()
        self.assertEqual(spec["upload_dir"], "remote:bucket/tune")
        self.assertEqual(spec["exclude"], ["*/checkpoint_*"])
        self.assertEqual(
            spec["syncer"],
            {"sync_up": "rclone copy {exclude} {source} {target}", "sync_down": "rclone copy {source} {target}", "delete": "rclone purge {target}"},
        )

    def test_a_dict_of_templates(self):
        spec = tune.SyncConfig(upload_dir="/mnt/backup", syncer={"sync_up": "cp -r {source} {target}", "exclude_template": "--exclude={pattern}"}).to_spec()
        self.assertEqual(spec["syncer"], {"sync_up": "cp -r {source} {target}", "exclude_template": "--exclude={pattern}"})

    def test_without_upload_dir_nothing_is_added(self):
        self.assertEqual(
            train.SyncConfig().to_spec(),
            {"sync_period": 300, "sync_timeout": 1800, "sync_artifacts": False, "sync_artifacts_on_checkpoint": True},
        )
        self.assertNotIn("syncer", train.SyncConfig(upload_dir="s3://b/x", syncer="auto").to_spec())

    def test_refusals_name_the_setting(self):
        cases = [
            (dict(upload_dir="/r", syncer={"sync_up": "cp {source} {dest}"}), r"unknown placeholder \{dest\}"),
            (dict(upload_dir="/r", syncer={"sync_up": "rsync {options} {source} {target}"}), r"Ray's \{options\} is \{exclude\} here"),
            (dict(upload_dir="/r", syncer={"sync_up": "cp {source} /x"}), r"must hold \{target\}"),
            (dict(upload_dir="/r", syncer={"sync_up": ""}), r"syncer.sync_up must be a non-empty"),
            (dict(upload_dir="/r", syncer={"sync_up": "cp {source} {target}", "delete": "rm {source}"}), r"syncer.delete: unknown placeholder \{source\}"),
            (dict(upload_dir="/r", syncer={"sync_up": "cp {source} {target}", "syncup": "x"}), r"unknown keys \['syncup'\]"),
            (dict(syncer=CommandSyncer(sync_up="cp {source} {target}")), "needs upload_dir"),
            (dict(upload_dir="/r", syncer=object()), "CommandSyncer or a dict"),
            (dict(upload_dir="/r", exclude="*/checkpoint_*"), "list of non-empty patterns"),
        ]
        for kwargs, msg in cases:
            with self.subTest(kwargs=kwargs):
                with self.assertRaisesRegex(ValueError, msg):
                    train.SyncConfig(**kwargs).to_spec()

    def test_restore_takes_a_sync_config(self):
        with self.assertRaisesRegex(ValueError, "must be a SyncConfig"):
            tune.Tuner.restore("/x/y", trainable=_noop, sync_config={"upload_dir": "/r"})
        with self.assertRaisesRegex(ValueError, r"unknown placeholder \{dest\}"):
            tune.Tuner.restore("/x/y", trainable=_noop, sync_config=train.SyncConfig(upload_dir="/r", syncer={"sync_up": "cp {source} {dest}"}))


def _noop(config):
    pass


# The experiment mirrors to an upload_dir with a tar/cp command syncer; its
# trial fails until the file "ok" exists next to the script. "restore"
# restores it with the same SyncConfig, resuming the errored trial.
MIRRORED = textwrap.dedent(
    '''
    import json, os, sys
    from tunejet import train, tune
    from tunejet.tune.syncer import CommandSyncer

    def trainable(config):
        if not os.path.exists(os.path.join(config["dir"], "ok")):
            raise RuntimeError("not yet")
        train.report({"x": config["x"]})

    storage, upload = sys.argv[2], sys.argv[3]
    sync = train.SyncConfig(
        sync_period=0.1, upload_dir=upload, exclude=["*/checkpoint_*"],
        syncer=CommandSyncer(
            sync_up="mkdir -p {target} && tar -C {source} -cf - {exclude} . | tar -C {target} -xf -",
            sync_down="cp -r {source}/. {target}",
            delete="rm -rf {target}",
        ),
    )
    if sys.argv[1] == "run":
        tuner = tune.Tuner(trainable, param_space={"x": 1, "dir": os.path.dirname(os.path.abspath(__file__))},
                           run_config=train.RunConfig(name="mirrored", storage_path=storage, sync_config=sync))
    else:
        tuner = tune.Tuner.restore(os.path.join(storage, "mirrored"), trainable=trainable, resume_errored=True, sync_config=sync)
    grid = tuner.fit()
    print("RESULT " + json.dumps({"errors": len(grid.errors), "x": [r.metrics.get("x") for r in grid]}))
    '''
)


def _states(folder):
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(folder, "experiment_state-*.json")))


_result = support.result_line


@unittest.skipUnless(all(shutil.which(t) for t in ("sh", "tar", "cp", "rm")), "needs sh, tar, cp and rm")
class RestoreWithSyncConfigTest(unittest.TestCase):
    """Tuner.restore(..., sync_config=) with the log and the local folder
    gone: sync_down brings the folder back, the restored run finishes, and
    the remote gets its final state."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tunejet-syncer-restore-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def test_restore_brings_the_folder_back_and_mirrors(self):
        script = os.path.join(self.dir, "mirrored.py")
        with open(script, "w") as f:
            f.write(MIRRORED)
        storage, upload = os.path.join(self.dir, "storage"), os.path.join(self.dir, "remote")
        local, remote = os.path.join(storage, "mirrored"), os.path.join(upload, "mirrored")
        first_home = os.path.join(self.dir, "home1")
        os.makedirs(first_home)
        out = _result(support.run_script(self, script, "run", storage, upload, home=first_home))
        self.assertEqual(out["errors"], 1, "the trial fails until ok exists")
        support.eventually(self, lambda: _states(remote) and _states(remote) == _states(local), "the mirror of the errored run")
        before = _states(remote)

        shutil.rmtree(local)
        open(os.path.join(self.dir, "ok"), "w").close()
        second_home = os.path.join(self.dir, "home2")  # a fresh JetStream store: the log is gone too
        os.makedirs(second_home)
        out = _result(support.run_script(self, script, "restore", storage, upload, home=second_home))
        self.assertEqual(out, {"errors": 0, "x": [1]})
        self.assertTrue(set(before) <= set(_states(local)), "sync_down brought the run's state files back")
        support.eventually(
            self,
            lambda: _states(remote) == _states(local) and len(_states(remote)) > len(before),
            "the remote to hold the restored run's final state",
        )
        with open(os.path.join(remote, _states(remote)[-1])) as f:
            state = json.load(f)["state"]
        self.assertEqual(state["status"], "COMPLETED")
        self.assertEqual([t["status"] for t in state["trials"].values()], ["TERMINATED"])


if __name__ == "__main__":
    unittest.main()
