package ckpt

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// store is the checkpoint bucket as Store returns it: nats.go's handle,
// plus what Stage needs to put an object with a bounded window.
type store struct {
	jetstream.ObjectStore
	js     jetstream.JetStream
	bucket string
}

// ChunkSize is the largest Object Store chunk a checkpoint is stored in:
// one message per MB (or the server's max_payload, if lower).
const ChunkSize = 1 << 20

// maxInFlight bounds the bytes of a put not yet acknowledged: nats-server
// refuses a stream's messages ("429 too many requests") once 128 MB wait
// to be stored.
const maxInFlight = 64 << 20

// stallWait is how long a put with a full window waits for room before
// giving up on the server. nats.go's Put gives up after 200 ms, which the
// server exceeds while it writes gigabytes: staging a second 1 GB
// checkpoint while the syncer read the first failed so in each of four
// benchmark runs.
const stallWait = 30 * time.Second

// ackTimeout fails a chunk whose acknowledgement does not come, as
// nats.go's Put does after its 5 s request timeout: the stream leader that
// got it may have died, and the put is then tried again whole.
const ackTimeout = 5 * time.Second

// safeChunkSize is the chunk for an Object Store that did not come from
// Store, put by nats.go: its window of 4,000 chunks stays under the
// server's 128 MB.
const safeChunkSize = 32 << 10

// put stores r as object name in the layout of nats.go's Object Store (the
// chunks on $O.<bucket>.C.<nuid>, then the metadata, which replaces the
// previous version's, on $O.<bucket>.M.<name>), so that nats.go's Get,
// GetInfo and Delete read it as their own, and hashes it once on the way.
// Unlike nats.go's Put it keeps at most maxInFlight bytes unacknowledged,
// whatever the chunk size, and waits up to stallWait for room.
func (s *store) put(ctx context.Context, meta jetstream.ObjectMeta, r io.Reader) (*jetstream.ObjectInfo, error) {
	name := meta.Name
	old, err := s.GetInfo(ctx, name, jetstream.GetObjectInfoShowDeleted())
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, err
	}
	nc := s.js.Conn()
	pub, chunkSize, err := publisher(nc)
	if err != nil {
		return nil, err
	}
	nuid := strings.TrimPrefix(nats.NewInbox(), "_INBOX.")
	chunkSubj := fmt.Sprintf("$O.%s.C.%s", s.bucket, nuid)
	var pending []jetstream.PubAckFuture
	// settle waits for acknowledgements, all of them or only those already
	// in, and returns the first failure. A future answers once: it leaves
	// pending when it answers, failed or not, so that fail's settle does not
	// wait for it again (it would wait forever).
	settle := func(all bool) error {
		for len(pending) > 0 {
			f := pending[0]
			var err error
			if all {
				select {
				case <-f.Ok():
				case err = <-f.Err():
				case <-ctx.Done():
					return ctx.Err()
				}
			} else {
				select {
				case <-f.Ok():
				case err = <-f.Err():
				default:
					return nil
				}
			}
			pending = pending[1:]
			if err != nil {
				return err
			}
		}
		return nil
	}
	fail := func(err error) (*jetstream.ObjectInfo, error) {
		_ = settle(true)
		s.purge(context.WithoutCancel(ctx), chunkSubj) // the chunks of a put that failed
		return nil, err
	}

	h := sha256.New()
	buf := make([]byte, chunkSize)
	var size uint64
	var chunks uint32
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			h.Write(buf[:n])
			m := nats.NewMsg(chunkSubj)
			m.Data = buf[:n]
			// PublishMsgAsync has copied the data when it returns, and buf
			// is reused: a chunk the server did not answer must fail the
			// put rather than go out again (nats.go would resend m, whose
			// data by then is another chunk's).
			f, err := pub.PublishMsgAsync(m, jetstream.WithStallWait(stallWait), jetstream.WithRetryAttempts(0))
			if err != nil {
				return fail(err)
			}
			pending = append(pending, f)
			size += uint64(n)
			chunks++
		}
		if err := settle(false); err != nil {
			return fail(err)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return fail(rerr)
		}
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
	}

	meta.Opts = &jetstream.ObjectMetaOptions{ChunkSize: uint32(chunkSize)}
	info := &jetstream.ObjectInfo{
		ObjectMeta: meta,
		Bucket:     s.bucket,
		NUID:       nuid,
		Size:       size,
		Chunks:     chunks,
		Digest:     jetstream.GetObjectDigestValue(h),
	}
	// The metadata goes last, once every chunk is stored: until then the
	// previous version (if any) is the object.
	if err := settle(true); err != nil {
		return fail(err)
	}
	m := nats.NewMsg(fmt.Sprintf("$O.%s.M.%s", s.bucket, base64.URLEncoding.EncodeToString([]byte(name))))
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	if m.Data, err = json.Marshal(info); err != nil {
		return fail(err)
	}
	if _, err := s.js.PublishMsg(ctx, m); err != nil {
		// The metadata may be stored all the same (its acknowledgement
		// lost with a stream leader): its chunks stay, a leak at worst,
		// rather than an object whose bytes were purged.
		return nil, err
	}
	if old != nil && !old.Deleted && old.NUID != "" {
		s.purge(ctx, fmt.Sprintf("$O.%s.C.%s", s.bucket, old.NUID))
	}
	info.ModTime = time.Now().UTC()
	return info, nil
}

// purge removes chunks no object refers to; failing to is only a leak of
// space, as in nats.go's Put.
func (s *store) purge(ctx context.Context, subject string) {
	st, err := s.js.Stream(ctx, "OBJ_"+s.bucket)
	if err != nil {
		return
	}
	_ = st.Purge(ctx, jetstream.WithPurgeSubject(subject))
}

// publishers holds one asynchronous publisher per connection: each has a
// subscription for its acknowledgements, which lives as long as the
// connection, and its window is shared by the puts on the connection.
var publishers sync.Map // *nats.Conn → jetstream.JetStream

// publisher returns nc's publisher and the chunk size for nc's server.
func publisher(nc *nats.Conn) (jetstream.JetStream, int, error) {
	chunkSize := ChunkSize
	if mp := nc.MaxPayload(); mp > 0 && mp < int64(chunkSize) {
		chunkSize = int(mp)
	}
	if pub, ok := publishers.Load(nc); ok {
		return pub.(jetstream.JetStream), chunkSize, nil
	}
	pub, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(max(maxInFlight/ChunkSize, 1)),
		jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		return nil, 0, err
	}
	if prev, loaded := publishers.LoadOrStore(nc, pub); loaded {
		return prev.(jetstream.JetStream), chunkSize, nil
	}
	closed := nc.StatusChanged(nats.CLOSED)
	go func() { // forget the connection once it is closed
		<-closed
		publishers.Delete(nc)
	}()
	if nc.IsClosed() {
		publishers.Delete(nc)
	}
	return pub, chunkSize, nil
}
