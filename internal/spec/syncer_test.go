package spec

import (
	"strings"
	"testing"
)

// TestParseCommandSyncer: a command syncer, its upload_dir and the
// exclude patterns reach the spec as written.
func TestParseCommandSyncer(t *testing.T) {
	file := head + `run_config:
  storage_path: /data/results
  sync_config:
    upload_dir: "remote:bucket/tune"
    exclude: ["*/checkpoint_*"]
    syncer:
      sync_up: rclone copy {exclude} {source} {target}
      sync_down: rclone copy {source} {target}
      delete: rclone purge {target}
      exclude_template: --exclude={pattern}
`
	s, err := Parse("exp.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	sc := s.RunConfig.SyncConfig
	if sc.UploadDir != "remote:bucket/tune" || len(sc.Exclude) != 1 || sc.Exclude[0] != "*/checkpoint_*" || sc.Syncer == nil {
		t.Fatalf("sync_config = %+v", sc)
	}
	if c := *sc.Syncer; c.SyncUp != "rclone copy {exclude} {source} {target}" || c.SyncDown != "rclone copy {source} {target}" ||
		c.Delete != "rclone purge {target}" || c.ExcludeTemplate != "--exclude={pattern}" {
		t.Fatalf("syncer = %+v", c)
	}
}

// TestParseCommandSyncerErrors: each broken setting is named by its key.
func TestParseCommandSyncerErrors(t *testing.T) {
	rc := head + "run_config:\n  sync_config:\n"
	tests := []struct{ name, file, want string }{
		{"unknown placeholder", rc + "    upload_dir: /r\n    syncer: {sync_up: 'cp -r {source} {dest}'}\n",
			"exp.yaml:6: run_config.sync_config.syncer.sync_up: unknown placeholder {dest}"},
		{"Ray's options", rc + "    upload_dir: /r\n    syncer: {sync_up: 'rsync {options} {source} {target}'}\n",
			"Ray's {options} is {exclude} here"},
		{"missing target", rc + "    upload_dir: /r\n    syncer: {sync_up: 'cp -r {source} /x'}\n",
			"run_config.sync_config.syncer.sync_up: \"cp -r {source} /x\" must hold {target}"},
		{"empty sync_up", rc + "    upload_dir: /r\n    syncer: {sync_down: 'cp -r {source} {target}'}\n",
			"run_config.sync_config.syncer.sync_up: must not be empty"},
		{"delete with source", rc + "    upload_dir: /r\n    syncer: {sync_up: 'cp {source} {target}', delete: 'rm {source}'}\n",
			"run_config.sync_config.syncer.delete: unknown placeholder {source}"},
		{"exclude template without pattern", rc + "    upload_dir: /r\n    syncer: {sync_up: 'cp {source} {target}', exclude_template: '--exclude'}\n",
			"run_config.sync_config.syncer.exclude_template: \"--exclude\" must hold {pattern}"},
		{"syncer without upload_dir", rc + "    syncer: {sync_up: 'cp -r {source} {target}'}\n",
			"exp.yaml:5: run_config.sync_config.syncer: a syncer needs run_config.sync_config.upload_dir"},
		{"upload_dir gocloud cannot open", rc + "    upload_dir: hdfs://nn/x\n",
			"run_config.sync_config.upload_dir: tunejet cannot open hdfs:// storage itself"},
		{"relative upload_dir", rc + "    upload_dir: out\n",
			"run_config.sync_config.upload_dir: \"out\" is not an absolute folder or a URL"},
		{"upload_dir from a bucket", head + "run_config:\n  storage_path: s3://b/x\n  sync_config:\n    upload_dir: /r\n",
			"run_config.sync_config.upload_dir: mirrors a folder: run_config.storage_path must be a local or NFS folder, got s3://b/x"},
		{"empty exclude pattern", rc + "    upload_dir: /r\n    exclude: ['']\n",
			"run_config.sync_config.exclude.0: must not be empty"},
		{"unknown syncer key", rc + "    upload_dir: /r\n    syncer: {sync_up: 'cp {source} {target}', syncup: x}\n",
			"run_config.sync_config.syncer.syncup: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("exp.yaml", []byte(tt.file))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse: %v\nwant %q", err, tt.want)
			}
		})
	}
}

// TestParseUploadDirAccepted: gocloud storage and a folder need no syncer.
func TestParseUploadDirAccepted(t *testing.T) {
	for _, dir := range []string{"/mnt/backup", "s3://bucket/tune", "file:///mnt/backup", "mem://x"} {
		if _, err := Parse("exp.yaml", []byte(head+"run_config:\n  sync_config:\n    upload_dir: "+dir+"\n")); err != nil {
			t.Errorf("upload_dir %s: %v", dir, err)
		}
	}
}
