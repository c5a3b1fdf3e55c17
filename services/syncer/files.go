package syncer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tunejet/tunejet/internal/state"
	"github.com/tunejet/tunejet/internal/storage"
)

// The result files of a trial, staged locally and uploaded whole on sync.
var resultFiles = []string{"result.json", "progress.csv", "error.txt"}

// trialFiles is a trial's staged result files, kept open behind buffers
// while the trial runs.
type trialFiles struct {
	dir       string   // local staging directory of the trial
	rows      int      // results in result.json
	failures  int      // entries in error.txt
	csvHeader []string // progress.csv columns
	open      map[string]*appender
}

// appender is an open staged file.
type appender struct {
	f *os.File
	w *bufio.Writer
}

// append adds data to a staged file, opening it on first use.
func (f *trialFiles) append(name string, data []byte) error {
	if f.open == nil {
		f.open = map[string]*appender{}
	}
	a := f.open[name]
	if a == nil {
		fh, err := os.OpenFile(filepath.Join(f.dir, name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("stage %s: %w", name, err)
		}
		a = &appender{f: fh, w: bufio.NewWriterSize(fh, 64<<10)}
		f.open[name] = a
	}
	if _, err := a.w.Write(data); err != nil {
		return fmt.Errorf("stage %s: %w", name, err)
	}
	return nil
}

// flush writes the buffers out, so the files can be uploaded.
func (f *trialFiles) flush() error {
	for name, a := range f.open {
		if err := a.w.Flush(); err != nil {
			return fmt.Errorf("stage %s: %w", name, err)
		}
	}
	return nil
}

// close flushes and closes the open files.
func (f *trialFiles) close() error {
	err := f.flush()
	for _, a := range f.open {
		if cerr := a.f.Close(); err == nil {
			err = cerr
		}
	}
	f.open = nil
	return err
}

// filesOf returns the trial's staged files, preparing them on first use:
// the stored copies are downloaded and cut to rows results and failures
// entries — what the fold had counted before the event being staged — so
// lines stored after the last durable snapshot are written once more, and
// only once.
func (w *writer) filesOf(ctx context.Context, t *state.Trial, rows, failures int) (*trialFiles, error) {
	if f := w.files[t.ID]; f != nil {
		return f, nil
	}
	f := &trialFiles{dir: filepath.Join(w.stage, t.DirName)}
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return nil, fmt.Errorf("staging for %s: %w", t.ID, err)
	}
	for _, name := range resultFiles {
		data, err := storage.ReadAll(ctx, w.bucket, t.DirName+"/"+name)
		if errors.Is(err, fs.ErrNotExist) {
			data = nil
		} else if err != nil {
			return nil, err
		}
		var keep []byte
		switch name {
		case "result.json":
			keep = firstLines(data, rows)
			f.rows = bytes.Count(keep, []byte("\n"))
		case "progress.csv":
			keep, f.csvHeader = firstRecords(data, rows)
		case "error.txt":
			keep, f.failures = firstEntries(data, failures)
		}
		if err := os.WriteFile(filepath.Join(f.dir, name), keep, 0o644); err != nil {
			return nil, fmt.Errorf("staging for %s: %w", t.ID, err)
		}
	}
	w.files[t.ID] = f
	return f, nil
}

// appendResult stages the trial's newest result as a result.json line and
// a progress.csv row.
func (w *writer) appendResult(ctx context.Context, t *state.Trial) error {
	f, err := w.filesOf(ctx, t, t.NumResults-1, t.NumFailures)
	if err != nil {
		return err
	}
	if t.NumResults <= f.rows {
		return nil
	}
	row := maps.Clone(t.LastResult)
	row["config"] = t.Config
	line, err := json.Marshal(row)
	if err != nil {
		return fmt.Errorf("result of %s: %w", t.ID, err)
	}
	if err := f.append("result.json", append(line, '\n')); err != nil {
		return err
	}
	f.rows = t.NumResults
	w.changed[t.ID] = true
	return f.append("progress.csv", csvRow(f, t.LastResult))
}

// csvRow formats a progress.csv row; the columns are the first result's
// (flattened, without config), as Ray's CSV logger does.
func csvRow(f *trialFiles, result map[string]any) []byte {
	flat := flatten(result)
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	if f.csvHeader == nil {
		f.csvHeader = slices.Sorted(maps.Keys(flat))
		_ = cw.Write(f.csvHeader)
	}
	rec := make([]string, len(f.csvHeader))
	for i, k := range f.csvHeader {
		if v, ok := flat[k]; ok {
			rec[i] = csvValue(v)
		}
	}
	_ = cw.Write(rec)
	cw.Flush()
	return buf.Bytes()
}

const failurePrefix = "Failure # "

// appendFailure stages Ray's "Failure # N (occurred at <date>)" entry.
func (w *writer) appendFailure(ctx context.Context, t *state.Trial, at time.Time) error {
	f, err := w.filesOf(ctx, t, t.NumResults, t.NumFailures-1)
	if err != nil {
		return err
	}
	if t.NumFailures <= f.failures {
		return nil
	}
	entry := fmt.Sprintf("%s%d (occurred at %s)\n%s\n", failurePrefix, t.NumFailures, at.Local().Format("2006-01-02_15-04-05"), t.LastError)
	if err := f.append("error.txt", []byte(entry)); err != nil {
		return err
	}
	f.failures = t.NumFailures
	w.changed[t.ID] = true
	return nil
}

// firstLines keeps the first n complete lines.
func firstLines(data []byte, n int) []byte {
	end := 0
	for i := 0; i < n; i++ {
		j := bytes.IndexByte(data[end:], '\n')
		if j < 0 {
			break
		}
		end += j + 1
	}
	return data[:end]
}

// firstRecords keeps the CSV header and the first n records, and returns
// the header.
func firstRecords(data []byte, n int) ([]byte, []string) {
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

// firstEntries keeps the first n "Failure # " entries of error.txt and
// says how many it kept. An entry starts at a line beginning with the
// prefix.
func firstEntries(data []byte, n int) ([]byte, int) {
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

func flatten(m map[string]any) map[string]any {
	out := map[string]any{}
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

func csvValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.Trim(string(b), `"`)
}
