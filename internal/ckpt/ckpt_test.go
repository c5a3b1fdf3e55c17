package ckpt_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tunejet/tunejet/internal/bus/bustest"
	"github.com/tunejet/tunejet/internal/ckpt"
	"github.com/tunejet/tunejet/internal/ckpt/ckpttest"
)

func store(t *testing.T) jetstream.ObjectStore {
	t.Helper()
	obs, _ := storeJS(t)
	return obs
}

func storeJS(t *testing.T) (jetstream.ObjectStore, jetstream.JetStream) {
	t.Helper()
	js := bustest.Start(t).JetStream()
	obs, err := ckpt.Store(t.Context(), js, "exp")
	if err != nil {
		t.Fatal(err)
	}
	return obs, js
}

func roundTrip(t *testing.T, obs jetstream.ObjectStore, tr ckpttest.Tree) {
	t.Helper()
	src := t.TempDir()
	ckpttest.Write(t, src, tr)
	staged, err := ckpt.Stage(t.Context(), obs, "t1/checkpoint_000000", src)
	if err != nil {
		t.Fatal(err)
	}
	want := ckpttest.Read(t, src)
	if err := os.RemoveAll(src); err != nil { // the trainable may delete it right away
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "restored")
	if err := ckpt.Fetch(t.Context(), obs, "t1/checkpoint_000000", staged.Digest, dst); err != nil {
		t.Fatal(err)
	}
	got := ckpttest.Read(t, dst)
	if len(got) != len(want) {
		t.Fatalf("restored %d entries, staged %d: %v vs %v", len(got), len(want), got, want)
	}
	for p, sum := range want {
		if got[p] != sum {
			t.Errorf("%s differs after the round trip", p)
		}
	}
	var size int64
	for _, data := range tr {
		size += int64(len(data))
	}
	if staged.Size != size {
		t.Errorf("staged size %d, want %d", staged.Size, size)
	}
}

func TestRoundTrip(t *testing.T) {
	obs := store(t)
	tests := []struct {
		name string
		tree ckpttest.Tree
	}{
		{"empty checkpoint", ckpttest.Tree{}},
		{"nested folders and empty files", ckpttest.Tree{
			"model.bin": []byte("weights"), "empty.txt": {}, "a/b/c/deep.json": []byte(`{"x":1}`),
			"a/b/empty.bin": {}, "hollow/": nil, "a/hollow2/": nil,
			// a name too long for a plain tar header, and a file that spans
			// Object Store chunks and ends off a 512-byte block
			"long/" + strings.Repeat("n", 150) + "/" + strings.Repeat("f", 120) + ".bin": ckpttest.Random(t, 1000),
			"spans/chunks.bin": ckpttest.Random(t, 2*ckpt.ChunkSize+3),
		}},
		{"one zero-byte file", ckpttest.Tree{"zero": {}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { roundTrip(t, obs, tc.tree) })
	}
}

func TestLargeCheckpointByteForByte(t *testing.T) {
	if testing.Short() {
		t.Skip("200 MB checkpoint: skipped with -short")
	}
	roundTrip(t, store(t), ckpttest.Tree{"big.bin": ckpttest.Random(t, 200<<20), "meta/small.txt": []byte("x")})
}

func TestFetchRefusesAWrongDigest(t *testing.T) {
	obs := store(t)
	src := t.TempDir()
	ckpttest.Write(t, src, ckpttest.Tree{"f": []byte("one")})
	staged, err := ckpt.Stage(t.Context(), obs, "t1/checkpoint_000001", src)
	if err != nil {
		t.Fatal(err)
	}
	ckpttest.Write(t, src, ckpttest.Tree{"f": []byte("two")}) // the object is replaced behind the event's back
	if _, err := ckpt.Stage(t.Context(), obs, "t1/checkpoint_000001", src); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "x")
	err = ckpt.Fetch(t.Context(), obs, "t1/checkpoint_000001", staged.Digest, dst)
	if !errors.Is(err, ckpt.ErrDigestMismatch) {
		t.Fatalf("Fetch: got %v, want ErrDigestMismatch", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused checkpoint left %s behind", dst)
	}
}

// TestFetchRefusesCorruptBytes damages a stored chunk under the object's
// unchanged metadata: the digests of the event and of the object agree,
// the bytes do not, and Fetch must refuse them.
func TestFetchRefusesCorruptBytes(t *testing.T) {
	obs, js := storeJS(t)
	ctx := t.Context()
	src := t.TempDir()
	ckpttest.Write(t, src, ckpttest.Tree{"model.bin": ckpttest.Random(t, 5000)})
	const name = "t1/checkpoint_000002"
	staged, err := ckpt.Stage(ctx, obs, name, src)
	if err != nil {
		t.Fatal(err)
	}
	info, err := obs.GetInfo(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if info.Chunks != 1 {
		t.Fatalf("a 5 KB checkpoint in %d chunks, want 1", info.Chunks)
	}
	stream, err := js.Stream(ctx, "OBJ_"+ckpt.Bucket("exp"))
	if err != nil {
		t.Fatal(err)
	}
	subject := "$O." + ckpt.Bucket("exp") + ".C." + info.NUID
	chunk, err := stream.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(chunk.Data)
	bad[600] ^= 0xff // inside model.bin, after its header block
	if err := stream.DeleteMsg(ctx, chunk.Sequence); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, subject, bad); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "x")
	err = ckpt.Fetch(ctx, obs, name, staged.Digest, dst)
	if !errors.Is(err, ckpt.ErrDigestMismatch) {
		t.Fatalf("Fetch of a damaged copy: got %v, want ErrDigestMismatch", err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a damaged checkpoint left %s behind", dst)
	}
}

// TestWalkHashesAPlainReader checks the digest of an archive that does not
// come from the Object Store.
func TestWalkHashesAPlainReader(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "f", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	sum := sha256.Sum256(buf.Bytes())
	visit := func(*tar.Header, string, io.Reader) error { return nil }
	if err := ckpt.Walk(bytes.NewReader(buf.Bytes()), "sha256:"+hex.EncodeToString(sum[:]), visit); err != nil {
		t.Fatalf("the right digest: %v", err)
	}
	sum[0] ^= 1
	err := ckpt.Walk(bytes.NewReader(buf.Bytes()), "sha256:"+hex.EncodeToString(sum[:]), visit)
	if !errors.Is(err, ckpt.ErrDigestMismatch) {
		t.Fatalf("a wrong digest: got %v, want ErrDigestMismatch", err)
	}
}

func TestFetchRefusesEscapingEntries(t *testing.T) {
	obs := store(t)
	for _, name := range []string{"../evil", "/etc/evil", "a/../../evil"} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte("x"))
		_ = tw.Close()
		if _, err := obs.PutBytes(t.Context(), "t1/bad", buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(buf.Bytes())
		err := ckpt.Fetch(t.Context(), obs, "t1/bad", "sha256:"+hex.EncodeToString(sum[:]), filepath.Join(t.TempDir(), "x"))
		if !errors.Is(err, ckpt.ErrUnsafeEntry) {
			t.Errorf("entry %q: got %v, want ErrUnsafeEntry", name, err)
		}
	}
}

func TestStageRejectsAFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ckpt.Stage(t.Context(), store(t), "t1/checkpoint_000000", f); err == nil {
		t.Fatal("staging a file instead of a directory succeeded")
	}
}

// TestStageReplacesAndFreesTheOldChunks stages a checkpoint over an
// existing one: Fetch gets the new one, and the old one's chunks are gone
// from the stream.
func TestStageReplacesAndFreesTheOldChunks(t *testing.T) {
	obs, js := storeJS(t)
	ctx := t.Context()
	const name = "t1/checkpoint_000003"
	src := t.TempDir()
	ckpttest.Write(t, src, ckpttest.Tree{"model.bin": ckpttest.Random(t, 3*ckpt.ChunkSize)})
	if _, err := ckpt.Stage(ctx, obs, name, src); err != nil {
		t.Fatal(err)
	}
	first, err := obs.GetInfo(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if first.Chunks < 3 {
		t.Fatalf("3 chunks' worth in %d chunks of %d bytes, want ≥ 3", first.Chunks, first.Opts.ChunkSize)
	}
	ckpttest.Write(t, src, ckpttest.Tree{"model.bin": []byte("smaller")})
	staged, err := ckpt.Stage(ctx, obs, name, src)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "OBJ_"+ckpt.Bucket("exp"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.GetLastMsgForSubject(ctx, "$O."+ckpt.Bucket("exp")+".C."+first.NUID)
	if !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the replaced version's chunks: got %v, want them purged", err)
	}
	dst := filepath.Join(t.TempDir(), "x")
	if err := ckpt.Fetch(ctx, obs, name, staged.Digest, dst); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(dst, "model.bin")); err != nil || string(data) != "smaller" {
		t.Fatalf("fetched %q (%v), want the second version", data, err)
	}
}

// TestStageThroughAnyObjectStore stages through a handle that did not come
// from ckpt.Store and fetches it back.
func TestStageThroughAnyObjectStore(t *testing.T) {
	_, js := storeJS(t)
	obs, err := js.ObjectStore(t.Context(), ckpt.Bucket("exp"))
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, obs, ckpttest.Tree{"a/model.bin": ckpttest.Random(t, ckpt.ChunkSize+5), "empty": {}})
}

// TestStageFitsTheServersMaxPayload stages a checkpoint on a server whose
// small max_payload: every chunk fits it.
func TestStageFitsTheServersMaxPayload(t *testing.T) {
	const maxPayload = 100_000
	s, err := server.NewServer(&server.Options{
		JetStream: true, StoreDir: t.TempDir(), Host: "127.0.0.1", Port: server.RANDOM_PORT,
		MaxPayload: maxPayload, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := ckpt.Store(t.Context(), js, "exp")
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, obs, ckpttest.Tree{"model.bin": ckpttest.Random(t, 1<<20)})
	info, err := obs.GetInfo(t.Context(), "t1/checkpoint_000000")
	if err != nil {
		t.Fatal(err)
	}
	if info.Opts == nil || info.Opts.ChunkSize > maxPayload || info.Chunks < 11 {
		t.Fatalf("1 MB stored as %d chunks (options %+v), want chunks of at most %d bytes", info.Chunks, info.Opts, maxPayload)
	}
}

// TestStageFailsPromptlyWhenTheServerRefusesChunks: a bucket too small for
// the checkpoint refuses its later chunks. Stage returns the server's
// error, leaves no object behind, and does not wait for an answer that
// already came.
func TestStageFailsPromptlyWhenTheServerRefusesChunks(t *testing.T) {
	js := bustest.Start(t).JetStream()
	ctx := t.Context()
	if _, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: ckpt.Bucket("exp"), MaxBytes: 2 * ckpt.ChunkSize}); err != nil {
		t.Fatal(err)
	}
	obs, err := ckpt.Store(ctx, js, "exp")
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	ckpttest.Write(t, src, ckpttest.Tree{"model.bin": ckpttest.Random(t, 6*ckpt.ChunkSize)})
	done := make(chan error, 1)
	go func() {
		_, err := ckpt.Stage(ctx, obs, "t1/checkpoint_000000", src)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("staging 6 chunks into a bucket of 2 succeeded")
		}
		t.Logf("Stage: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("Stage did not return within 30 s of the server refusing its chunks")
	}
	if _, err := obs.GetInfo(ctx, "t1/checkpoint_000000"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("after the failed stage: GetInfo %v, want ErrObjectNotFound", err)
	}
}

// TestOpenWaitsForAnObjectNotThereYet: a read may be answered by a replica
// that has not applied a put yet. Open, called before the object is
// staged, still returns it; an object that was removed is not found.
func TestOpenWaitsForAnObjectNotThereYet(t *testing.T) {
	obs := store(t)
	ctx := t.Context()
	src := t.TempDir()
	ckpttest.Write(t, src, ckpttest.Tree{"model.bin": []byte("weights")})
	const name = "t1/checkpoint_000000"
	opened := make(chan error, 1)
	go func() {
		r, err := ckpt.Open(ctx, obs, name)
		if err == nil {
			_ = r.Close()
		}
		opened <- err
	}()
	if _, err := ckpt.Stage(ctx, obs, name, src); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("Open before the object was staged: %v", err)
	}
	if err := obs.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := ckpt.Open(ctx, obs, name); !errors.Is(err, jetstream.ErrObjectNotFound) || !errors.Is(err, ckpt.ErrRemoved) {
		t.Fatalf("Open of a removed object: %v, want ErrObjectNotFound and ckpt.ErrRemoved", err)
	}
}

// TestInfoWaitsForAnObjectNotThereYet: Info looks again as Open does.
func TestInfoWaitsForAnObjectNotThereYet(t *testing.T) {
	obs := store(t)
	ctx := t.Context()
	src := t.TempDir()
	ckpttest.Write(t, src, ckpttest.Tree{"model.bin": []byte("weights")})
	const name = "t1/checkpoint_000000"
	found := make(chan error, 1)
	go func() {
		_, err := ckpt.Info(ctx, obs, name)
		found <- err
	}()
	if _, err := ckpt.Stage(ctx, obs, name, src); err != nil {
		t.Fatal(err)
	}
	if err := <-found; err != nil {
		t.Fatalf("Info before the object was staged: %v", err)
	}
}
