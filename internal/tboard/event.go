package tboard

import (
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of tensorflow's Event and Summary messages
// (tensorflow/core/util/event.proto, tensorflow/core/framework/summary.proto).
const (
	eventWallTime       protowire.Number = 1 // double
	eventStep           protowire.Number = 2 // int64
	eventFileVersion    protowire.Number = 3 // string
	eventSummary        protowire.Number = 5 // Summary
	eventSourceMetadata protowire.Number = 10
	sourceWriter        protowire.Number = 1 // SourceMetadata.writer

	summaryValue     protowire.Number = 1 // repeated Summary.Value
	valueTag         protowire.Number = 1
	valueSimpleValue protowire.Number = 2 // float
	valueMetadata    protowire.Number = 9 // SummaryMetadata
	metadataPlugin   protowire.Number = 1 // SummaryMetadata.plugin_data
	pluginName       protowire.Number = 1
	pluginContent    protowire.Number = 2
	fileVersion                       = "brain.Event:2"
	writer                            = "tunejet" // SourceMetadata.writer of the files this package writes
	hparamsTagPrefix                  = "_hparams_/"
)

// Field numbers of the HParams plugin's messages
// (tensorboard/plugins/hparams/plugin_data.proto and api.proto) and of
// google.protobuf.Value.
const (
	pluginDataExperiment   protowire.Number = 2
	pluginDataSessionStart protowire.Number = 3
	pluginDataSessionEnd   protowire.Number = 4
	experimentHParamInfos  protowire.Number = 4
	experimentMetricInfos  protowire.Number = 5
	hparamInfoName         protowire.Number = 1
	hparamInfoType         protowire.Number = 4
	metricInfoName         protowire.Number = 1 // MetricName
	metricNameTag          protowire.Number = 2
	sessionStartHParams    protowire.Number = 1 // map<string, google.protobuf.Value>
	sessionEndStatus       protowire.Number = 1
	valueNumber            protowire.Number = 2 // google.protobuf.Value.number_value
	valueString            protowire.Number = 3
	valueBool              protowire.Number = 4

	dataTypeString  = 1
	dataTypeBool    = 2
	dataTypeFloat64 = 3
	statusSuccess   = 1
)

// AppendStart appends the file's first record: the event naming the
// file's version, as every writer of event files starts, and tunejet as
// its writer (see Ours).
func AppendStart(dst []byte, wallTime float64) []byte {
	ev := appendEventHead(nil, wallTime, 0)
	ev = protowire.AppendTag(ev, eventFileVersion, protowire.BytesType)
	ev = protowire.AppendString(ev, fileVersion)
	src := protowire.AppendTag(nil, sourceWriter, protowire.BytesType)
	src = protowire.AppendString(src, writer)
	ev = appendMessage(ev, eventSourceMetadata, src)
	return appendRecord(dst, ev)
}

// AppendResult appends one result's record: an event at step holding
// each scalar as a simple value (a float32, as in every writer). A result
// with no scalars still gets its record, so a file holds one per result.
func AppendResult(dst []byte, wallTime float64, step int64, scalars []Scalar) []byte {
	var sum []byte
	for _, s := range scalars {
		v := protowire.AppendTag(nil, valueTag, protowire.BytesType)
		v = protowire.AppendString(v, s.Tag)
		v = protowire.AppendTag(v, valueSimpleValue, protowire.Fixed32Type)
		v = protowire.AppendFixed32(v, math.Float32bits(float32(s.Value)))
		sum = appendMessage(sum, summaryValue, v)
	}
	ev := appendEventHead(nil, wallTime, step)
	ev = appendMessage(ev, eventSummary, sum)
	return appendRecord(dst, ev)
}

// AppendHParams appends the three records Ray's logger writes when a
// trial ends (tensorboardX's summary.hparams): the experiment (each
// hyperparameter's name and type, each metric's tag), the session's start
// (the values) and its end (success, as tensorboardX always says). params
// are the trial's evaluated params; values that are neither a string, a
// bool nor a number are left out (tensorboardX takes no others), and
// nulls too. metrics are the tags of the trial's last scalars. Without
// params it appends nothing, as Ray.
func AppendHParams(dst []byte, wallTime float64, params map[string]any, metrics []string) []byte {
	if len(params) == 0 {
		return dst
	}
	var infos, start []byte
	for _, k := range sortedKeys(params) {
		val, typ := hparamValue(params[k])
		if typ == 0 {
			continue
		}
		info := protowire.AppendTag(nil, hparamInfoName, protowire.BytesType)
		info = protowire.AppendString(info, k)
		info = protowire.AppendTag(info, hparamInfoType, protowire.VarintType)
		info = protowire.AppendVarint(info, typ)
		infos = appendMessage(infos, experimentHParamInfos, info)
		entry := protowire.AppendTag(nil, 1, protowire.BytesType)
		entry = protowire.AppendString(entry, k)
		entry = appendMessage(entry, 2, val)
		start = appendMessage(start, sessionStartHParams, entry)
	}
	for _, m := range metrics {
		name := protowire.AppendTag(nil, metricNameTag, protowire.BytesType)
		name = protowire.AppendString(name, m)
		infos = appendMessage(infos, experimentMetricInfos, appendMessage(nil, metricInfoName, name))
	}
	end := protowire.AppendTag(nil, sessionEndStatus, protowire.VarintType)
	end = protowire.AppendVarint(end, statusSuccess)
	dst = appendPluginEvent(dst, wallTime, "experiment", pluginDataExperiment, infos)
	dst = appendPluginEvent(dst, wallTime, "session_start_info", pluginDataSessionStart, start)
	return appendPluginEvent(dst, wallTime, "session_end_info", pluginDataSessionEnd, end)
}

// hparamValue encodes v as a google.protobuf.Value with its HParams data
// type; typ 0 leaves it out.
func hparamValue(v any) (val []byte, typ uint64) {
	switch x := v.(type) {
	case string:
		val = protowire.AppendTag(nil, valueString, protowire.BytesType)
		return protowire.AppendString(val, x), dataTypeString
	case bool:
		val = protowire.AppendTag(nil, valueBool, protowire.VarintType)
		return protowire.AppendVarint(val, protowire.EncodeBool(x)), dataTypeBool
	}
	f, ok := number(v)
	if !ok {
		return nil, 0
	}
	val = protowire.AppendTag(nil, valueNumber, protowire.Fixed64Type)
	return protowire.AppendFixed64(val, math.Float64bits(f)), dataTypeFloat64
}

// appendPluginEvent appends an event holding one HParams summary, tagged
// _hparams_/<what>, whose plugin data is an HParamsPluginData (version 0)
// with msg in its field num.
func appendPluginEvent(dst []byte, wallTime float64, what string, num protowire.Number, msg []byte) []byte {
	plugin := protowire.AppendTag(nil, pluginName, protowire.BytesType)
	plugin = protowire.AppendString(plugin, "hparams")
	plugin = protowire.AppendTag(plugin, pluginContent, protowire.BytesType)
	plugin = protowire.AppendBytes(plugin, appendMessage(nil, num, msg))
	v := protowire.AppendTag(nil, valueTag, protowire.BytesType)
	v = protowire.AppendString(v, hparamsTagPrefix+what)
	v = appendMessage(v, valueMetadata, appendMessage(nil, metadataPlugin, plugin))
	ev := appendEventHead(nil, wallTime, 0)
	ev = appendMessage(ev, eventSummary, appendMessage(nil, summaryValue, v))
	return appendRecord(dst, ev)
}

// appendEventHead appends an event's wall_time and, unless 0, its step.
func appendEventHead(dst []byte, wallTime float64, step int64) []byte {
	dst = protowire.AppendTag(dst, eventWallTime, protowire.Fixed64Type)
	dst = protowire.AppendFixed64(dst, math.Float64bits(wallTime))
	if step != 0 {
		dst = protowire.AppendTag(dst, eventStep, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(step))
	}
	return dst
}

// appendMessage appends msg as the embedded message field num.
func appendMessage(dst []byte, num protowire.Number, msg []byte) []byte {
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendBytes(dst, msg)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
