package storage

// A trial's result files, in Ray Tune's formats. The syncer stages them
// locally, appending as results and failures arrive, and uploads them
// whole; after a restart it cuts the stored copies back to what its
// snapshot counted (the Cut functions) and appends from there.

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tunejet/tunejet/events"
)

// The files of a trial directory that tunejet writes besides checkpoints.
const (
	ResultFile   = "result.json"  // one JSON object per result and line
	ProgressFile = "progress.csv" // one CSV row per result
	ErrorFile    = "error.txt"    // one "Failure # N" entry per failure
	ParamsFile   = "params.json"  // the trial's config
)

// ResultFiles are the files that grow while a trial runs, in the order
// they are staged and uploaded.
var ResultFiles = []string{ResultFile, ProgressFile, ErrorFile}

// AppendResultLine appends a result.json line: the result with the trial's
// config under "config" (replacing any "config" the result has), as
// json.Marshal writes the merged map (keys sorted), and a newline. Ray
// writes the same object with json.dump (see testdata/ray). It runs for
// every report, so it writes the line directly instead of copying the
// result into a new map.
func AppendResultLine(dst []byte, result, config map[string]any) ([]byte, error) {
	keys := make([]string, 0, len(result)+1)
	for k := range result {
		if k != "config" {
			keys = append(keys, k)
		}
	}
	keys = append(keys, "config")
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = events.AppendJSON(dst, k); err != nil {
			return dst, err
		}
		dst = append(dst, ':')
		var v any = config
		if k != "config" {
			v = result[k]
		}
		if dst, err = events.AppendJSON(dst, v); err != nil {
			return dst, err
		}
	}
	return append(dst, '}', '\n'), nil
}

// Progress writes a trial's progress.csv rows. As in Ray's CSV logger the
// columns are fixed by the first row: the result flattened (Flatten),
// without config; later rows leave out keys that are not columns and
// leave a column empty when their result lacks it. Columns are sorted, and
// a value is written as JSON without quotes (a string as it is, null
// empty), quoted as encoding/csv quotes.
type Progress struct {
	// Header is the file's columns; nil until the first row is written
	// (or set from a stored file, see CutProgress).
	Header  []string
	scratch []byte
}

// AppendRow appends the row of result to dst, preceded by the header when
// the file has none yet.
func (p *Progress) AppendRow(dst []byte, result map[string]any) []byte {
	if _, ok := result["config"]; ok { // rare: Ray's results carry it, tunejet's only when reported
		result = maps.Clone(result)
		delete(result, "config")
	}
	flat := result
	for _, v := range result {
		if _, ok := v.(map[string]any); ok {
			flat = Flatten(result)
			break
		}
	}
	if p.Header == nil {
		p.Header = slices.Sorted(maps.Keys(flat))
		for i, k := range p.Header {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCSVField(dst, k)
		}
		dst = append(dst, '\n')
	}
	for i, k := range p.Header {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = p.appendValue(dst, flat[k])
	}
	return append(dst, '\n')
}

func (p *Progress) appendValue(dst []byte, v any) []byte {
	switch x := v.(type) {
	case string:
		return appendCSVField(dst, x)
	case nil:
		return dst
	}
	b, err := events.AppendJSON(p.scratch[:0], v)
	if err != nil {
		return appendCSVField(dst, fmt.Sprint(v))
	}
	p.scratch = b
	return appendCSVBytes(dst, bytes.Trim(b, `"`))
}

// Flatten turns nested maps into "a/b" keys, as Ray's flatten_dict with
// the "/" delimiter does for progress.csv columns and stop criteria.
func Flatten(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+"/", sub)
				continue
			}
			out[prefix+k] = v
		}
	}
	walk("", m)
	return out
}

// appendCSVBytes is appendCSVField for a field that is plain most of the
// time (a number): written as it is unless it needs quotes.
func appendCSVBytes(dst, field []byte) []byte {
	if !csvNeedsQuotes(string(field)) { // no allocation: the conversion does not escape
		return append(dst, field...)
	}
	return appendCSVField(dst, string(field))
}

// appendCSVField writes one field as encoding/csv's Writer does (comma
// separator, "\n" line ends).
func appendCSVField(dst []byte, field string) []byte {
	if !csvNeedsQuotes(field) {
		return append(dst, field...)
	}
	dst = append(dst, '"')
	for i := 0; i < len(field); i++ {
		if field[i] == '"' {
			dst = append(dst, '"')
		}
		dst = append(dst, field[i])
	}
	return append(dst, '"')
}

// csvNeedsQuotes is encoding/csv's Writer.fieldNeedsQuotes for a comma.
func csvNeedsQuotes(field string) bool {
	if field == "" {
		return false
	}
	if field == `\.` {
		return true
	}
	for i := 0; i < len(field); i++ {
		if c := field[i]; c == '\n' || c == '\r' || c == '"' || c == ',' {
			return true
		}
	}
	r1, _ := utf8.DecodeRuneInString(field)
	return unicode.IsSpace(r1)
}

// failurePrefix starts each error.txt entry.
const failurePrefix = "Failure # "

// AppendFailure appends the error.txt entry of a trial's n-th failure, as
// Ray's Trial.handle_error writes it: "Failure # N (occurred at
// <date>)", then the error and a newline. The date is at in its own
// location (Ray writes the driver's local time).
func AppendFailure(dst []byte, n int, at time.Time, msg string) []byte {
	dst = fmt.Appendf(dst, "%s%d (occurred at %s)\n", failurePrefix, n, at.Format("2006-01-02_15-04-05"))
	dst = append(dst, msg...)
	return append(dst, '\n')
}

// Params is a trial's params.json: its config indented by two spaces with
// sorted keys, as Ray's JSON logger writes it, and a newline.
func Params(config map[string]any) ([]byte, error) {
	b, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("storage: %s: %w", ParamsFile, err)
	}
	return append(b, '\n'), nil
}

// CutResults keeps the first n complete lines of a result.json and says
// how many it kept.
func CutResults(data []byte, n int) ([]byte, int) {
	end, kept := 0, 0
	for ; kept < n; kept++ {
		j := bytes.IndexByte(data[end:], '\n')
		if j < 0 {
			break
		}
		end += j + 1
	}
	return data[:end], kept
}

// CutProgress keeps the header and the first n records of a progress.csv,
// and returns the header (nil for a file without one). The kept part is
// written anew with "\n" line ends, whatever the file had.
func CutProgress(data []byte, n int) ([]byte, []string) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil {
		return nil, nil
	}
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	_ = cw.Write(header)
	for i := 0; i < n; i++ {
		rec, err := r.Read()
		if err != nil {
			break
		}
		_ = cw.Write(rec)
	}
	cw.Flush()
	return buf.Bytes(), header
}

// CutErrors keeps the first n entries of an error.txt and says how many
// it kept. An entry starts at a line beginning with "Failure # "; an
// error message may span lines.
func CutErrors(data []byte, n int) ([]byte, int) {
	var out bytes.Buffer
	count := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, failurePrefix) {
			if count == n {
				break
			}
			count++
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return out.Bytes(), count
}
