package trainproto

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzReadLine: readLineMax splits any input into the lines a plain split
// on "\n" gives, refuses the first line longer than the limit (and reads
// no more than the limit plus a buffer of it), and never returns a line
// over the limit — whatever the buffer size.
func FuzzReadLine(f *testing.F) {
	f.Add([]byte(`{"op":"report","metrics":{"loss":0.5}}`+"\n"+`{"op":"get_checkpoint"}`+"\n"), uint8(0), uint16(64))
	f.Add([]byte("a\r\nbb\n\nccc"), uint8(1), uint16(2))
	f.Add([]byte("\r"), uint8(0), uint16(0))
	f.Add(bytes.Repeat([]byte("x"), 100), uint8(3), uint16(40))
	f.Fuzz(func(t *testing.T, data []byte, bufExtra uint8, max16 uint16) {
		r := bufio.NewReaderSize(bytes.NewReader(data), 16+int(bufExtra))
		limit := int(max16)
		rest := data
		for i := 0; ; i++ {
			got, err := readLineMax(r, limit)
			if len(rest) == 0 {
				if !errors.Is(err, io.EOF) || got != nil {
					t.Fatalf("line %d: at the end of the input got %q, %v; want io.EOF", i, got, err)
				}
				return
			}
			content, after, _ := bytes.Cut(rest, []byte("\n"))
			if len(content) > limit {
				if !errors.Is(err, lineTooLongError{limit}) {
					t.Fatalf("line %d of %d bytes over the %d-byte limit: got %q, %v", i, len(content), limit, got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("line %d %q: %v", i, content, err)
			}
			if want := bytes.TrimSuffix(content, []byte("\r")); !bytes.Equal(got, want) {
				t.Fatalf("line %d: got %q, want %q", i, got, want)
			}
			rest = after
		}
	})
}

// FuzzDecodeRequest: any request line is decoded or refused with an error;
// an accepted request is valid and reads the same when encoded again.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"op":"report","metrics":{"loss":0.5,"training_iteration":3}}`,
		`{"op":"report","metrics":{},"checkpoint_dir":null}`,
		`{"op":"report","metrics":{"nested":{"a":[1,"x",true,null]}},"checkpoint_dir":"/"}`,
		`{"op":"report","metrics":{"x":1},"checkpoint_dir":"relative"}`,
		`{"op":"get_checkpoint"}`,
		`{"op":"launch"}`,
		`{"op":"report"}`,
		`[1,2]`,
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := decodeRequest(line)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("%q: an empty error", line)
			}
			return
		}
		if err := req.validate(); err != nil {
			t.Fatalf("%q: accepted a request that does not validate: %v", line, err)
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("%q: accepted a request that does not encode: %v", line, err)
		}
		again, err := decodeRequest(b)
		if err != nil {
			t.Fatalf("%q: accepted, but its encoding %s is refused: %v", line, b, err)
		}
		if diff := cmp.Diff(req, again); diff != "" {
			t.Fatalf("%q: decode, encode, decode changed the request (-first +second):\n%s", line, diff)
		}
	})
}
