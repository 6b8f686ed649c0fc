package handler

import (
	"bytes"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
)

// sentBodies are the message bodies the sqs sink sends for events with awkward values.
func sentBodies(t testing.TB) [][]byte {
	sent := &testsupport.SentMessages{}
	snk := sink.NewSQS(sent, "https://sqs.eu-west-1.amazonaws.com/123456789012/idem-events.fifo")
	for _, e := range []sink.Event{
		{Provider: "stripe", ID: "evt_1", Type: "payment_intent.succeeded", ObjectID: "pi_1", ReceivedAt: time.Now(),
			Body: []byte("{\n  \"id\": \"evt_1\", \"b\": [3, 1.50, {\"z\": null, \"a\": \"<&>\\u2028\\\"é\"}],\n  \"a\": true\n}")},
		{Provider: "github", ID: "sha256:ab", DeliveryID: "d-1", Unsigned: []string{"delivery_id"}, Body: []byte(`[]`)},
		{Provider: "shopify", ID: "ünïcode id", Body: []byte(`"a string"`)},
		{Provider: "gitlab", ID: `quote " and \ back`, Body: []byte(`{"a":1,"a":2}`)},
		{Provider: "slack", ID: "<tag>&", Body: nil},
	} {
		if err := snk.Send(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	var bodies [][]byte
	for _, in := range sent.Inputs() {
		bodies = append(bodies, []byte(aws.ToString(in.MessageBody)))
	}
	return bodies
}

// The fingerprint of a record is that of its body's members provider, id and payload, as it
// was when the whole body went to idem.FingerprintJSON: records stored before still match.
func TestARecordsFingerprintIsThatOfItsBodysProviderIDAndPayload(t *testing.T) {
	bodies := sentBodies(t)
	bodies = append(bodies, []byte(`{"provider":"s","id":"i"}`), []byte(`{"provider":"s","id":"i","payload":null,"signed":null}`))
	for _, body := range bodies {
		want, err := idem.FingerprintJSON(body, "provider", "id", "payload")
		if err != nil {
			t.Fatal(err)
		}
		b := &batch{ctx: t.Context()}
		if r := b.decode(string(body)); r.err != nil || r.fpErr != nil || r.fp != want {
			t.Errorf("%s: fingerprint %x (%v, %v), want %x", body, r.fp, r.err, r.fpErr, want)
		}
	}
}

// FuzzFingerprint decodes any body as a record: when it is an event, its fingerprint is that
// of the body's members provider, id and payload.
func FuzzFingerprint(f *testing.F) {
	for _, body := range sentBodies(f) {
		f.Add(body)
	}
	f.Add([]byte(`{"Provider":"s","provider":"t","id":"i","payload":{}}`))
	f.Add([]byte(`{"provider":"s","id":"i","payload":{},"payload":[]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		b := &batch{ctx: t.Context()}
		r := b.decode(string(body))
		if r.err != nil || r.event.PayloadRef != nil {
			return
		}
		want, err := idem.FingerprintJSON(bytes.Clone(body), "provider", "id", "payload")
		if (err == nil) != (r.fpErr == nil) || err == nil && r.fp != want {
			t.Fatalf("fingerprint %x (%v), FingerprintJSON's %x (%v)", r.fp, r.fpErr, want, err)
		}
	})
}
