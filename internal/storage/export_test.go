package storage

// DecideClaim is decideClaim, for the table test.
var DecideClaim = decideClaim
