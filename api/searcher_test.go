package api_test

import (
	"errors"
	"testing"

	"github.com/tunejet/tunejet/api"
)

func TestSuggestReplyErr(t *testing.T) {
	if err := (api.SuggestReply{Config: map[string]any{"x": 1}}).Err(); err != nil {
		t.Errorf("a config: %v", err)
	}
	err := api.SuggestReply{Error: "cannot parse", Code: api.CodeBadRequest}.Err()
	if !errors.Is(err, api.ErrBadRequest) || err.Error() != "cannot parse" {
		t.Errorf("bad_request: %v", err)
	}
	for _, r := range []api.SuggestReply{{}, {Config: map[string]any{"x": 1}, Error: "both"}} {
		if err := r.Err(); !errors.Is(err, api.ErrInternal) {
			t.Errorf("%+v: %v, want internal", r, err)
		}
	}
}
