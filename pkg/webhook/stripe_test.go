package webhook_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

func TestStripeAcceptsStripeGoTestSignedPayload(t *testing.T) {
	p := mustNew(t, "stripe", stripeSecret)
	body := readFixture(t, "events/stripe_payment_intent_succeeded.json")
	signed := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
		Payload: body, Secret: stripeSecret, Timestamp: testNow,
	})
	if err := p.CheckSignature(stripeHeader(signed.Header), body, testNow); err != nil {
		t.Fatalf("Verify(stripe-go header): %v", err)
	}
	if got := webhooktest.StripeSignature(stripeSecret, body, testNow); got != signed.Header {
		t.Fatalf("StripeSignature = %q, stripe-go = %q", got, signed.Header)
	}

	other := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
		Payload: body, Secret: "whsec_not_ours", Timestamp: testNow,
	})
	wantErr(t, p.CheckSignature(stripeHeader(other.Header), body, testNow), webhook.ErrNoValidSignature)
}

func TestStripeGoAcceptsOurSignature(t *testing.T) {
	p := mustNew(t, "stripe", stripeSecret)
	now := time.Now() // stripe-go reads the real clock
	body, _ := p.Sample("evt_1QstripeGoCrossCheck", now)
	header := p.Sign(stripeSecret, body, now)["stripe-signature"]

	// Default options also check that the sample's API version is the one the
	// pinned stripe-go expects.
	ev, err := stripewebhook.ConstructEvent(body, header, stripeSecret)
	if err != nil {
		t.Fatalf("stripe-go ConstructEvent: %v", err)
	}
	if ev.ID != "evt_1QstripeGoCrossCheck" || ev.Type != "payment_intent.succeeded" {
		t.Fatalf("stripe-go read id %q type %q", ev.ID, ev.Type)
	}
	ours, err := p.Event(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	if ours.ObjectID != ev.Data.Object["id"] {
		t.Fatalf("ObjectID %q, stripe-go data.object.id %v", ours.ObjectID, ev.Data.Object["id"])
	}
	if err := stripewebhook.ValidatePayload(body, header, "whsec_not_ours"); err == nil {
		t.Fatal("stripe-go accepted our signature under another secret")
	}
}

// TestStripeAgreesWithStripeGo runs headers through both verifiers at the
// real clock and expects the same verdict.
func TestStripeAgreesWithStripeGo(t *testing.T) {
	p := mustNew(t, "stripe", stripeSecret)
	now := time.Now()
	body := readFixture(t, "events/stripe_payment_intent_succeeded.json")
	sig := func(secret string, at time.Time, b []byte) string {
		return hex.EncodeToString(stripewebhook.ComputeSignature(at, b, secret))
	}
	ts := now.Unix()
	good := sig(stripeSecret, now, body)
	wrong := sig("whsec_not_ours", now, body)
	for _, tc := range []struct {
		name, header string
		accept       bool
	}{
		{"valid", fmt.Sprintf("t=%d,v1=%s", ts, good), true},
		{"valid with v0", fmt.Sprintf("t=%d,v1=%s,v0=%s", ts, good, wrong), true},
		{"right v1 after a wrong one", fmt.Sprintf("t=%d,v1=%s,v1=%s", ts, wrong, good), true},
		{"right v1 before a wrong one", fmt.Sprintf("t=%d,v1=%s,v1=%s", ts, good, wrong), true},
		{"t after v1", fmt.Sprintf("v1=%s,t=%d", good, ts), true},
		{"upper-case hex", fmt.Sprintf("t=%d,v1=%s", ts, strings.ToUpper(good)), true},
		{"unknown element", fmt.Sprintf("t=%d,v1=%s,x=y", ts, good), true},
		{"wrong secret", fmt.Sprintf("t=%d,v1=%s", ts, wrong), false},
		{"right signature only as v0", fmt.Sprintf("t=%d,v0=%s", ts, good), false},
		{"timestamp changed", fmt.Sprintf("t=%d,v1=%s", ts-1, good), false},
		{"stale", fmt.Sprintf("t=%d,v1=%s", ts-301, sig(stripeSecret, now.Add(-301*time.Second), body)), false},
		{"no t", fmt.Sprintf("v1=%s", good), false},
		{"truncated v1", fmt.Sprintf("t=%d,v1=%s", ts, good[:63]), false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours := p.CheckSignature(stripeHeader(tc.header), body, now)
			theirs := stripewebhook.ValidatePayloadWithTolerance(body, tc.header, stripeSecret, webhook.DefaultTolerance)
			if (ours == nil) != tc.accept || (theirs == nil) != tc.accept {
				t.Fatalf("want accept=%v; ours: %v; stripe-go: %v", tc.accept, ours, theirs)
			}
		})
	}

	// Where the two differ, on purpose: stripe-go has no upper bound on the
	// timestamp; a signature dated in the future is refused here.
	future := now.Add(301 * time.Second)
	header := fmt.Sprintf("t=%d,v1=%s", future.Unix(), sig(stripeSecret, future, body))
	if err := stripewebhook.ValidatePayload(body, header, stripeSecret); err != nil {
		t.Fatalf("stripe-go changed: it now refuses a future timestamp: %v", err)
	}
	wantErr(t, p.CheckSignature(stripeHeader(header), body, now), webhook.ErrTooNew)
}

func TestStripeRejectsMalformedSignatureHeaders(t *testing.T) {
	p := mustNew(t, "stripe", stripeSecret)
	body := []byte(`{"id":"evt_1"}`)
	ts := fmt.Sprint(testNow.Unix())
	good := strings.TrimPrefix(webhooktest.StripeSignature(stripeSecret, body, testNow), "t="+ts+",v1=")
	if len(good) != 64 {
		t.Fatalf("unexpected signature shape %q", good)
	}
	for _, tc := range []struct {
		header string
		want   error
	}{
		{"", webhook.ErrNotSigned},
		{"garbage", webhook.ErrInvalidHeader},
		{"t=" + ts + ",v1=" + good + ",", webhook.ErrInvalidHeader},
		{",t=" + ts + ",v1=" + good, webhook.ErrInvalidHeader},
		{"=x,t=" + ts + ",v1=" + good, webhook.ErrInvalidHeader},
		{"v1=" + good, webhook.ErrInvalidHeader},
		{"t=,v1=" + good, webhook.ErrInvalidHeader},
		{"t=abc,v1=" + good, webhook.ErrInvalidHeader},
		{"t=-" + ts + ",v1=" + good, webhook.ErrInvalidHeader},
		{"t=+" + ts + ",v1=" + good, webhook.ErrInvalidHeader},
		{"t=0" + ts + ",v1=" + good, webhook.ErrInvalidHeader},
		{"t=" + ts + ".5,v1=" + good, webhook.ErrInvalidHeader},
		{"t=99999999999999999999,v1=" + good, webhook.ErrInvalidHeader},
		{"t=" + ts + ",t=" + ts + ",v1=" + good, webhook.ErrInvalidHeader},
		// A v1 that is not a hex HMAC-SHA256 matches nothing (as in stripe-go).
		{"t=" + ts + ",v1=", webhook.ErrNoValidSignature},
		{"t=" + ts + ",v1=" + good[:63], webhook.ErrNoValidSignature},
		{"t=" + ts + ",v1=" + good + "00", webhook.ErrNoValidSignature},
		{"t=" + ts + ",v1=" + good[:62] + "zz", webhook.ErrNoValidSignature},
		{"t=" + ts + ",v1=" + good + "=", webhook.ErrNoValidSignature},
		{"t=" + ts + ",v1=nothex,v1=potato", webhook.ErrNoValidSignature},
		{"t=" + ts, webhook.ErrNoValidSignature},
		{"t=" + ts + ",v0=" + good, webhook.ErrNoValidSignature},
		{"t=" + ts + ",V1=" + good, webhook.ErrNoValidSignature},
		{"t=" + ts + ", v1=" + good, webhook.ErrNoValidSignature},
	} {
		err := p.CheckSignature(stripeHeader(tc.header), body, testNow)
		if !errors.Is(err, tc.want) {
			t.Errorf("%q: error = %v, want %v", tc.header, err, tc.want)
		}
	}
}

// TestStripeValidV1BesideAnUnparseableV1IsAccepted follows Stripe's own
// libraries: stripe-go's webhook/client_test.go TestTokenNew appends
// ",v1=bad_signature" to a valid header and expects no error ("an unreadable
// signature in the header (should be ignored)"; webhook/client.go: "Ignore
// invalid signatures"), and stripe-node's test/Webhook.spec.ts "should return
// true when the header contains at least one valid signature" appends
// ",v1=potato". Both headers also go through stripe-go itself.
func TestStripeValidV1BesideAnUnparseableV1IsAccepted(t *testing.T) {
	p := mustNew(t, "stripe", stripeSecret)
	now := time.Now() // stripe-go reads the real clock
	body := readFixture(t, "events/stripe_payment_intent_succeeded.json")
	valid := webhooktest.StripeSignature(stripeSecret, body, now)
	for _, header := range []string{
		valid + ",v1=bad_signature", // stripe-go TestTokenNew
		valid + ",v1=potato",        // stripe-node "at least one valid signature"
		fmt.Sprintf("t=%d,v1=potato,v1=%s", now.Unix(), strings.TrimPrefix(valid, fmt.Sprintf("t=%d,v1=", now.Unix()))),
		valid + ",v1=" + strings.Repeat("f", 63), // hex-like, wrong length
	} {
		if err := p.CheckSignature(stripeHeader(header), body, now); err != nil {
			t.Errorf("%q: %v", header, err)
		}
		if err := stripewebhook.ValidatePayload(body, header, stripeSecret); err != nil {
			t.Errorf("stripe-go refuses %q: %v", header, err)
		}
	}
	// Without the valid v1, nothing verifies, in either library.
	header := fmt.Sprintf("t=%d,v1=bad_signature", now.Unix())
	wantErr(t, p.CheckSignature(stripeHeader(header), body, now), webhook.ErrNoValidSignature)
	if err := stripewebhook.ValidatePayload(body, header, stripeSecret); err == nil {
		t.Fatal("stripe-go accepted a header without a valid v1")
	}
}

func TestStripeEventReadsIDTypeAndObject(t *testing.T) {
	p := mustNew(t, "stripe", stripeSecret)
	for _, tc := range []struct {
		fixture string
		want    event
	}{
		{"events/stripe_payment_intent_succeeded.json", event{
			ID: "evt_3QHyJ2LkdIwHu7ix0b7kYp9T", Type: "payment_intent.succeeded", ObjectID: "pi_3QHyJ2LkdIwHu7ix0DhVe0Fd",
		}},
		{"events/stripe_thin_event.json", event{
			ID: "evt_test_65R9Ijk8fKDlGYv1Zpq16R9L8BSQvbKiqUQJ6pEfi2ll", Type: "v1.billing.meter.error_report_triggered",
			ObjectID: "mtr_test_61R9IjjvBjRb1pm9U41I0nBx6DDKrNbE",
		}},
	} {
		got, err := p.Event(nil, readFixture(t, tc.fixture))
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Event = %+v, %v; want %+v", tc.fixture, got, err, tc.want)
		}
	}
}

func TestStripeEventNeedsAStringID(t *testing.T) {
	p := mustNew(t, "stripe", stripeSecret)
	for _, body := range []string{
		`{}`, `{"id":""}`, `{"id":42}`, `{"id":null}`, `{"id":["evt_1"]}`,
		`{"type":"charge.succeeded","data":{"object":{"id":"ch_1"}}}`,
	} {
		_, err := p.Event(nil, []byte(body))
		wantErr(t, err, webhook.ErrNoEventID)
	}
	// Optional fields of the wrong shape are left empty, not fatal.
	got, err := p.Event(nil, []byte(`{"id":"evt_1","type":7,"data":{"object":"pi_1"}}`))
	if err != nil || !reflect.DeepEqual(got, event{ID: "evt_1"}) {
		t.Fatalf("Event = %+v, %v", got, err)
	}
}
