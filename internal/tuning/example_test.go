package tuning_test

import (
	"fmt"

	"github.com/tunejet/tunejet/events"
	"github.com/tunejet/tunejet/internal/tuning"
)

// The scheduler of tune_config.scheduler {type: asha, max_t: 81,
// grace_peroid: 3}, checked before it is built.
func ExampleCheck() {
	spec := &events.ExperimentSpec{
		Name:      "exp",
		Trainable: events.Trainable{Name: "train"},
		TuneConfig: events.TuneConfig{
			Metric: "loss", Mode: "min", Scheduler: "asha",
			SchedulerConfig: map[string]any{"max_t": 81, "grace_peroid": 3},
		},
	}
	for _, e := range tuning.Check(spec) {
		fmt.Println(e)
	}
	delete(spec.TuneConfig.SchedulerConfig, "grace_peroid")
	settings, err := tuning.Parse(spec)
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := settings.Scheduler.New()
	fmt.Printf("%T %v\n", s, err)
	// Output:
	// tune_config.scheduler.grace_peroid: unknown key, did you mean "grace_period"?
	// *sched.ASHA <nil>
}
