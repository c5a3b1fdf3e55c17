package restorer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tunejet/tunejet/api"
	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/restore"
	"github.com/tunejet/tunejet/internal/storage"
)

// TestADamagedNewestSnapshotFallsBackToAnOlderOne: with the log gone, the
// newest experiment_state file cut short (or edited, its checksum no
// longer matching) and an older intact one beside it, the restore comes
// from the older one and says which it skipped and why.
func TestADamagedNewestSnapshotFallsBackToAnOlderOne(t *testing.T) {
	for _, tc := range []struct {
		name, says string
		damage     func(data []byte) []byte
	}{
		{"truncated", "not valid JSON", func(data []byte) []byte { return data[:len(data)/2] }},
		{"edited", "checksum mismatch", func(data []byte) []byte {
			return []byte(strings.Replace(string(data), `"status":"TERMINATED"`, `"status":"RUNNING"`, 1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storagePath := t.TempDir()
			lost := bustest.Start(t)
			h := &history{t: t, b: lost.Bus("history"), storage: storagePath, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), reports: 2}
			h.run1()
			last, err := h.b.LastSeq(t.Context(), events.ExperimentSubjects(exp))
			if err != nil {
				t.Fatal(err)
			}
			store(t, storagePath, foldLog(t, h.b, last-2), storage.StateFileName(session1))
			newest := filepath.Join(storagePath, exp, storage.StateFileName(session2))
			data := encode(t, foldLog(t, h.b, 0))
			if damaged := tc.damage(data); string(damaged) == string(data) {
				t.Fatal("the damage changed nothing")
			} else if err := os.WriteFile(newest, damaged, 0o644); err != nil {
				t.Fatal(err)
			}

			srv := bustest.Start(t) // no log: the state files are all there is
			s := New(srv.Bus("restorer"), Config{})
			req := api.RestoreRequest{Path: storage.Join(storagePath, exp), Resume: restore.FromFlags(true, false, false), Trainable: &genuine}
			for _, dry := range []bool{true, false} {
				rep := s.Handle(t.Context(), req, dry)
				if !rep.OK || rep.Snapshot != storage.StateFileName(session1) || rep.ReadSeq != last-2 {
					t.Fatalf("restore (dry %v): %+v; want OK from the older snapshot %s", dry, rep, storage.StateFileName(session1))
				}
				if len(rep.Skipped) != 1 || !strings.Contains(rep.Skipped[0], storage.StateFileName(session2)) || !strings.Contains(rep.Skipped[0], tc.says) {
					t.Fatalf("restore (dry %v) says it skipped %q; want %s, %s", dry, rep.Skipped, storage.StateFileName(session2), tc.says)
				}
			}
		})
	}
}
