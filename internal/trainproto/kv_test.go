package trainproto

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseKeyValues(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    map[string]any
		wantErr string
	}{
		{name: "none", args: nil, want: map[string]any{}},
		{
			name: "numbers",
			args: []string{"a=1", "b=-2.5", "c=1e-3", "d=0", "e=-0", "f=6.02E+23", "g=1e-400"},
			want: map[string]any{"a": 1.0, "b": -2.5, "c": 0.001, "d": 0.0, "e": 0.0, "f": 6.02e23, "g": 0.0},
		},
		{
			name: "literals",
			args: []string{"t=true", "f=false", "n=null"},
			want: map[string]any{"t": true, "f": false, "n": nil},
		},
		{
			name: "strings",
			args: []string{"a=abc", "b=", "c=01", "d=1.", "e=.5", "f=+1", "g=NaNa", "h=Infinite", "i= 1", "j=True", "k=0x10", "l=a=b", `m="1"`},
			want: map[string]any{"a": "abc", "b": "", "c": "01", "d": "1.", "e": ".5", "f": "+1", "g": "NaNa", "h": "Infinite", "i": " 1", "j": "True", "k": "0x10", "l": "a=b", "m": `"1"`},
		},
		{name: "flat keys", args: []string{"eval/loss=0.5", "a.b=1"}, want: map[string]any{"eval/loss": 0.5, "a.b": 1.0}},
		{name: "no equals", args: []string{"loss=1", "oops"}, wantErr: `argument "oops": want key=value`},
		{name: "empty key", args: []string{"=1"}, wantErr: `argument "=1": empty key`},
		{name: "repeated key", args: []string{"a=1", "a=2"}, wantErr: `argument "a=2": key "a" given twice`},
		{name: "infinity", args: []string{"loss=Infinity"}, wantErr: `argument "loss=Infinity": Infinity is not a number JSON can carry: report null instead (as the Python SDK sends NaN and infinities), or a finite number`},
		{name: "other non-finite spellings", args: []string{"a=1", "loss=-inf"}, wantErr: `argument "loss=-inf": -inf is not a number JSON can carry: report null instead (as the Python SDK sends NaN and infinities), or a finite number`},
		{name: "NaN", args: []string{"loss=NaN"}, wantErr: `argument "loss=NaN": NaN is not a number JSON can carry: report null instead (as the Python SDK sends NaN and infinities), or a finite number`},
		{name: "out of range", args: []string{"a=1e400"}, wantErr: `argument "a=1e400": number 1e400 is out of range`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKeyValues(tt.args)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
