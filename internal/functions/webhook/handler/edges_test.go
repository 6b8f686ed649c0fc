package handler

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Mailgun and SendGrid sign a timestamp: a delivery signed an hour ago is a replay, refused
// before Redis.
func TestMailgunAndSendGridSignedAnHourAgoAreTooOld(t *testing.T) {
	for _, provider := range []string{"mailgun", "sendgrid"} {
		t.Run(provider, func(t *testing.T) {
			hs := newHarness(t, provider, harnessConfig{})
			d := sampleDelivery(t, provider, "evt_"+provider+"_hour_old")
			wantStatus(t, hs.do(t, d.signed(t, testSecret(provider), hs.clock.Now().Add(-time.Hour))), 401, "timestamp_out_of_tolerance")
			if n := hs.counter.Commands.Load(); n != 0 {
				t.Errorf("%d Redis commands", n)
			}
			wantStatus(t, hs.deliver(t, d), 200, "")
		})
	}
}

// A sender whose preset reads nothing of the body (Bitbucket, SendGrid, HubSpot) still sends
// JSON: a signed body that is not one JSON document, or is nested deeper than a sink can
// encode, is a 400 before any claim, never a 500 the sender retries forever.
func TestSignedBodyThatIsNotJSONIsRefusedBeforeAnyClaim(t *testing.T) {
	deep := []byte(`{"a":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`)
	for _, provider := range []string{"bitbucket", "sendgrid", "hubspot"} {
		for name, body := range map[string][]byte{"not JSON": []byte("push=1&repo=x"), "20,000 deep": deep} {
			t.Run(provider+"/"+name, func(t *testing.T) {
				hs := newHarness(t, provider, harnessConfig{})
				d := delivery{provider: provider, body: body, headers: map[string]string{"content-type": "application/json"}}
				wantStatus(t, hs.deliver(t, d), 400, "invalid_payload")
				if n := hs.counter.Commands.Load(); n != 0 {
					t.Errorf("%d Redis commands", n)
				}
				if n := hs.sink.attempts(); n != 0 {
					t.Errorf("sink called %d times", n)
				}
			})
		}
	}
}

// GitHub's delivery GUID is unsigned, so it is not the key; the request line still names it, so
// an operator can find the delivery GitHub's "Recent deliveries" shows.
func TestRequestLineNamesTheUnsignedDeliveryID(t *testing.T) {
	hs := newHarness(t, "github", harnessConfig{})
	d := sampleDelivery(t, "github", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	wantStatus(t, hs.deliver(t, d), 200, "")
	l := hs.logs.requests(t)[0]
	if l["delivery_id"] != "72d3162e-cc78-11e3-81ab-4c9367dc0958" || l["id"] == l["delivery_id"] {
		t.Fatalf("log line %v, want the delivery GUID beside the key", l)
	}
}

// GitLab's token binds no bytes and Mailgun signs its timestamp and token only: the events they
// forward say their payloads are unsigned, and Mailgun's carries no signature block.
func TestEnvelopesSayWhatTheSignatureLeavesOut(t *testing.T) {
	for provider, wantSigned := range map[string][]string{
		"gitlab":  {"object_id"},
		"mailgun": {"id"},
		"stripe":  {"id", "type", "object_id", "payload"},
	} {
		t.Run(provider, func(t *testing.T) {
			hs := newHarness(t, provider, harnessConfig{})
			wantStatus(t, hs.deliver(t, sampleDelivery(t, provider, "evt_envelope_"+provider)), 200, "")
			sent := hs.sink.sent()
			if len(sent) != 1 {
				t.Fatalf("%d events", len(sent))
			}
			e := sent[0]
			if got := e.Signed(); !slices.Equal(got, wantSigned) {
				t.Errorf("signed %v (unsigned %v), want %v", got, e.Unsigned, wantSigned)
			}
			if provider == "mailgun" && (strings.Contains(string(e.Body), `"signature"`) || strings.Contains(string(e.Body), `"token"`)) {
				t.Errorf("Mailgun's signature material reached the sink: %s", e.Body)
			}
		})
	}
}
