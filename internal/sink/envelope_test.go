package sink

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sinkEnvelopes are envelopes as the sinks encode them: inline payloads of several shapes, a
// claim-check pointer, a delivery id with unsigned members, none signed, no receipt time.
func sinkEnvelopes(t testing.TB) map[string][]byte {
	at := time.Date(2026, 12, 2, 5, 45, 12, 123456789, time.FixedZone("CET", 3600))
	stripe := Event{Provider: "stripe", ID: "evt_1", Type: "payment_intent.succeeded", ObjectID: "pi_1", ReceivedAt: at,
		Body: []byte("{\n  \"id\": \"evt_1\",\n  \"data\": {\"object\": {\"amount\": 2000, \"note\": \"<b>&\\u00e9\\\"\"}},\n  \"list\": [1, -0.5e+3, true, false, null, [], {}]\n}")}
	github := Event{Provider: "github", ID: "sha256:" + strings.Repeat("ab", 32), DeliveryID: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		Type: "push", ObjectID: "idemlambda/démo", Unsigned: []string{"delivery_id", "type"}, ReceivedAt: at, Body: []byte(`[1,"two"]`)}
	gitlab := Event{Provider: "gitlab", ID: "e1", Unsigned: []string{"id", "type", "object_id", "payload"}, Body: []byte(`"x"`)}
	ref := PayloadRef{Bucket: "idem-payloads", Key: PayloadKey("github", github.ID), Bytes: 2 << 20, SHA256: strings.Repeat("0f", 32)}
	out := map[string][]byte{}
	for name, enc := range map[string]struct {
		e   Event
		ref *PayloadRef
	}{"stripe": {stripe, nil}, "github": {github, nil}, "github by reference": {github, &ref}, "gitlab": {gitlab, nil},
		"empty body": {Event{Provider: "p", ID: "i"}, nil}} {
		b, err := encodeEnvelope(enc.e, enc.ref)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	return out
}

// unmarshalled is what json.Unmarshal decodes from data.
func unmarshalled(data []byte) (Envelope, error) {
	var e Envelope
	err := json.Unmarshal(data, &e)
	return e, err
}

func TestTheSinksEnvelopesDecodeInOnePassAsUnmarshalDecodesThem(t *testing.T) {
	for name, data := range sinkEnvelopes(t) {
		want, err := unmarshalled(data)
		if err != nil {
			t.Fatal(name, err)
		}
		got, ok := decodeCompact(data)
		if !ok {
			t.Errorf("%s: the sink's envelope is not read in one pass: %s", name, data)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded\n%+v\nwant\n%+v", name, got, want)
		}
		if got, sinkForm, err := ReadEnvelope(data); err != nil || !sinkForm || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: ReadEnvelope: %+v, %v, %v", name, got, sinkForm, err)
		}
	}
}

func TestEnvelopesInAnyOtherFormDecodeAsUnmarshalDecodesThem(t *testing.T) {
	for _, data := range []string{
		` {"provider":"stripe","id":"evt_1","payload":{}}`,
		`{"provider":"stripe","id":"evt_1","payload":{}} `,
		`{"provider" : "stripe", "id":"evt_1"}`,
		`{"Provider":"stripe","id":"evt_1"}`,
		`{"provider":"stripe","provider":"github","id":"evt_1"}`,
		`{"provider":"stripe","id":"evt_1","extra":[1,{"a":null}]}`,
		`{"provider":"str\u0069pe","id":"evt\/1","type":"a\nb"}`,
		`{"provider":"stripe","id":"evt_1","signed":["id",null]}`,
		`{"provider":"stripe","id":"evt_1","payload_ref":{"bucket":"b","key":"k","bytes":1.5e3}}`,
		`{"provider":"stripe","id":"evt_1","payload_ref":{"bytes":99999999999999999999}}`,
		`{"provider":"stripe","id":"evt_1","payload_ref":{"Bucket":"b"}}`,
		`{"provider":"stripe","id":"evt_1","payload_ref":{"bucket":"b"},"payload_ref":{"key":"k"}}`,
		`{"provider":"stripe","id":"evt_1","received_at":"yesterday"}`,
		`{"provider":"stripe","id":"evt_1","received_at":null}`,
		`{"provider":"st` + "\xff" + `ripe","id":"evt_1"}`,
		`{"provider":"stripe","id":"evt_1","payload":` + strings.Repeat("[", maxCompactDepth+5) + strings.Repeat("]", maxCompactDepth+5) + `}`,
		`{"provider":"stripe","id":"evt_1","payload":{"a":1,}}`,
		`{"provider":"stripe","id":"evt_1","payload":01}`,
		`{"provider":"stripe","id":"evt_1","payload":"\x"}`,
		`{"provider":"stripe","id":"evt_1","payload":}`,
		`{"provider":"stripe","id":"evt_1"`,
		`{"provider":"stripe","id":"evt_1"}{}`,
		`{"provider":42}`,
		`null`,
		`[]`,
		``,
	} {
		want, wantErr := unmarshalled([]byte(data))
		got, err := DecodeEnvelope([]byte(data))
		if (err == nil) != (wantErr == nil) || err != nil && !strings.HasSuffix(err.Error(), wantErr.Error()) {
			t.Errorf("%s: error %v, json.Unmarshal's %v", data, err, wantErr)
		}
		if !reflect.DeepEqual(got, want) && wantErr == nil {
			t.Errorf("%s: decoded %+v, want %+v", data, got, want)
		}
	}
}

func TestADecodedEnvelopesMetadataIsItsOwn(t *testing.T) {
	data := sinkEnvelopes(t)["github by reference"]
	want, _ := unmarshalled(data)
	got, err := DecodeEnvelope(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 'x'
	}
	// The payload may share data's bytes; nothing else does.
	if !reflect.DeepEqual(got.Metadata, want.Metadata) || !reflect.DeepEqual(got.PayloadRef, want.PayloadRef) {
		t.Errorf("after data changed, decoded %+v, want %+v", got, want)
	}
}

func TestADecodedPayloadCannotGrowIntoTheRestOfTheMessage(t *testing.T) {
	data := sinkEnvelopes(t)["stripe"]
	before := bytes.Clone(data)
	e, err := DecodeEnvelope(data)
	if err != nil {
		t.Fatal(err)
	}
	_ = append(e.Payload, "garbage"...)
	if !bytes.Equal(data, before) {
		t.Errorf("appending to the payload wrote into the message: %s", data)
	}
}

func TestTheSinksEnvelopeDecodesInAFewAllocations(t *testing.T) {
	data := sinkEnvelopes(t)["github"]
	// One string for the metadata, one slice for each of signed and unsigned.
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeEnvelope(data) }); n > 3 {
		t.Errorf("%v allocations per envelope, want at most 3", n)
	}
}

func BenchmarkDecodeEnvelope(b *testing.B) {
	data := sinkEnvelopes(b)["stripe"]
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := DecodeEnvelope(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshalEnvelope(b *testing.B) {
	data := sinkEnvelopes(b)["stripe"]
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := unmarshalled(data); err != nil {
			b.Fatal(err)
		}
	}
}
