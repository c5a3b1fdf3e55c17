package restore

import (
	"errors"
	"testing"

	"github.com/tunejet/tunejet/events"
)

func TestDescribe(t *testing.T) {
	tests := []struct {
		name string
		in   events.Trainable
		want string
	}{
		{"Go trainable", events.Trainable{Name: "objective"}, `the Go trainable registered as "objective"`},
		{"plain command", events.Trainable{Name: "x", Command: []string{"python", "train.py", "--lr=0.1"}}, "command python train.py --lr=0.1"},
		{"quoted arguments", events.Trainable{Command: []string{"/bin/sh", "-c", `touch "$HOME/x"; echo it's`, ""}},
			`command /bin/sh -c 'touch "$HOME/x"; echo it'\''s' ''`},
		{"with its folder", events.Trainable{Command: []string{"./run.sh"}, Dir: "/home/me/my exp"}, "command ./run.sh (in '/home/me/my exp')"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Describe(tc.in); got != tc.want {
				t.Errorf("Describe(%+v) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestCheckTrainableIsMatchable(t *testing.T) {
	tests := []struct {
		name        string
		saved, got  events.Trainable
		wantRefused bool
	}{
		{"same name", events.Trainable{Name: "f"}, events.Trainable{Name: "f"}, false},
		{"same command, other folder and name", events.Trainable{Name: "a", Command: []string{"sh", "t.sh"}, Dir: "/a"}, events.Trainable{Command: []string{"sh", "t.sh"}, Dir: "/b"}, false},
		{"other command", events.Trainable{Command: []string{"sh", "t.sh"}}, events.Trainable{Command: []string{"sh", "u.sh"}}, true},
		{"a command instead of a Go trainable", events.Trainable{Name: "f"}, events.Trainable{Name: "f", Command: []string{"sh", "-c", "f"}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTrainable(tc.saved, tc.got)
			if refused := err != nil; refused != tc.wantRefused || (refused && !errors.Is(err, ErrTrainableMismatch)) {
				t.Errorf("CheckTrainable(%+v, %+v) = %v; want refused %v, matching ErrTrainableMismatch", tc.saved, tc.got, err, tc.wantRefused)
			}
		})
	}
}
