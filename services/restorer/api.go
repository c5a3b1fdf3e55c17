package restorer

import "github.com/tunejet/tunejet/api"

// The restorer's wire contract is package api's. These names remain for
// the benchmarks that still use them, and go once they have moved.
type (
	// Request is api.RestoreRequest.
	Request = api.RestoreRequest
	// Reply is api.RestoreReply.
	Reply = api.RestoreReply
)

// Names of package api, see there.
const (
	RestoreSubject  = api.RestoreSubject
	ReadLog         = api.ReadLog
	ReadSnapshotLog = api.ReadSnapshotLog
	ReadSnapshot    = api.ReadSnapshot
)
