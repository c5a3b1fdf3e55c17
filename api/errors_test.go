package api_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/tunejet/tunejet/api"
)

// TestCodesCrossTheWire: an error a service classified with WithCode
// becomes, through a reply's JSON, an error that errors.Is matches against
// the same sentinel, with the service's message.
func TestCodesCrossTheWire(t *testing.T) {
	for _, code := range api.Codes() {
		t.Run(string(code), func(t *testing.T) {
			cause := fmt.Errorf("restore /x/exp: something about %s", code)
			sent := api.WithCode(code, cause)
			if !errors.Is(sent, cause) || !errors.Is(sent, code.Err()) || sent.Error() != cause.Error() {
				t.Fatalf("WithCode(%s, %v) = %v; want the cause's message, matching the cause and %v", code, cause, sent, code.Err())
			}
			if got := api.CodeOf(sent); got != code {
				t.Fatalf("CodeOf = %q, want %q", got, code)
			}
			data, err := json.Marshal(api.RestoreReply{Error: sent.Error(), Code: api.CodeOf(sent)})
			if err != nil {
				t.Fatal(err)
			}
			var rep api.RestoreReply
			if err := json.Unmarshal(data, &rep); err != nil {
				t.Fatal(err)
			}
			got := rep.Err()
			if !errors.Is(got, code.Err()) || got.Error() != cause.Error() {
				t.Errorf("reply error %v; want %q matching %v", got, cause, code.Err())
			}
			for _, other := range api.Codes() {
				if other != code && errors.Is(got, other.Err()) {
					t.Errorf("reply error of %s matches %s too", code, other)
				}
			}
			var ae *api.Error
			if !errors.As(got, &ae) || ae.Code != code {
				t.Errorf("reply error %#v; want an *api.Error of code %s", got, code)
			}
		})
	}
}

func TestCodeOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want api.Code
	}{
		{"nil", nil, ""},
		{"unclassified", errors.New("nats: timeout"), api.CodeInternal},
		{"wrapped", fmt.Errorf("restore: %w", api.WithCode(api.CodeNoState, errors.New("nothing"))), api.CodeNoState},
		{"sentinel", fmt.Errorf("%w: x", api.ErrParamSpaceDiffers), api.CodeParamSpaceDiffers},
	}
	for _, tt := range tests {
		if got := api.CodeOf(tt.err); got != tt.want {
			t.Errorf("%s: CodeOf(%v) = %q, want %q", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestReplyErr(t *testing.T) {
	if err := (api.RestoreReply{OK: true}).Err(); err != nil {
		t.Errorf("OK reply: %v", err)
	}
	// An older restorer refused without a code; a newer one may send a
	// code this version does not know: both stay errors with their message.
	for _, code := range []api.Code{"", "from_the_future"} {
		err := api.RestoreReply{Error: "refused", Code: code}.Err()
		if err == nil || err.Error() != "refused" {
			t.Errorf("code %q: %v, want the message", code, err)
		}
	}
	if err := (api.RestoreReply{Error: "refused"}).Err(); !errors.Is(err, api.ErrInternal) {
		t.Errorf("no code: %v, want ErrInternal", err)
	}
}
