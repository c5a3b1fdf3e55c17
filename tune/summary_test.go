package tune

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The errored trials' table keeps at most maxTableRows rows, says so as
// Ray does ("Table truncated to 20 rows (5 overflow)", Ray's
// trial_errors_str in python/ray/tune/progress_reporter.py at
// 032e6c2824d4cc3b275b5d4498c5d44db5badaeb), and shows each error's last
// line that is not blank, cut to maxErrorLine runes.
func TestErroredTrialsTable(t *testing.T) {
	g := &ResultGrid{ExperimentPath: "/r/exp"}
	for i := range 25 {
		g.results = append(g.results, Result{TrialName: fmt.Sprintf("t%02d", i), Status: "ERROR", NumFailures: 2, Path: fmt.Sprintf("/r/exp/t%02d", i),
			Error: errors.New("Traceback (most recent call last):\n  File x\nValueError: " + strings.Repeat("é", i*10) + "\n\n")})
	}
	g.results = append(g.results, Result{TrialName: "ok", Status: "TERMINATED"})
	text := erroredTrials(g)
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if lines[0] != "Number of errored trials: 25" || lines[1] != "Table truncated to 20 rows (5 overflow)" {
		t.Fatalf("the table opens with %q, want the count and the truncation", lines[:2])
	}
	if rows := lines[3:]; len(rows) != maxTableRows {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), maxTableRows, text)
	}
	if f := strings.Fields(lines[3]); len(f) != 4 || f[0] != "t00" || f[1] != "2" || f[2] != "/r/exp/t00/error.txt" || f[3] != "ValueError:" {
		t.Errorf("row %q; want t00, 2 failures, its error.txt and ValueError:", lines[3])
	}
	long := lines[3+19]
	if !strings.HasSuffix(long, "...") || strings.Contains(long, "Traceback") {
		t.Errorf("the longest error's line %q is not its last line cut short", long)
	}
	if n := len([]rune(long[strings.Index(long, "ValueError"):])); n != maxErrorLine {
		t.Errorf("the longest error's line is cut to %d runes, want %d", n, maxErrorLine)
	}
	if strings.Contains(text, "ok") {
		t.Errorf("a TERMINATED trial is in the table:\n%s", text)
	}
	if erroredTrials(&ResultGrid{results: []Result{{Status: "TERMINATED"}}}) != "" {
		t.Error("a grid without errored trials has a table")
	}
}

// The status line shows the trials ended of the total the search creates,
// with an ETA once a trial ended, or that the total is unbounded.
func TestStatusLineShowsTheTotal(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	st := tableState()
	st.Run, st.NumTrials, st.StartTime = 1, 200, now.Add(-10*time.Second)
	st.Trials["a_00001"].EndTime = now.Add(-5 * time.Second) // the TERMINATED one
	for _, verbose := range []int{VerboseStatus, VerboseTable} {
		line := strings.Split(render(st, now, time.Second, verbose, columns{}), "\n")[1]
		if !strings.Contains(line, "| 1/200 trials done (0%), ETA 33m10s | 1 RUNNING, 1 PAUSED, 1 TERMINATED") {
			t.Errorf("verbosity %d: status line %q; want 1/200 done with the ETA at 1 trial per 10 s, then the counts", verbose, line)
		}
	}
	st.NumTrials = -1
	if line := strings.Split(render(st, now, time.Second, VerboseStatus, columns{}), "\n")[1]; !strings.Contains(line, "| 1/unbounded trials done (num_samples -1) |") {
		t.Errorf("status line %q; want the total unbounded", line)
	}
}
