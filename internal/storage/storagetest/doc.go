// Package storagetest provides real storage backends on loopback and
// fault-injecting bucket wrappers for tests.
//
// # Backends
//
// S3 starts gofakes3 behind an httptest server and returns an s3:// URL
// that the real AWS client (gocloud's s3blob) opens; GCS starts
// fake-gcs-server on 127.0.0.1 and returns a gs:// URL that gcsblob opens
// through STORAGE_EMULATOR_HOST. Both set environment variables with
// t.Setenv, so tests that use them cannot call t.Parallel.
//
// # Wrappers
//
// Counting counts completed writes per key; Faulty makes writes or deletes
// fail a number of times or hang until their context ends. Both wrap the
// bucket at the driver level (storage.DriverOf) and override one method,
// so every other call reaches the real backend.
package storagetest
