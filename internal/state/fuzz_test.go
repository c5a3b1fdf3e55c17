package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tunejet/tunejet/events"
)

// Load must refuse any file that is not a whole snapshot, without
// panicking, and a state it accepts must survive Snapshot and Load
// unchanged. FuzzLoad mutates whole files (so mostly hits the checks of
// the envelope); FuzzLoadState mutates the state inside a file whose
// checksum and header match it, so the state itself is fuzzed.

// fuzzSeeds are snapshots of folds of random logs and their prefixes.
func fuzzSeeds(f *testing.F) [][]byte {
	r := rand.New(rand.NewPCG(5, 6))
	var out [][]byte
	for run := 0; run < 4; run++ {
		evs, load := randomLog(f, r)
		for _, cut := range []int{0, len(evs) / 2, len(evs)} {
			snap, err := foldWith(evs[:cut], load).Snapshot()
			if err != nil {
				f.Fatal(err)
			}
			out = append(out, snap)
		}
	}
	return out
}

// checkRoundTrip checks a state Load accepted: the file was one JSON
// value, the state can be used, and it survives Snapshot and Load.
func checkRoundTrip(t *testing.T, data []byte, e *Experiment) {
	t.Helper()
	if !json.Valid(data) {
		t.Fatalf("Load accepted a file that is not one JSON value: %q", data)
	}
	snap, err := e.Snapshot()
	if err != nil {
		t.Fatalf("Load accepted a state that Snapshot refuses: %v\n%s", err, data)
	}
	again, err := Load(snap)
	if err != nil {
		t.Fatalf("Load accepted a state whose snapshot it refuses: %v\nfirst %s\nsnapshot %s", err, data, snap)
	}
	// Nil and empty lists and maps are the same state: omitempty writes
	// neither. The counts kept beside the state must survive too; the
	// settings read from the spec are derived from it and read on use. The
	// snapshots, below, must be the same bytes.
	if diff := cmp.Diff(e, again, cmp.AllowUnexported(Experiment{}, Trial{}, tally{}), cmpopts.IgnoreUnexported(Judge{}), cmpopts.IgnoreFields(Experiment{}, "settings", "settingsErr"), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("Load, Snapshot, Load changed the state (-first +second):\n%s", diff)
	}
	snap2, err := again.Snapshot()
	if err != nil || !bytes.Equal(snap, snap2) {
		t.Fatalf("the second snapshot differs (%v):\n%s\n%s", err, snap, snap2)
	}
	use(t, again)
}

func FuzzLoad(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Load(data)
		if err != nil {
			return
		}
		checkRoundTrip(t, data, e)
	})
}

// wrapState makes a snapshot file around a state body, with the checksum
// and the header that body needs.
func wrapState(body []byte) []byte {
	var head struct {
		Name    string `json:"name"`
		LastSeq uint64 `json:"last_seq"`
	}
	_ = json.Unmarshal(body, &head) // a body it cannot read is for Load to refuse
	sum := sha256.Sum256(body)
	f := snapshotFile{
		Format: snapshotFormat, SchemaVersion: SchemaVersion, Experiment: head.Name, Seq: head.LastSeq,
		Checksum: "sha256:" + hex.EncodeToString(sum[:]), State: json.RawMessage(body),
	}
	out, err := json.Marshal(f)
	if err != nil { // not JSON: send it as is, to be refused
		return body
	}
	return out
}

func FuzzLoadState(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		var sf snapshotFile
		if err := json.Unmarshal(s, &sf); err != nil {
			f.Fatal(err)
		}
		f.Add([]byte(sf.State))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		data := wrapState(body)
		e, err := Load(data)
		if err != nil {
			return
		}
		checkRoundTrip(t, data, e)
	})
}

// use calls what the services call on a loaded state, and folds a report
// into it, as a restore does with the log's tail; e is changed.
func use(t *testing.T, e *Experiment) {
	t.Helper()
	e.Counts()
	e.InFlight()
	e.Unfinished()
	for _, tr := range e.TrialList() {
		tr.Finished()
		tr.NeedsSchedule()
		tr.RunFailures()
		tr.LatestCheckpoint()
		for _, m := range tr.Metrics {
			m.Avg()
			m.LastNAvg(5)
		}
	}
	if len(e.Order) == 0 {
		return
	}
	id := e.Order[0]
	ev := events.New(e.Name, events.WriterRunner, "fuzz", &events.TrialReported{
		TrialID: id, Attempt: e.Trials[id].Attempt, Result: map[string]any{"training_iteration": float64(e.Trials[id].Iteration + 1), "loss": 0.5},
	})
	m, err := events.Encode(ev)
	if err != nil {
		return // not an event the log could hold
	}
	d, err := events.Decode(m.Subject, m.Header, m.Data)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	d.Seq = e.LastSeq + 1
	e.apply(d)
}
