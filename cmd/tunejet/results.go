package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tunejet/tunejet/internal/show"
	"github.com/tunejet/tunejet/tune"
)

func newResultsCmd() *cobra.Command {
	var metric, mode, scope, downloadBest string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "results PATH",
		Short: "Print the results of an experiment from its storage directory",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := tune.LoadResults(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			for _, why := range g.Skipped {
				fmt.Fprintf(os.Stderr, "Skipped %s\nResults from the newest readable state file, %s.\n", why, g.Snapshot)
			}
			if downloadBest != "" {
				return downloadBestCheckpoint(cmd.Context(), g, metric, mode, scope, downloadBest)
			}
			if asJSON {
				return printJSON(g, metric, mode, scope)
			}
			tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "Trial name\tstatus\titer\tfailures\tconfig\tend reason")
			for _, r := range g.Results() {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", r.TrialName, r.Status, iteration(r), r.NumFailures, show.JSON(r.Config), r.EndReason)
			}
			tw.Flush()
			if metric != "" || mode != "" {
				best, err := g.GetBestResult(metric, mode, scope)
				if err != nil {
					return err
				}
				fmt.Printf("Best trial: %s %s\n", best.TrialName, show.JSON(best.Metrics))
				return nil
			}
			fmt.Print(tune.Summary(g))
			return nil
		},
	}
	cmd.Flags().StringVar(&metric, "metric", "", "metric to pick the best trial by (default: the experiment's)")
	cmd.Flags().StringVar(&mode, "mode", "", "min or max (default: the experiment's)")
	cmd.Flags().StringVar(&scope, "scope", "last", "last, all, avg, last-5-avg or last-10-avg")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&downloadBest, "download-best", "", "download the best trial's best checkpoint into this directory")
	return cmd
}

// iteration is the trial's last training_iteration: 0 when it reported
// nothing, as in the status table.
func iteration(r tune.Result) string {
	if r.Metrics["training_iteration"] == nil {
		return "0"
	}
	return show.Cell(r.Metrics["training_iteration"])
}

type jsonResult struct {
	TrialID     string         `json:"trial_id"`
	TrialName   string         `json:"trial_name"`
	Status      string         `json:"status"`
	Config      map[string]any `json:"config"`
	Metrics     map[string]any `json:"metrics"`
	Error       string         `json:"error,omitempty"`
	Path        string         `json:"path"`
	NumFailures int            `json:"num_failures"`
	EndReason   string         `json:"end_reason,omitempty"`
	Checkpoint  string         `json:"checkpoint,omitempty"`
	Best        []string       `json:"best_checkpoints,omitempty"`
}

func printJSON(g *tune.ResultGrid, metric, mode, scope string) error {
	out := struct {
		ExperimentPath string       `json:"experiment_path"`
		Trials         []jsonResult `json:"trials"`
		Best           string       `json:"best_trial_id,omitempty"`
		ParetoFront    []string     `json:"pareto_front,omitzero"`
	}{ExperimentPath: g.ExperimentPath}
	for _, r := range g.ParetoFront() {
		out.ParetoFront = append(out.ParetoFront, r.TrialID)
	}
	if g.Objectives() != nil && out.ParetoFront == nil {
		out.ParetoFront = []string{} // several metrics: the front, even when empty
	}
	for _, r := range g.Results() {
		jr := jsonResult{TrialID: r.TrialID, TrialName: r.TrialName, Status: r.Status, Config: r.Config, Metrics: r.Metrics, Path: r.Path, NumFailures: r.NumFailures, EndReason: r.EndReason}
		if r.Error != nil {
			jr.Error = r.Error.Error()
		}
		if r.Checkpoint != nil {
			jr.Checkpoint = r.Checkpoint.Path
		}
		for _, c := range r.BestCheckpoints {
			jr.Best = append(jr.Best, c.Path)
		}
		out.Trials = append(out.Trials, jr)
	}
	if best, err := g.GetBestResult(metric, mode, scope); err == nil {
		out.Best = best.TrialID
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// downloadBestCheckpoint fetches the best trial's best checkpoint (its
// latest when no score attribute ranks them) into dir.
func downloadBestCheckpoint(ctx context.Context, g *tune.ResultGrid, metric, mode, scope, dir string) error {
	best, err := g.GetBestResult(metric, mode, scope)
	if err != nil {
		return err
	}
	if len(best.BestCheckpoints) == 0 {
		return fmt.Errorf("the best trial %s has no checkpoint", best.TrialName)
	}
	c := best.BestCheckpoints[len(best.BestCheckpoints)-1]
	if err := c.Download(ctx, dir); err != nil {
		return err
	}
	fmt.Printf("Downloaded %s of trial %s to %s\n", c.Name, best.TrialName, dir)
	return nil
}
