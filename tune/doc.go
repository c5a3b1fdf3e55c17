// Package tune is tunejet's Go API: Ray Tune's Tuner, rebuilt on NATS
// JetStream.
//
// # Overview
//
// Write a trainable — a function that trains with a config and reports
// results with Report — give it a param space, and call Fit:
//
//	tuner, err := tune.NewTuner(train,
//		tune.WithParamSpace(tune.ParamSpace{"lr": tune.LogUniform(1e-4, 1e-1)}),
//		tune.WithTuneConfig(tune.TuneConfig{NumSamples: 8, Metric: "loss", Mode: "min"}),
//	)
//	results, err := tuner.Fit(ctx)
//	best, err := results.GetBestResult("", "", "last")
//
// With no NATS URL, Fit starts an embedded nats-server with JetStream and
// the controller, a runner and the syncer in this process: nothing to
// install. With WithNATS, Fit only submits the experiment to a deployment
// and watches it; the deployment's runners must have the trainable
// registered under the same name.
//
// # Errors
//
// A failing trial does not make Fit fail (as in Ray, the errors are in the
// ResultGrid), except with fail_fast "raise". Invalid configuration is
// reported before anything starts, wrapping ErrInvalidConfig.
//
// A restore that is refused, or finds nothing to restore, fails with an
// error matching ErrCannotRestore and the reason — ErrNoState,
// ErrTrainableDiffers, ErrTrainableRequired, ErrParamSpaceDiffers,
// ErrBadRequest, ErrStateInvalid, ErrCheckpointLost, ErrRunning — with errors.Is,
// whether tune or the restorer found it: the restorer's refusals cross
// the wire as codes (package api, docs/api.md).
//
// # Testing
//
// Package tune/tunetest runs the whole stack in a test's process, for
// tests of code that tunes. Nothing in this package's API needs one of
// tunejet's internal packages.
package tune
