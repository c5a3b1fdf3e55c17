// Package tboardtest reads TensorBoard event files for tests, on its own:
// it checks the TFRecord framing and both CRCs itself and decodes the
// tensorflow Event and Summary messages, and the HParams plugin's, with
// the Go protobuf library from descriptors of their .proto definitions
// (descriptors.go), sharing no code with the writer (internal/tboard).
package tboardtest

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Event is a decoded tensorflow Event.
type Event struct {
	WallTime    float64
	Step        int64
	FileVersion string
	Writer      string // source_metadata.writer
	Values      []Value
}

// Value is a decoded Summary.Value; an HParams summary's plugin content
// is decoded into the fields below Plugin.
type Value struct {
	Tag       string
	Simple    float32
	HasSimple bool
	Plugin    string // metadata.plugin_data.plugin_name

	HParamTypes map[string]string // experiment: each hparam's DataType
	Metrics     []string          // experiment: each metric's tag
	HParams     map[string]any    // session_start_info: float64, string or bool
	Status      string            // session_end_info
}

// Scalars are the event's simple values by tag.
func (e Event) Scalars() map[string]float32 {
	out := map[string]float32{}
	for _, v := range e.Values {
		if v.HasSimple {
			out[v.Tag] = v.Simple
		}
	}
	return out
}

// Files are the event files (events.out.tfevents.*) in dir.
func Files(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// ReadFile decodes the event file at path; any record that fails to
// decode fails the test.
func ReadFile(t testing.TB, path string) []Event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := Decode(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return evs
}

// ReadData decodes an event file's bytes; any record that fails to
// decode fails the test.
func ReadData(t testing.TB, data []byte) []Event {
	t.Helper()
	evs, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// masked is TFRecord's masked CRC-32C.
func masked(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return ((c >> 15) | (c << 17)) + 0xa282ead8
}

// Records splits data into its TFRecords' payloads, checking each
// length's and payload's CRC; it fails on anything left over.
func Records(data []byte) ([][]byte, error) {
	var out [][]byte
	for off := 0; off < len(data); {
		if len(data)-off < 12 {
			return nil, errorf("record at %d: %d bytes left, a header needs 12", off, len(data)-off)
		}
		hdr := data[off : off+8]
		if got, want := binary.LittleEndian.Uint32(data[off+8:]), masked(hdr); got != want {
			return nil, errorf("record at %d: length CRC %#x, want %#x", off, got, want)
		}
		n := int(binary.LittleEndian.Uint64(hdr))
		if len(data)-off-12 < n+4 {
			return nil, errorf("record at %d: %d bytes of data and CRC, %d left", off, n+4, len(data)-off-12)
		}
		payload := data[off+12 : off+12+n]
		if got, want := binary.LittleEndian.Uint32(data[off+12+n:]), masked(payload); got != want {
			return nil, errorf("record at %d: data CRC %#x, want %#x", off, got, want)
		}
		out = append(out, payload)
		off += 16 + n
	}
	return out, nil
}

// Decode decodes every record of an event file.
func Decode(data []byte) ([]Event, error) {
	recs, err := Records(data)
	if err != nil {
		return nil, err
	}
	out := make([]Event, 0, len(recs))
	for i, rec := range recs {
		m := dynamicpb.NewMessage(messages.event)
		if err := proto.Unmarshal(rec, m); err != nil {
			return nil, errorf("record %d: %v", i, err)
		}
		ev, err := event(m)
		if err != nil {
			return nil, errorf("record %d: %v", i, err)
		}
		out = append(out, ev)
	}
	return out, nil
}

func event(m protoreflect.Message) (Event, error) {
	ev := Event{
		WallTime:    get(m, "wall_time").Float(),
		Step:        get(m, "step").Int(),
		FileVersion: get(m, "file_version").String(),
		Writer:      get(get(m, "source_metadata").Message(), "writer").String(),
	}
	vals := get(get(m, "summary").Message(), "value").List()
	for i := range vals.Len() {
		v, err := value(vals.Get(i).Message())
		if err != nil {
			return ev, err
		}
		ev.Values = append(ev.Values, v)
	}
	return ev, nil
}

func value(m protoreflect.Message) (Value, error) {
	v := Value{Tag: get(m, "tag").String()}
	if f := field(m, "simple_value"); m.Has(f) {
		v.Simple, v.HasSimple = float32(m.Get(f).Float()), true
	}
	plugin := get(get(m, "metadata").Message(), "plugin_data").Message()
	v.Plugin = get(plugin, "plugin_name").String()
	if v.Plugin != "hparams" {
		return v, nil
	}
	data := dynamicpb.NewMessage(messages.pluginData)
	if err := proto.Unmarshal(get(plugin, "content").Bytes(), data); err != nil {
		return v, errorf("hparams content of %s: %v", v.Tag, err)
	}
	if f := field(data, "experiment"); data.Has(f) {
		exp := data.Get(f).Message()
		v.HParamTypes = map[string]string{}
		infos := get(exp, "hparam_infos").List()
		for i := range infos.Len() {
			info := infos.Get(i).Message()
			typ := field(info, "type")
			v.HParamTypes[get(info, "name").String()] = string(typ.Enum().Values().ByNumber(info.Get(typ).Enum()).Name())
		}
		metrics := get(exp, "metric_infos").List()
		for i := range metrics.Len() {
			v.Metrics = append(v.Metrics, get(get(metrics.Get(i).Message(), "name").Message(), "tag").String())
		}
	}
	if f := field(data, "session_start_info"); data.Has(f) {
		v.HParams = map[string]any{}
		get(data.Get(f).Message(), "hparams").Map().Range(func(k protoreflect.MapKey, val protoreflect.Value) bool {
			v.HParams[k.String()] = structValue(val.Message())
			return true
		})
	}
	if f := field(data, "session_end_info"); data.Has(f) {
		end := data.Get(f).Message()
		st := field(end, "status")
		v.Status = string(st.Enum().Values().ByNumber(end.Get(st).Enum()).Name())
	}
	return v, nil
}

// structValue reads a google.protobuf.Value's number, string or bool.
func structValue(m protoreflect.Message) any {
	od := m.Descriptor().Oneofs().ByName("kind")
	f := m.WhichOneof(od)
	if f == nil {
		return nil
	}
	switch f.Name() {
	case "number_value":
		return m.Get(f).Float()
	case "string_value":
		return m.Get(f).String()
	case "bool_value":
		return m.Get(f).Bool()
	}
	return "unexpected " + string(f.Name())
}

func field(m protoreflect.Message, name string) protoreflect.FieldDescriptor {
	f := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if f == nil {
		panic("tboardtest: no field " + name + " in " + string(m.Descriptor().FullName()))
	}
	return f
}

func get(m protoreflect.Message, name string) protoreflect.Value {
	return m.Get(field(m, name))
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("tboardtest: "+format, args...)
}
