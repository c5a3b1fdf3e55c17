package stopper

import "fmt"

func ExampleMarshal() {
	s := Combined(MaximumIteration(2), Timeout(60))
	s.StopTrial("t1", map[string]any{"loss": 0.5})
	b, _ := Marshal(s)
	fmt.Println(string(b))
	// Output:
	// {"type":"combined","stopper":{"stoppers":[{"type":"maximum_iteration","stopper":{"max_iter":2,"iterations":{"t1":1}}},{"type":"timeout","stopper":{"timeout":60}}]}}
}

func ExampleParse() {
	// As a YAML parser yields run_config.stoppers.
	v := []any{
		map[string]any{"type": "trial_plateau", "metric": "loss", "num_results": 2, "grace_period": 2},
		map[string]any{"type": "timeout", "timeout": 3600},
	}
	s, err := Parse("run_config.stoppers", v)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, loss := range []float64{0.9, 0.5, 0.302, 0.3} {
		fmt.Printf("%+v\n", s.StopTrial("t1", map[string]any{"loss": loss}))
	}
	fmt.Printf("%+v\n", s.StopAll(3600))

	_, err = Parse("run_config.stoppers", []any{map[string]any{"type": "trial_plateau", "metric": "loss", "std": -1}})
	fmt.Println(err)
	// Output:
	// {Stop:false Reason:}
	// {Stop:false Reason:}
	// {Stop:false Reason:}
	// {Stop:true Reason:plateau: std 0.001 of the last 2 results of loss < 0.01}
	// {Stop:true Reason:timeout: 3600 s elapsed, timeout 3600 s}
	// run_config.stoppers.0.std: must be > 0, got -1
}
