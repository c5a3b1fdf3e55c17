package storage

// Ownership: which deployment writes an experiment's folder.
//
// Two deployments (two embedded stores, or an embedded store and a
// cluster) that run experiments of one name into one storage path would
// write their trials into the same folder, and the newest state file of
// either would hide the other's results. The folder therefore says who
// owns it, in OwnerFile beside the state files, and every writer claims
// it through ClaimOwner before it writes: a client before it submits, a
// restorer before it restores, the syncer on every sync (which renews the
// claim). The rules are in decideClaim.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// ClaimSubject is where a syncer claims an experiment's folder for its
// deployment (ClaimRun) on behalf of a client about to submit, which may
// hold no storage credentials.
const ClaimSubject = "tunejet.api.storage_claim"

// ClaimRequest asks a syncer to claim <StoragePath>/<Experiment> for its
// deployment, recording the client's process (Owner's Host, PID,
// Embedded) and how often the experiment syncs.
type ClaimRequest struct {
	StoragePath string  `json:"storage_path"`
	Experiment  string  `json:"experiment"`
	Host        string  `json:"host"`
	PID         int     `json:"pid"`
	Embedded    bool    `json:"embedded,omitempty"`
	RenewEveryS float64 `json:"renew_every_s,omitempty"`
}

// ClaimReply is a syncer's answer: Owned with the owner named in Error
// when another deployment owns the folder, Error alone for a claim that
// failed otherwise.
type ClaimReply struct {
	Owned bool   `json:"owned,omitempty"`
	Error string `json:"error,omitempty"`
}

// OwnerFile is the object, in the experiment's folder, that names the
// deployment writing it.
const OwnerFile = ".tunejet_owner.json"

// ErrOwned is wrapped by the error of a claim refused because another
// deployment owns the folder (an *OwnedError).
var ErrOwned = errors.New("the experiment's storage folder is owned by another tunejet deployment")

// Owner is the content of OwnerFile.
type Owner struct {
	// Deployment is the owning deployment's id (bus.Deployment), Store
	// how users reach it ("embedded store DIR", or a NATS URL).
	Deployment string `json:"deployment"`
	Store      string `json:"store"`
	// Host and PID are the process that claimed the folder: the client
	// that submitted the experiment, or the restorer that restored it.
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// Embedded says the deployment is an embedded store (Store
	// "embedded store DIR") served inside that process (an embedded
	// tunejet run or restore): when no server runs on DIR, the
	// deployment is gone.
	Embedded bool `json:"embedded,omitempty"`
	// Since is when the deployment claimed the folder; Renewed when it
	// last said it still writes there, which it does every RenewEveryS
	// seconds while its syncer syncs the experiment.
	Since       time.Time `json:"since"`
	Renewed     time.Time `json:"renewed"`
	RenewEveryS float64   `json:"renew_every_s,omitempty"`
}

// StaleRenewals is how many renewal periods an owner may miss before it
// is stale; an owner that states no period renews every
// defaultRenewEvery (the default sync_period).
const StaleRenewals = 3

const defaultRenewEvery = 300 * time.Second

// StaleAt is when the owner becomes stale if it is not renewed.
func (o Owner) StaleAt() time.Time {
	every := time.Duration(o.RenewEveryS * float64(time.Second))
	if every <= 0 {
		every = defaultRenewEvery
	}
	return o.Renewed.Add(StaleRenewals * every)
}

// Describe names the owner for users.
func (o Owner) Describe() string {
	return fmt.Sprintf("deployment %s (%s), claimed by pid %d on host %s at %s, last renewed %s",
		o.Deployment, o.Store, o.PID, o.Host, o.Since.UTC().Format(time.RFC3339), o.Renewed.UTC().Format(time.RFC3339))
}

// Claim is what a writer claims the folder for.
type Claim int

const (
	// ClaimRun: a new experiment. The folder must have no owner, or be
	// this deployment's.
	ClaimRun Claim = iota
	// ClaimRestore: an explicit restore. It also takes the folder over
	// from an owner that is gone: stale, or an embedded store on this host
	// that no server runs any more.
	ClaimRestore
	// ClaimRenew: the syncer, on each sync. It renews this deployment's
	// claim, and claims a folder nobody owns.
	ClaimRenew
)

// OwnedError is a claim refused because another deployment owns the
// folder.
type OwnedError struct {
	Dir   string
	Owner Owner
	Claim Claim
}

func (e *OwnedError) Error() string {
	msg := fmt.Sprintf("%v: %s belongs to %s. Two deployments writing one folder mix their trials, and the results would show one run and hide the other. ",
		ErrOwned, e.Dir, e.Owner.Describe())
	restoreThere := "tunejet restore " + e.Dir
	if dir := e.Owner.EmbeddedDir(); dir != "" {
		restoreThere += " --store-dir " + dir
	} else {
		restoreThere += " --nats " + e.Owner.Store
	}
	switch e.Claim {
	case ClaimRun:
		msg += fmt.Sprintf("If that experiment still runs, let it finish there; to continue it once interrupted, restore it from its own deployment (%s). To start a new experiment, choose another name (--name) or storage path (--storage-path).", restoreThere)
	case ClaimRestore:
		msg += fmt.Sprintf("Restore it there (%s). If that deployment is gone for good (its store deleted), a restore from another takes the folder over once the owner is stale, at %s (not renewed for %d sync periods), or, for an embedded store on this host, once no tunejet process serves it.",
			restoreThere, e.Owner.StaleAt().UTC().Format(time.RFC3339), StaleRenewals)
	default:
		msg += "This deployment does not write there; the owner's restore or run does."
	}
	return msg
}

func (e *OwnedError) Unwrap() error { return ErrOwned }

// embeddedStore prefixes the Store of an embedded deployment, as
// bus.StoreName writes it.
const embeddedStore = "embedded store "

// ClaimOwner claims <storagePath>/<name> for me, as decideClaim rules,
// for every kind of storage path; for ClaimRestore, gone says whether an
// embedded owner on this host is gone (nil: never). A folder nobody owns
// is claimed with a create-if-absent write (atomic on S3, GCS and Azure; on a file system
// fileblob checks then renames, so two claims in the same instant may
// both pass), and claimed again if another claim won. It returns the
// owner it took the folder over from, if it did (ClaimRestore), for the
// caller to warn about.
func ClaimOwner(ctx context.Context, storagePath, name string, me Owner, how Claim, gone func(Owner) bool) (*Owner, error) {
	if gone == nil {
		gone = func(Owner) bool { return false }
	}
	root, err := OpenBucket(ctx, storagePath)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	b := ExperimentBucket(root, name)
	defer b.Close()
	dir := Join(storagePath, name)
	for attempt := 1; ; attempt++ {
		cur, err := ReadOwner(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Join(dir, OwnerFile), err)
		}
		next, took, err := decideClaim(cur, me, how, time.Now(), gone)
		if err != nil {
			return nil, &OwnedError{Dir: dir, Owner: *cur, Claim: how}
		}
		if next == nil {
			return nil, nil
		}
		data, err := json.MarshalIndent(next, "", "  ")
		if err != nil {
			return nil, err
		}
		opts := &blob.WriterOptions{IfNotExist: cur == nil}
		err = b.WriteAll(ctx, OwnerFile, data, opts)
		if cur == nil && gcerrors.Code(err) == gcerrors.FailedPrecondition && attempt < 3 {
			continue // another claim created it first: decide against it
		}
		if err != nil {
			return nil, fmt.Errorf("storage: write %s: %w", Join(dir, OwnerFile), err)
		}
		return took, nil
	}
}

// ReadOwner reads the folder's owner: nil when it has none.
func ReadOwner(ctx context.Context, b *blob.Bucket) (*Owner, error) {
	data, err := ReadAll(ctx, b, OwnerFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var o Owner
	if err := json.Unmarshal(data, &o); err != nil || o.Deployment == "" {
		return nil, fmt.Errorf("not an owner record (%w): remove it only if no other tunejet deployment writes this folder", err)
	}
	return &o, nil
}

// errOwned is decideClaim's refusal; ClaimOwner makes it an OwnedError.
var errOwned = errors.New("owned")

// decideClaim is the claim's rule: what to write (nil: nothing), whom it
// takes the folder over from, or errOwned.
//
//   - No owner: every claim takes the folder, Since and Renewed now.
//   - This deployment: the claim passes; a run or restore records its
//     process, a renewal only the time; Since stays.
//   - Another deployment: refused, except that a restore takes over an
//     owner that is gone — stale (now past StaleAt), or an embedded store
//     on this host that no server runs any more (gone reports it: the
//     tunejet run or restore that ran it ended, however it ended, or the
//     store was deleted).
//
// A new run is refused even by a stale owner: the folder holds another
// experiment's results; restore it, or choose another name.
func decideClaim(cur *Owner, me Owner, how Claim, now time.Time, gone func(Owner) bool) (next, took *Owner, err error) {
	me.Since, me.Renewed = now, now
	switch {
	case cur == nil:
		return &me, nil, nil
	case cur.Deployment == me.Deployment && how == ClaimRenew:
		n := *cur
		n.Renewed, n.RenewEveryS = now, me.RenewEveryS
		return &n, nil, nil
	case cur.Deployment == me.Deployment:
		me.Since = cur.Since
		return &me, nil, nil
	case how == ClaimRestore && (now.After(cur.StaleAt()) || cur.Embedded && cur.Host == me.Host && gone(*cur)):
		return &me, cur, nil
	default:
		return nil, nil, errOwned
	}
}

// EmbeddedDir is the store dir of an embedded owner ("" for another).
func (o Owner) EmbeddedDir() string {
	dir, ok := strings.CutPrefix(o.Store, embeddedStore)
	if !o.Embedded || !ok {
		return ""
	}
	return dir
}

// NewOwner is this process's claim for a deployment (its id and store
// name, and whether it runs in this process), renewed every renewEvery.
func NewOwner(deployment, store string, embedded bool, renewEvery time.Duration) Owner {
	h, _ := os.Hostname()
	return Owner{Deployment: deployment, Store: store, Host: h, PID: os.Getpid(), Embedded: embedded, RenewEveryS: renewEvery.Seconds()}
}
