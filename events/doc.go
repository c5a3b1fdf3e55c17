// Package events is tunejet's event contract, and nothing else.
//
// # Overview
//
// Every message that tunejet's services exchange is a CloudEvents 1.0 event
// carried on a NATS JetStream subject under the prefix "tunejet.". The
// experiment's state is a pure fold over these events (see internal/state),
// so this package defines everything another NATS consumer needs to read or
// validate them: the type names, the subject layout, the payload structs,
// the encoding on NATS messages, and validation that names the bad field.
// A JSON Schema for each payload lives in events/schema.
//
// # Subjects
//
// Every subject has the shape
//
//	tunejet.<experiment>.<writer>.<kind>.<verb>[.<trial>]
//
// where <writer> is the service that may publish it (client, controller,
// runner, syncer, restorer). Each writer owns its own subject space, so a
// writer can be fenced with Nats-Expected-Last-Subject-Sequence on its own
// subjects, and NATS permissions can allow each service exactly its part.
//
// # Encoding
//
// Events use the CloudEvents NATS protocol binding in binary content mode:
// the payload is the JSON data, and every context attribute travels in a
// "ce-" header (ce-specversion, ce-id, ce-source, ce-type, ce-subject,
// ce-time, ce-datacontenttype, ce-dataschema, and the extension
// ce-experiment). The CloudEvents id is also sent as Nats-Msg-Id, so
// JetStream drops a duplicate publish. Decode also accepts structured mode
// (Content-Type: application/cloudevents+json), so foreign publishers may use
// either.
//
// # Errors
//
// Decode and Validate return errors that wrap ErrInvalid and name the field
// that is wrong, for example `trial.reported: field "attempt": must be >= 1`.
package events
