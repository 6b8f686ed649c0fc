package idem

import (
	"bytes"
	"reflect"
	"strconv"
	"testing"
	"time"
	"unsafe"
)

func FuzzDecodeRecord(f *testing.F) {
	tok, fp, exp := token{1}, FingerprintOf([]byte("f")), time.UnixMilli(1_700_000_000_000)
	f.Add(encodeInProgress(tok, fp, exp))
	f.Add(strconv.AppendUint(encodeInProgress(tok, fp, exp), 1_764_601_200_000_001, 10))
	done, _ := encodeCompleted(tok, fp, exp, Result{Status: 200, Headers: map[string]string{"k": "v"}, Body: []byte("{}")}, 0)
	f.Add(done)
	f.Add([]byte{})
	f.Add([]byte("\x01C"))
	f.Add(func() []byte {
		b, _ := encodeCompleted(tok, fp, exp, Result{Status: 201, Headers: map[string]string{"content-type": "application/json", "x": "y"}, Body: []byte(`{"id":1}`)}, 0)
		return b
	}())
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeRecord(b)
		// The client's string decodes as the bytes do, into a record that shares no memory with it.
		s := string(b)
		fromString, serr := decodeStored(s)
		if (err == nil) != (serr == nil) || !reflect.DeepEqual(rec, fromString) {
			t.Fatalf("decodeStored %+v (%v), decodeRecord %+v (%v)", fromString, serr, rec, err)
		}
		if len(fromString.result.Body) > 0 && unsafe.SliceData(fromString.result.Body) == unsafe.StringData(s[len(s)-len(fromString.result.Body):]) {
			t.Fatal("decodeStored's body shares the client's string")
		}
		if err != nil {
			return
		}
		// Whatever decodes must encode back to the same bytes.
		var again []byte
		if rec.completed {
			again, err = encodeCompleted(rec.token, rec.fingerprint, rec.expiresAt, rec.result, 0)
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			// Header order and duplicate names are not preserved by a map; compare decoded forms.
			rec2, err := decodeRecord(again)
			if err != nil || rec2.result.Status != rec.result.Status || !bytes.Equal(rec2.result.Body, rec.result.Body) || len(rec2.result.Headers) != len(rec.result.Headers) {
				t.Fatalf("round trip changed the record: %v", err)
			}
			return
		}
		again = encodeInProgress(rec.token, rec.fingerprint, rec.expiresAt)
		if rec.fence != 0 { // a fenced claim: the claim script appends its token in decimal
			again = strconv.AppendUint(again, rec.fence, 10)
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("in-progress record does not round-trip")
		}
	})
}

func FuzzKeyValidate(f *testing.F) {
	f.Add("stripe", "evt_123")
	f.Add("", "")
	f.Add("a{b}", "x\x00y")
	f.Fuzz(func(t *testing.T, scope, id string) {
		k := Key{Scope: scope, ID: id}
		if err := k.Validate(); err != nil {
			return
		}
		rk := k.redisKey("idem")
		// A valid key makes exactly one hash tag, holding the scope and a hex digest, never the raw id.
		open, closing := bytes.IndexByte([]byte(rk), '{'), bytes.IndexByte([]byte(rk), '}')
		if open < 0 || closing != len(rk)-1 || bytes.Count([]byte(rk), []byte("{")) != 1 {
			t.Fatalf("bad hash tag in %q", rk)
		}
		if len(rk) != len("idem:{")+len(scope)+1+64+1 {
			t.Fatalf("unexpected key length %q", rk)
		}
	})
}
