package tboard

import (
	"encoding/binary"
	"hash/crc32"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// A TFRecord is the data's length (uint64, little-endian), the masked
// CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the data
// (tensorflow/core/lib/io/record_writer.cc).

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC-32C of b.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// appendRecord frames data as one TFRecord.
func appendRecord(dst, data []byte) []byte {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
	dst = append(dst, n[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, maskedCRC(n[:]))
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, maskedCRC(data))
}

// nextRecord reads the record at the start of b: its data and its size in
// b. ok is false for a record cut short or whose checksums fail.
func nextRecord(b []byte) (data []byte, size int, ok bool) {
	if len(b) < 12 || binary.LittleEndian.Uint32(b[8:12]) != maskedCRC(b[:8]) {
		return nil, 0, false
	}
	n := binary.LittleEndian.Uint64(b[:8])
	if n > uint64(len(b)-16) {
		return nil, 0, false
	}
	end := 12 + int(n)
	data = b[12:end]
	if binary.LittleEndian.Uint32(b[end:end+4]) != maskedCRC(data) {
		return nil, 0, false
	}
	return data, end + 4, true
}

// Ours reports whether data begins with the start this package writes
// (AppendStart): a file whose name looks like an event file but that
// tunejet did not write (a trainable's own, copied as an artifact) is
// left alone.
func Ours(data []byte) bool {
	rec, _, ok := nextRecord(data)
	if !ok {
		return false
	}
	src, ok := field(rec, eventSourceMetadata)
	if !ok {
		return false
	}
	w, ok := field(src, sourceWriter)
	return ok && string(w) == writer
}

// Cut returns the part of an event file that holds its start and its
// first n results (and the hparams between them, if any), and how many
// results that part holds: fewer than n when the file holds fewer. What
// follows — later results, the hparams written when the trial ended, a
// record cut short by a kill — is left out, to be written again. A file
// that is not Ours gives nothing.
func Cut(data []byte, n int) (keep []byte, results int) {
	if !Ours(data) {
		return nil, 0
	}
	_, end, _ := nextRecord(data)
	for pos := end; results < n; {
		rec, size, ok := nextRecord(data[pos:])
		if !ok {
			break
		}
		pos += size
		if !isHParams(rec) {
			results++
			end = pos
		}
	}
	return data[:end], results
}

// isHParams reports whether the event rec is one of the HParams plugin's
// summaries (AppendHParams): its first value's tag is "_hparams_/…".
func isHParams(rec []byte) bool {
	sum, ok := field(rec, eventSummary)
	if !ok {
		return false
	}
	val, ok := field(sum, summaryValue)
	if !ok {
		return false
	}
	tag, ok := field(val, valueTag)
	return ok && strings.HasPrefix(string(tag), hparamsTagPrefix)
}

// field returns the first length-delimited field num of the message b.
func field(b []byte, num protowire.Number) ([]byte, bool) {
	for len(b) > 0 {
		n, typ, size := protowire.ConsumeTag(b)
		if size < 0 {
			return nil, false
		}
		b = b[size:]
		if n == num && typ == protowire.BytesType {
			v, size := protowire.ConsumeBytes(b)
			return v, size >= 0
		}
		size = protowire.ConsumeFieldValue(n, typ, b)
		if size < 0 {
			return nil, false
		}
		b = b[size:]
	}
	return nil, false
}
