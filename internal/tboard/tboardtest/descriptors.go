package tboardtest

import (
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	_ "google.golang.org/protobuf/types/known/structpb" // google/protobuf/struct.proto, which the HParams messages use
)

// tensorflowProto holds, as a FileDescriptorProto, the messages of
// tensorflow/core/util/event.proto and tensorflow/core/framework/summary.proto
// that an event file of scalars and hparams uses, with their field
// numbers; the rest of those files is left out.
const tensorflowProto = `
name: "tboardtest/tensorflow.proto" package: "tensorflow" syntax: "proto3"
message_type {
  name: "Event"
  field { name: "wall_time" number: 1 label: LABEL_OPTIONAL type: TYPE_DOUBLE }
  field { name: "step" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "file_version" number: 3 label: LABEL_OPTIONAL type: TYPE_STRING oneof_index: 0 }
  field { name: "graph_def" number: 4 label: LABEL_OPTIONAL type: TYPE_BYTES oneof_index: 0 }
  field { name: "summary" number: 5 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".tensorflow.Summary" oneof_index: 0 }
  field { name: "meta_graph_def" number: 9 label: LABEL_OPTIONAL type: TYPE_BYTES oneof_index: 0 }
  field { name: "source_metadata" number: 10 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".tensorflow.SourceMetadata" }
  oneof_decl { name: "what" }
}
message_type {
  name: "SourceMetadata"
  field { name: "writer" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
}
message_type {
  name: "SummaryMetadata"
  field { name: "plugin_data" number: 1 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".tensorflow.SummaryMetadata.PluginData" }
  field { name: "display_name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "summary_description" number: 3 label: LABEL_OPTIONAL type: TYPE_STRING }
  nested_type {
    name: "PluginData"
    field { name: "plugin_name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "content" number: 2 label: LABEL_OPTIONAL type: TYPE_BYTES }
  }
}
message_type {
  name: "Summary"
  field { name: "value" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".tensorflow.Summary.Value" }
  nested_type {
    name: "Value"
    field { name: "node_name" number: 7 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "tag" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "metadata" number: 9 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".tensorflow.SummaryMetadata" }
    field { name: "simple_value" number: 2 label: LABEL_OPTIONAL type: TYPE_FLOAT oneof_index: 0 }
    field { name: "obsolete_old_style_histogram" number: 3 label: LABEL_OPTIONAL type: TYPE_BYTES oneof_index: 0 }
    oneof_decl { name: "value" }
  }
}
`

// hparamsProto holds the messages of tensorboard/plugins/hparams/plugin_data.proto
// and api.proto that the HParams plugin's summaries carry.
const hparamsProto = `
name: "tboardtest/hparams.proto" package: "tensorboard.hparams" syntax: "proto3"
dependency: "google/protobuf/struct.proto"
message_type {
  name: "HParamsPluginData"
  field { name: "version" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "experiment" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".tensorboard.hparams.Experiment" oneof_index: 0 }
  field { name: "session_start_info" number: 3 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".tensorboard.hparams.SessionStartInfo" oneof_index: 0 }
  field { name: "session_end_info" number: 4 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".tensorboard.hparams.SessionEndInfo" oneof_index: 0 }
  oneof_decl { name: "data" }
}
message_type {
  name: "SessionStartInfo"
  field { name: "hparams" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".tensorboard.hparams.SessionStartInfo.HparamsEntry" }
  field { name: "model_uri" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "monitor_url" number: 3 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "group_name" number: 4 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "start_time_secs" number: 5 label: LABEL_OPTIONAL type: TYPE_DOUBLE }
  nested_type {
    name: "HparamsEntry"
    field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
    field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".google.protobuf.Value" }
    options { map_entry: true }
  }
}
message_type {
  name: "SessionEndInfo"
  field { name: "status" number: 1 label: LABEL_OPTIONAL type: TYPE_ENUM type_name: ".tensorboard.hparams.Status" }
  field { name: "end_time_secs" number: 2 label: LABEL_OPTIONAL type: TYPE_DOUBLE }
}
message_type {
  name: "Experiment"
  field { name: "name" number: 6 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "description" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "user" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "time_created_secs" number: 3 label: LABEL_OPTIONAL type: TYPE_DOUBLE }
  field { name: "hparam_infos" number: 4 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".tensorboard.hparams.HParamInfo" }
  field { name: "metric_infos" number: 5 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".tensorboard.hparams.MetricInfo" }
}
message_type {
  name: "HParamInfo"
  field { name: "name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "display_name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "description" number: 3 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "type" number: 4 label: LABEL_OPTIONAL type: TYPE_ENUM type_name: ".tensorboard.hparams.DataType" }
}
message_type {
  name: "MetricName"
  field { name: "group" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "tag" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
}
message_type {
  name: "MetricInfo"
  field { name: "name" number: 1 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".tensorboard.hparams.MetricName" }
  field { name: "display_name" number: 3 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "description" number: 4 label: LABEL_OPTIONAL type: TYPE_STRING }
}
enum_type {
  name: "DataType"
  value { name: "DATA_TYPE_UNSET" number: 0 }
  value { name: "DATA_TYPE_STRING" number: 1 }
  value { name: "DATA_TYPE_BOOL" number: 2 }
  value { name: "DATA_TYPE_FLOAT64" number: 3 }
}
enum_type {
  name: "Status"
  value { name: "STATUS_UNKNOWN" number: 0 }
  value { name: "STATUS_SUCCESS" number: 1 }
  value { name: "STATUS_FAILURE" number: 2 }
  value { name: "STATUS_RUNNING" number: 3 }
}
`

// messages are the descriptors the decoder needs.
var messages = struct {
	event, pluginData protoreflect.MessageDescriptor
}{
	event:      file(tensorflowProto).Messages().ByName("Event"),
	pluginData: file(hparamsProto).Messages().ByName("HParamsPluginData"),
}

// file builds a file descriptor from its FileDescriptorProto in text.
func file(text string) protoreflect.FileDescriptor {
	var fdp descriptorpb.FileDescriptorProto
	if err := prototext.Unmarshal([]byte(text), &fdp); err != nil {
		panic("tboardtest: " + err.Error())
	}
	fd, err := protodesc.NewFile(&fdp, protoregistry.GlobalFiles)
	if err != nil {
		panic("tboardtest: " + err.Error())
	}
	return fd
}
