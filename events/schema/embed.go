// Package schema holds the JSON Schema (draft 2020-12) of the data of every
// tunejet event type, one self-contained file per type named <type>.json
// (for example io.tunejet.trial.reported.json).
//
// The files are the contract for consumers that are not written in Go; Go
// programs can read them from FS. Every payload that events.Encode writes
// validates against its schema (events' tests check this on the golden
// messages).
package schema

import "embed"

// FS holds the schema files, named <type>.json.
//
//go:embed *.json
var FS embed.FS
