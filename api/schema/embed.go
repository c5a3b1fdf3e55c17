// Package schema holds the JSON Schema (draft 2020-12) of every request
// and reply of tunejet's API endpoints, one self-contained file each:
// restore-request.json and restore-reply.json (tunejet.api.restore and
// tunejet.api.can_restore), suggest-request.json and suggest-reply.json
// (an external searcher's subject).
//
// The files are the contract for clients that are not written in Go; Go
// programs can read them from FS. api's tests check them against the Go
// types and the golden messages in api/testdata/golden.
package schema

import "embed"

// FS holds the schema files.
//
//go:embed *.json
var FS embed.FS
