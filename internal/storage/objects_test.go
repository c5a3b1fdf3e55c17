package storage_test

import (
	"slices"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/tunejet/tunejet/internal/storage"
)

func TestObjectsListsEveryKeyUnderThePrefix(t *testing.T) {
	ctx := t.Context()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	for _, k := range []string{"a/1", "a/2/x", "a/3", "ab", "b/1"} {
		if err := b.WriteAll(ctx, k, []byte(k), nil); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for obj, err := range storage.Objects(ctx, b, &blob.ListOptions{Prefix: "a/"}) {
		if err != nil {
			t.Fatalf("Objects: %v", err)
		}
		got = append(got, obj.Key)
	}
	if want := []string{"a/1", "a/2/x", "a/3"}; !slices.Equal(got, want) {
		t.Fatalf("Objects(a/) = %v, want %v", got, want)
	}

	got = nil
	for obj, err := range storage.Objects(ctx, b, &blob.ListOptions{Prefix: "a/", Delimiter: "/"}) {
		if err != nil {
			t.Fatalf("Objects: %v", err)
		}
		got = append(got, obj.Key)
		if len(got) == 2 {
			break // the caller stops early: no more objects are asked for
		}
	}
	if want := []string{"a/1", "a/2/"}; !slices.Equal(got, want) {
		t.Fatalf("Objects(a/, delimiter /) stopped after two = %v, want %v", got, want)
	}
}

func TestObjectsEndsWithTheListingsError(t *testing.T) {
	b := memblob.OpenBucket(nil)
	if err := b.WriteAll(t.Context(), "k", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	var errs int
	for obj, err := range storage.Objects(t.Context(), b, nil) {
		if err == nil {
			t.Fatalf("Objects of a closed bucket gave %q without an error", obj.Key)
		}
		errs++
	}
	if errs != 1 {
		t.Fatalf("Objects of a closed bucket gave %d errors, want exactly one", errs)
	}
}
