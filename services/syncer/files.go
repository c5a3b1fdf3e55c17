package syncer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tunejet/tunejet/events"
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

// uploadFinished uploads the result files (and params.json, if still
// pending) of the trials that ended, and drops their staging: their files
// are final, so storage need not wait for the next sync, and the final
// sync at the end of the experiment has only the last trials left to
// write. One attempt, bounded by the sync timeout: what fails stays
// staged and goes with the next sync. The snapshot is left to the sync;
// files ahead of it are cut back to it if a syncer resumes from it (see
// filesOf).
func (w *writer) uploadFinished(ctx context.Context) {
	ids := w.finished
	w.finished = nil
	params, changed := map[string]bool{}, map[string]bool{}
	for _, id := range ids {
		if t := w.st.Trials[id]; t == nil || !t.Finished() {
			continue // brought back by a restore
		}
		if w.params[id] {
			params[id] = true
		}
		if w.changed[id] && w.files[id] != nil {
			changed[id] = true
		}
	}
	if len(params)+len(changed) == 0 {
		return
	}
	for id := range changed {
		if err := w.files[id].flush(); err != nil {
			w.log.Warn().Err(err).Str("trial", id).Msg("stage the files of a finished trial; the next sync writes them")
			return
		}
	}
	uctx, cancel := context.WithTimeout(ctx, w.sync.Config().SyncTimeout)
	defer cancel()
	err := parallel(uctx, uploadConcurrency, w.uploadsOf(params, changed), func(ctx context.Context, key string, data func() ([]byte, error)) error {
		b, err := data()
		if err != nil {
			return err
		}
		return storage.WriteAtomic(ctx, w.bucket, key, b)
	})
	if err != nil {
		w.log.Warn().Err(err).Msg("upload the files of finished trials; the next sync writes them")
		return
	}
	for id := range params {
		delete(w.params, id)
	}
	for id := range changed {
		delete(w.changed, id)
		_ = w.files[id].close()
		_ = os.RemoveAll(w.files[id].dir)
		delete(w.files, id)
	}
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
	line, err := appendResultLine(w.line[:0], t.LastResult, t.Config)
	if err != nil {
		return fmt.Errorf("result of %s: %w", t.ID, err)
	}
	w.line = line
	if err := f.append("result.json", line); err != nil {
		return err
	}
	f.rows = t.NumResults
	w.changed[t.ID] = true
	w.row, w.scratch = csvRow(w.row[:0], w.scratch, f, t.LastResult)
	return f.append("progress.csv", w.row)
}

// appendResultLine appends a result.json line: the result with the trial's
// config under "config", as json.Marshal writes the merged map (keys
// sorted), and a newline. It runs for every report, so it writes the line
// directly instead of copying the result into a new map.
func appendResultLine(dst []byte, result, config map[string]any) ([]byte, error) {
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

// csvRow appends a progress.csv row (and the header first, when the file
// has none); the columns are the first result's (flattened, without
// config), as Ray's CSV logger does. Quoting follows encoding/csv.
func csvRow(dst, scratch []byte, f *trialFiles, result map[string]any) (row, scratchOut []byte) {
	flat := result
	for _, v := range result {
		if _, ok := v.(map[string]any); ok {
			flat = flatten(result)
			break
		}
	}
	if f.csvHeader == nil {
		f.csvHeader = slices.Sorted(maps.Keys(flat))
		for i, k := range f.csvHeader {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCSVField(dst, k)
		}
		dst = append(dst, '\n')
	}
	for i, k := range f.csvHeader {
		if i > 0 {
			dst = append(dst, ',')
		}
		v, ok := flat[k]
		if !ok {
			continue
		}
		switch x := v.(type) {
		case string:
			dst = appendCSVField(dst, x)
		case nil:
		default:
			b, err := events.AppendJSON(scratch[:0], v)
			if err != nil {
				dst = appendCSVField(dst, fmt.Sprint(v))
				continue
			}
			scratch = b
			dst = appendCSVBytes(dst, bytes.Trim(b, `"`))
		}
	}
	return append(dst, '\n'), scratch
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
