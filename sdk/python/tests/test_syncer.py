"""SyncConfig's upload_dir, command syncer and exclude patterns, as the
experiment file takes them."""

import unittest

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


if __name__ == "__main__":
    unittest.main()
