package idem

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unsafe"
)

// A record is stored as one Redis string value. Every kind shares a fixed header so the Lua
// scripts can check ownership with one string.sub:
//
//	byte 0       format version (1)
//	byte 1       kind: 'P' in progress, 'C' completed, 'N' executed but not replayable,
//	             'S' superseded (an ordered event that did not run)
//	bytes 2-17   owner token (16 random bytes)
//	bytes 18-49  payload fingerprint (SHA-256)
//	bytes 50-57  expiry, Unix milliseconds, big-endian (claim expiry or result expiry)
//
// An in-progress record of a fenced guard (WithFencing) continues with its fencing token in
// decimal, which the claim script appends; a claim retried after a lost reply reads it back.
// A not-replayable marker ends after the header.
//
// A superseded marker is what the ordered claim (claim_ordered.lua) writes at the key of an event
// older than its object's watermark: the header (the event's token and fingerprint, the result
// expiry) followed by the watermark's Version in decimal (an optional '-', then digits without a
// leading zero), the newest Version of the object that had completed.
//
// A completed record continues with uvarint status, uvarint header count, then per header
// uvarint length + name and uvarint length + value, then uvarint length + body, and nothing after.
// errCorruptRecord: the stored value is not a record this package wrote.
var errCorruptRecord = errors.New("idem: corrupt record")

// errResultTooLarge: the work's encoded result exceeds maxResultSize.
var errResultTooLarge = errors.New("idem: result too large")

const (
	recordVersion  = 1
	kindInProgress = 'P'
	kindCompleted  = 'C'
	kindMarker     = 'N'
	kindSuperseded = 'S'
	tokenSize      = 16
	headerSize     = 2 + tokenSize + sha256.Size + 8
	// ownerPrefixSize is the header prefix the scripts compare: version, kind, token.
	ownerPrefixSize = 2 + tokenSize
)

type token [tokenSize]byte

// record is the decoded form of either kind.
type record struct {
	completed   bool
	token       token
	fingerprint Fingerprint
	expiresAt   time.Time
	result      Result // completed only
	// unreplayable marks a marker: the work ran, its result could not be stored (completed too).
	unreplayable bool
	// fence is the fencing token of a fenced in-progress record; 0 for any other.
	fence uint64
	// superseded marks a superseded marker (completed too): the event did not run, since
	// supersededBy, its object's watermark, was newer.
	superseded   bool
	supersededBy int64
}

func putHeader(b []byte, kind byte, tok token, fp Fingerprint, expiresAt time.Time) {
	b[0] = recordVersion
	b[1] = kind
	copy(b[2:], tok[:])
	copy(b[2+tokenSize:], fp[:])
	binary.BigEndian.PutUint64(b[2+tokenSize+sha256.Size:], uint64(expiresAt.UnixMilli()))
}

// encodeMarker encodes the record that replaces a claim whose work ran but whose result cannot
// be stored: it says "executed", so no retry runs the work again, and has no result to replay.
func encodeMarker(tok token, fp Fingerprint, expiresAt time.Time) []byte {
	b := make([]byte, headerSize)
	putHeader(b, kindMarker, tok, fp, expiresAt)
	return b
}

func encodeInProgress(tok token, fp Fingerprint, expiresAt time.Time) []byte {
	b := make([]byte, headerSize)
	putHeader(b, kindInProgress, tok, fp, expiresAt)
	return b
}

// encodeCompleted encodes a completed record, refusing results whose encoding exceeds max bytes.
func encodeCompleted(tok token, fp Fingerprint, expiresAt time.Time, r Result, max int) ([]byte, error) {
	size := headerSize + 2*binary.MaxVarintLen64 + binary.MaxVarintLen64 + len(r.Body)
	names := make([]string, 0, len(r.Headers))
	for name, v := range r.Headers {
		names = append(names, name)
		size += 2*binary.MaxVarintLen64 + len(name) + len(v)
	}
	if r.Status < 0 {
		return nil, fmt.Errorf("idem: negative status %d", r.Status)
	}
	b := make([]byte, headerSize, size)
	putHeader(b, kindCompleted, tok, fp, expiresAt)
	b = binary.AppendUvarint(b, uint64(r.Status))
	b = binary.AppendUvarint(b, uint64(len(names)))
	// Sorted so equal results encode to equal bytes.
	slices.Sort(names)
	for _, name := range names {
		b = appendBytes(b, name)
		b = appendBytes(b, r.Headers[name])
	}
	b = appendBytes(b, r.Body)
	if max > 0 && len(b) > max {
		return nil, fmt.Errorf("%w: %d bytes encoded, limit %d", errResultTooLarge, len(b), max)
	}
	return b, nil
}

func appendBytes[T string | []byte](b []byte, s T) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decodeRecord parses a stored value. Anything this package did not write is errCorruptRecord,
// with the zero record.
func decodeRecord(b []byte) (record, error) {
	var rec record
	err := rec.decodeHeader(b)
	if err == nil {
		switch rest := b[headerSize:]; b[1] {
		case kindInProgress:
			err = rec.decodeClaim(rest)
		case kindMarker:
			err = rec.decodeMarker(rest)
		case kindSuperseded:
			err = rec.decodeSuperseded(rest)
		case kindCompleted:
			err = rec.decodeCompleted(rest)
		default:
			err = fmt.Errorf("%w: kind %q", errCorruptRecord, b[1])
		}
	}
	if err != nil {
		return record{}, err
	}
	return rec, nil
}

// decodeHeader reads the header both kinds share: version, token, fingerprint and expiry.
func (rec *record) decodeHeader(b []byte) error {
	if len(b) < headerSize {
		return fmt.Errorf("%w: %d bytes, want at least %d", errCorruptRecord, len(b), headerSize)
	}
	if b[0] != recordVersion {
		return fmt.Errorf("%w: version %d", errCorruptRecord, b[0])
	}
	copy(rec.token[:], b[2:])
	copy(rec.fingerprint[:], b[2+tokenSize:])
	ms := binary.BigEndian.Uint64(b[2+tokenSize+sha256.Size:])
	if ms > 1<<62 {
		return fmt.Errorf("%w: expiry out of range", errCorruptRecord)
	}
	rec.expiresAt = time.UnixMilli(int64(ms))
	return nil
}

// decodeClaim reads what follows an in-progress header: nothing, or a fenced claim's token.
func (rec *record) decodeClaim(rest []byte) error {
	if len(rest) == 0 {
		return nil
	}
	f, err := parseFence(rest)
	if err != nil {
		return fmt.Errorf("%w: in-progress record: %v", errCorruptRecord, err)
	}
	rec.fence = f
	return nil
}

// decodeMarker checks that nothing follows a not-replayable marker's header.
func (rec *record) decodeMarker(rest []byte) error {
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d trailing bytes after a not-replayable marker", errCorruptRecord, len(rest))
	}
	rec.completed, rec.unreplayable = true, true
	return nil
}

// decodeSuperseded reads what follows a superseded marker's header: the watermark's Version in
// canonical decimal, and nothing after.
func (rec *record) decodeSuperseded(rest []byte) error {
	v, err := strconv.ParseInt(string(rest), 10, 64)
	if err != nil || strconv.FormatInt(v, 10) != string(rest) {
		return fmt.Errorf("%w: superseded marker: malformed version", errCorruptRecord)
	}
	rec.completed, rec.superseded, rec.supersededBy = true, true, v
	return nil
}

// decodeCompleted reads what follows a completed header: the result's status, headers and body,
// and nothing after.
func (rec *record) decodeCompleted(rest []byte) error {
	rec.completed = true
	d := decoder{b: rest}
	status := d.uvarint()
	n := d.uvarint()
	if d.err == nil && (status > 999 || n > uint64(len(d.b))/2) {
		return fmt.Errorf("%w: status %d or header count %d out of range", errCorruptRecord, status, n)
	}
	rec.result.Status = int(status)
	rec.result.Headers = d.headers(n)
	rec.result.Body = d.bytes()
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("%w: %v", errCorruptRecord, d.err)
	}
	return nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = fmt.Errorf("length %d beyond the %d bytes left", n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// headers reads n header names and values; nil when n is 0 or the decoder already failed.
func (d *decoder) headers(n uint64) map[string]string {
	if n == 0 || d.err != nil {
		return nil
	}
	h := make(map[string]string, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		name := d.bytes()
		value := d.bytes()
		h[headerString(name)] = headerString(value)
	}
	return h
}

// headerString returns b as a string, without allocating for the header names and values the
// functions' results carry on every replay (as net/textproto interns common header names).
func headerString(b []byte) string {
	switch string(b) { // compared in place: no allocation
	case "content-type":
		return "content-type"
	case "Content-Type":
		return "Content-Type"
	case "application/json":
		return "application/json"
	case "application/json; charset=utf-8":
		return "application/json; charset=utf-8"
	case "text/plain; charset=utf-8":
		return "text/plain; charset=utf-8"
	case "location":
		return "location"
	case "Location":
		return "Location"
	}
	return string(b)
}

// decodeStored decodes a record as the client returned it, a string, without copying it: the
// decoder reads it through a read-only view and copies what the record keeps (the header strings
// and, here, the body), so the record shares no memory with the string.
func decodeStored(s string) (record, error) {
	if s == "" {
		return decodeRecord(nil)
	}
	rec, err := decodeRecord(unsafe.Slice(unsafe.StringData(s), len(s)))
	if err == nil && rec.result.Body != nil {
		rec.result.Body = bytes.Clone(rec.result.Body)
	}
	return rec, err
}
