// Package blobsync copies directory trees to and from gocloud.dev/blob
// buckets with Ray Tune's Syncer semantics: bounded by a timeout, retried
// with a fixed backoff, throttled by a period, and run one at a time.
//
// # Overview
//
// SyncUp uploads every regular file under a local directory to a key
// prefix, SyncDown downloads every object under a prefix into a local
// directory, and Delete removes everything under a prefix. All three take
// Ray's exclude patterns (Python fnmatch on the slash-separated relative
// path, where "*" also matches "/"; a directory is also tried with a
// trailing "/", and an excluded directory is skipped whole).
//
// A Syncer runs any such operation bounded and retried (Run); a Throttle
// decides when a periodic sync is due (Ray's sync_up_if_needed); a Queue
// runs submitted syncs one at a time on a worker, coalescing submissions
// for the same key.
//
// # Clients
//
// Client is Ray's Syncer interface (sync_up, sync_down, delete between a
// local folder and a remote). BucketClient is the three functions above on
// a bucket; CommandClient runs shell templates (Ray's CommandBasedClient)
// for storage gocloud does not speak: {source} and {target} shell-quoted
// as Python's shlex.quote does, {exclude} the patterns rendered with
// ExcludeTemplate ("--exclude {pattern}" by default, each pattern quoted),
// "{{" and "}}" literal braces. A command runs with sh -c in its own
// process group, killed when its context ends (sync_timeout); a failure is
// a *CommandError with the exit status and the last 4 KiB of its stderr,
// as Ray's "Sync error. Ran command: ... Error message (code): ...". The
// syncer service mirrors an experiment's folder to its upload_dir with
// one of them, throttled and queued; CheckTemplate is the spec's check.
//
// Every write goes through the bucket's writer, which publishes an object
// only when it closes successfully, so a reader never sees part of a file;
// SyncDown writes each file to a temporary name beside it and renames it.
//
// # Timeouts and retries
//
// Config holds Ray's SyncConfig numbers: SyncPeriod (300 s), SyncTimeout
// (1800 s), MaxRetries (2) and RetryBackoff (5 s), as in Ray's
// wait_or_retry(max_retries=2, backoff_s=5). Run makes up to MaxRetries+1
// attempts. Each attempt gets a context that ends after SyncTimeout; an
// attempt still running then fails with
// "<operation> did not finish running within the timeout of N seconds"
// (a *TimeoutError). After a failed attempt Run logs Ray's warning
// "The latest sync operation failed with the following error: ...
// Retrying k more time(s) after sleeping for b seconds..." and waits
// RetryBackoff (the wait ends early when the caller's context ends; the
// backoff is fixed, as in Ray). When no attempt succeeded Run returns a
// *RetryError, "Failed sync even after N retries. The latest sync failed
// with the following error: ...", which wraps the last attempt's error.
//
// # Deviations from Ray
//
//   - An attempt that times out is cancelled: its context ends, so a blob
//     upload in flight is aborted and publishes nothing. Ray's hung sync
//     thread keeps running in the background. Run does not wait for the
//     cancelled function to return; a function that ignores its context
//     keeps running, as in Ray.
//   - A sync submitted while another runs is queued and coalesced by key
//     (Queue), not dropped: the latest submission for a key wins and runs
//     after the current one. Ray skips a sync while the previous one is
//     still running within sync_timeout.
//   - Throttle.Mark is called only when a sync ran; Ray also resets the
//     throttle when a sync was skipped.
//   - Zero Config fields mean the default, and negative ones are invalid;
//     Ray does not validate them.
//   - Delete refuses an empty prefix rather than delete a whole bucket.
//   - CommandClient quotes exclude patterns (Ray did not, so the shell
//     could expand them), has one placeholder {exclude} for Ray's
//     {options}, and defaults ExcludeTemplate (Ray ignored exclude
//     without one). A timed-out command is killed with its process group;
//     Ray left it running.
package blobsync
