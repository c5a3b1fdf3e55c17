package tune

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/bus"
	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/services/controller"
)

// runnersEvery is how often the status table reads the runner registry.
const runnersEvery = 2 * time.Second

// refreshRunners reads the live runners' capacities from the registry,
// at most every runnersEvery, for the PENDING reasons.
func (t *statusTable) refreshRunners(ctx context.Context) {
	if t.registry == nil || time.Since(t.runnersRead) < runnersEvery {
		return
	}
	t.runnersRead = time.Now()
	runners, ok, err := t.registry.LiveRunners(ctx)
	if err != nil || !ok {
		return
	}
	totals := bus.Totals(runners)
	t.mu.Lock()
	t.totals = totals
	t.mu.Unlock()
}

// waiting are the lines under the table that say why PENDING trials wait
// for a runner, as Ray warns of trials no node can hold, and what the
// experiment waits for from its driver.
func (t *statusTable) waiting(st *state.Experiment) string {
	t.mu.Lock()
	totals := t.totals
	t.mu.Unlock()
	text := pendingReasons(st, totals)
	if why := st.DriverWait(); why != "" {
		text += "The experiment " + why + "\n"
	}
	return text
}

// pendingReasons says, a line each, why PENDING trials of st wait for a
// runner of the live ones of totals.
func pendingReasons(st *state.Experiment, totals []events.Resources) string {
	if st.Status != state.ExperimentRunning || len(totals) == 0 {
		return ""
	}
	var b strings.Builder
	for _, tr := range st.TrialList() {
		// A scheduled trial waits too when the runners that could hold it
		// have left.
		if why := controller.Unfit(st.Spec, tr, totals); why != "" {
			fmt.Fprintf(&b, "Trial %s is PENDING: %s\n", tr.Name, why)
		}
	}
	return b.String()
}
