// Package syncer writes an experiment's storage: everything but the
// checkpoints and artifacts that runners reaching the storage write
// themselves.
//
// # Overview
//
// storage_path is a directory (local or NFS) or a bucket URL (file://,
// mem://, s3://, gs://) opened through gocloud.dev/blob. For every started
// experiment the syncer folds its events (internal/state) and keeps Ray
// Tune's layout under <storage_path>/<name>/:
//
//   - .validate_storage_marker when the experiment starts;
//   - .tunejet_owner.json, this deployment's claim on the folder
//     (storage.ClaimOwner), made when it opens the experiment's storage (or
//     for a client about to submit, on tunejet.api.storage_claim) and renewed
//     every sync period; a folder another deployment owns gets nothing;
//   - params.json when a trial is created, by the controller or by a
//     restore (restart_errored);
//   - result.json lines, progress.csv rows and error.txt entries: on a
//     file system (a local or NFS path, or a file:// URL) appended in place
//     as reports and failures arrive, flushed within flushDelay, as Ray
//     writes them; on a bucket staged in a local directory and uploaded
//     whole on SyncConfig.sync_period (an object per row would be
//     wasteful). On a file system params.json is written at once too;
//   - events.out.tfevents.<timestamp>.<host>, the trial's TensorBoard
//     event file (internal/tboard), grown with result.json: a record per
//     result, and the trial's hparams when it ends; not with the spec's
//     run_config.disable_tensorboard;
//   - experiment_state-<session>.json, the fold's snapshot with the stream
//     sequence it reflects, on SyncConfig.sync_period;
//   - checkpoint_NNNNNN/ folders, persisted promptly from the experiment's
//     Object Store and announced with checkpoint.persisted;
//   - artifacts (SyncConfig.sync_artifacts), copied into the trial folder.
//
// The experiment's end and an interrupt force a final sync.
//
// # Mirror to upload_dir
//
// With SyncConfig.upload_dir (Ray ≤ 2.6) the writer also mirrors
// <storage_path>/<name> to <upload_dir>/<name> (mirror.go): after a sync of
// storage, at most every sync_period (blobsync.Throttle), forced at the
// end and on shutdown, each sync_up bounded by sync_timeout and retried
// (blobsync.Syncer.Run) on its own blobsync.Queue, so a slow command never
// holds up the event handling; dropped checkpoints are deleted there too.
// upload_dir, the command syncer and exclude come only from the log: the
// experiment.submitted event, then the mirror of each experiment.restored
// that carries one (the restore's caller's; a restore changes the mirror
// of a running writer too) — never from a state file in storage, so a
// restore from a snapshot whose caller gives none does not mirror. The
// client is Config.Client (a Go program's Syncer), else that command
// syncer, else a gocloud bucket; exclude patterns leave paths out.
//
// # Plan and executors
//
// Each event is folded, then plan (pure) says what it requires of
// storage, as jobs: stage a result row or an error.txt entry, write
// params.json, persist a checkpoint, spare a trial's latest staged copy,
// check the copies a retry resumes from, copy artifacts, upload an ended
// trial's files, snapshot. The writer runs the jobs on its executors:
// staging (the result files, in place or in a local directory, in Ray's
// formats from internal/storage), persister (a queue that copies staged
// checkpoints and artifacts from the Object Store and removes the staged
// copies), and the sync (syncUp), which uploads the staged files (or makes
// the files written in place durable), then the snapshot, then deletes
// the checkpoints retention dropped (deletions decides which) and acks
// the log.
//
// # Durability and exactly once
//
// The syncer reads each experiment through a durable consumer (sync_<name>)
// and acks only what a durable snapshot covers. On start it loads the
// newest snapshot from storage and consumes from the sequence after it;
// before appending to a trial's files it cuts them to what that snapshot
// counted (downloaded copies on a bucket, the files themselves on a file
// system), so the lines written after the snapshot, folded again, are
// written once more and only once. The event file is found by its first
// record (tboard.Ours) and cut to as many result records (tboard.Cut). A syncer killed mid-batch and restarted
// therefore writes every result line and checkpoint exactly once. Each
// line goes out in one write, so a kill leaves at most a last line cut
// short, which the cut removes.
//
// # Failures
//
// Each sync is bounded by sync_timeout (a hung upload is cancelled) and
// retried with backoff; a sync that still fails is announced with
// sync.failed and tried again on the next period, coalesced with it. The
// experiment itself never waits for storage.
//
// # Retention
//
// Checkpoints pushed out by CheckpointConfig.num_to_keep are deleted only
// after a snapshot that no longer refers to them is durable, so a restore
// never meets a missing checkpoint. Staged Object Store copies are removed
// once persisted and announced, except each trial's latest, which retries
// resume from; after a failed attempt the syncer stages that one again
// from storage if it was lost, or marks it gone everywhere (ckpt.MarkGone).
// A checkpoint whose staged copy is other bytes than its event names is
// given up after 3 tries: the final state never waits for it.
package syncer
