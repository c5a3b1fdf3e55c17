package sched_test

import (
	"encoding/json"
	"fmt"

	"github.com/tunejet/tunejet/internal/sched"
)

// A controller feeds results in log order and publishes the decisions;
// the state it snapshots restores into a fresh scheduler.
func ExampleASHA() {
	cfg := sched.DefaultASHAConfig()
	cfg.Objective = sched.Objective{Metric: "acc", Mode: sched.Max}
	cfg.MaxT, cfg.ReductionFactor = 10, 2 // rungs 8, 4, 2, 1
	asha, err := sched.NewASHA(cfg)
	if err != nil {
		panic(err)
	}
	for _, r := range []struct {
		trial string
		acc   float64
	}{{"t1", 0.2}, {"t2", 0.4}, {"t3", 0.1}} {
		asha.Add(r.trial, nil)
		res := sched.Result{Trial: r.trial, Metrics: map[string]float64{"training_iteration": 1, "acc": r.acc}}
		d := asha.Result(res, sched.Context{})[0]
		fmt.Printf("%s %s: %s\n", d.Trial, d.Action, d.Reason)
	}
	state, _ := json.Marshal(asha)
	restored, _ := sched.NewASHA(cfg)
	if err := json.Unmarshal(state, restored); err != nil {
		panic(err)
	}
	fmt.Println(string(state))
	// Output:
	// t1 continue: first at rung 1 (training_iteration 1): 0.2 recorded
	// t2 continue: passed rung 1 (training_iteration 1): 0.4 >= cutoff 0.2, the 50th percentile of 1 other trial's rewards [0.2]
	// t3 stop: stopped at rung 1 (training_iteration 1): 0.1 < cutoff 0.3, the 50th percentile of 2 other trials' rewards [0.2 0.4]
	// {"brackets":[{"rungs":[{"milestone":8,"recorded":{}},{"milestone":4,"recorded":{}},{"milestone":2,"recorded":{}},{"milestone":1,"recorded":{"t1":0.2,"t2":0.4,"t3":0.1}}]}],"trials":{"t1":0,"t2":0,"t3":0}}
}
