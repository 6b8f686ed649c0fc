package webhook_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/preset"
	"github.com/idemlambda/idem/pkg/webhook"
)

// HubSpot's published v1 and v2 test requests, from HubSpot/hubspot-api-nodejs
// test/unit/signature.spec.ts ("Validates v1", "Validates v2", "Validates v2
// with body"), verified there by src/utils/signature.ts. None carries a v3
// signature.
const (
	hubspotSecret = "yyyyyyyy-yyyy-yyyy-yyyy-yyyyyyyyyyyy"
	hubspotV1Body = `[{"eventId":1,"subscriptionId":12345,"portalId":62515,"occurredAt":1564113600000,"subscriptionType":"contact.creation","attemptNumber":0,"objectId":123,"changeSource":"CRM","changeFlag":"NEW","appId":54321}]`
	hubspotV1Sig  = "232db2615f3d666fe21a8ec971ac7b5402d33b9a925784df3ca654d05f4817de"
	hubspotV2URL  = "https://www.example.com/webhook_uri"
	hubspotV2Sig  = "eee2dddcc73c94d699f5e395f4b9d454a069a6855fbfa152e91e88823087200e" // GET, empty body
	hubspotV2Body = `{"example_field":"example_value"}`
	hubspotV2Post = "9569219f8ba981ffa6f6f16aa0f48637d35d728c7e4d93d0d52efaa512af7900" // POST, hubspotV2Body
)

func hubspotLegacyVerifier(t *testing.T, allow bool) *webhook.Verifier {
	t.Helper()
	p, _ := preset.Lookup("hubspot")
	p.AllowLegacySignatures = allow
	v, err := webhook.NewVerifier(p, []string{hubspotSecret}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func hubspotLegacyRequest(version, signature, method, url, body string) webhook.Request {
	r := headerRequest(body, "x-hubspot-signature", signature, "x-hubspot-signature-version", version)
	r.Method, r.URL, r.Now = method, url, time.Now()
	return r
}

func TestHubSpotV1AndV2SDKVectorsAreAcceptedWithTheSetting(t *testing.T) {
	v := hubspotLegacyVerifier(t, true)
	for name, r := range map[string]webhook.Request{
		"v1":           hubspotLegacyRequest("v1", hubspotV1Sig, "POST", "https://example.com/webhooks/hubspot", hubspotV1Body),
		"v2 GET":       hubspotLegacyRequest("v2", hubspotV2Sig, "GET", hubspotV2URL, ""),
		"v2 with body": hubspotLegacyRequest("v2", hubspotV2Post, "POST", hubspotV2URL, hubspotV2Body),
		"v2 port 443":  hubspotLegacyRequest("v2", hubspotV2Post, "POST", "https://www.example.com:443/webhook_uri", hubspotV2Body),
	} {
		if err := v.CheckSignature(r); err != nil {
			t.Errorf("%s: Verify = %v", name, err)
		}
	}
	// No timestamp is signed: a captured v1 delivery verifies a year later.
	// Only the retention (96h) stands between it and a second execution.
	late := hubspotLegacyRequest("v1", hubspotV1Sig, "POST", "https://example.com/webhooks/hubspot", hubspotV1Body)
	late.Now = time.Now().AddDate(1, 0, 0)
	if err := v.CheckSignature(late); err != nil {
		t.Errorf("v1 a year later: %v (v1 has no timestamp to refuse it by)", err)
	}
	// The key is the digest of the body less attemptNumber, whatever URL it
	// came to: v1 does not sign the URL, so a query string must not make a new key.
	d1, err1 := v.Event(late)
	other := late
	other.URL += "?replay=1"
	d2, err2 := v.Event(other)
	retry := hubspotLegacyRequest("v1", hubspotV1Sig, "POST", late.URL, strings.Replace(hubspotV1Body, `"attemptNumber":0`, `"attemptNumber":1`, 1))
	d3, err3 := v.Event(retry)
	if err1 != nil || err2 != nil || err3 != nil || d1.ID != d2.ID || d1.ID != d3.ID || !strings.HasPrefix(d1.ID, "sha256:") {
		t.Errorf("keys %q %q %q (%v %v %v), want one body digest", d1.ID, d2.ID, d3.ID, err1, err2, err3)
	}
}

func TestHubSpotLegacySignaturesAreRefusedByDefault(t *testing.T) {
	v := hubspotLegacyVerifier(t, false)
	err := v.CheckSignature(hubspotLegacyRequest("v1", hubspotV1Sig, "POST", "https://example.com/webhooks/hubspot", hubspotV1Body))
	if !errors.Is(err, webhook.ErrNotSigned) || !strings.Contains(err.Error(), "AllowLegacySignatures") {
		t.Fatalf("v1 without the setting: %v, want ErrNotSigned naming AllowLegacySignatures", err)
	}
	// A preset without legacy signatures cannot allow them.
	p, _ := preset.Lookup("github")
	p.AllowLegacySignatures = true
	if _, err := webhook.NewVerifier(p, []string{"s"}, 0); err == nil {
		t.Fatal("github with AllowLegacySignatures: accepted")
	}
}

func TestHubSpotLegacyTamperedIsRefused(t *testing.T) {
	v := hubspotLegacyVerifier(t, true)
	for _, tc := range []struct {
		name string
		r    webhook.Request
		want error
	}{
		{"v1 body changed", hubspotLegacyRequest("v1", hubspotV1Sig, "POST", "", strings.Replace(hubspotV1Body, `"objectId":123`, `"objectId":124`, 1)), webhook.ErrNoValidSignature},
		{"v1 signature said v2", hubspotLegacyRequest("v2", hubspotV1Sig, "POST", hubspotV2URL, hubspotV1Body), webhook.ErrNoValidSignature},
		{"v2 method changed", hubspotLegacyRequest("v2", hubspotV2Sig, "POST", hubspotV2URL, ""), webhook.ErrNoValidSignature},
		{"v2 URL changed", hubspotLegacyRequest("v2", hubspotV2Post, "POST", hubspotV2URL+"?x=1", hubspotV2Body), webhook.ErrNoValidSignature},
		{"v2 without the URL", hubspotLegacyRequest("v2", hubspotV2Post, "POST", "", hubspotV2Body), webhook.ErrNoPublicURL},
		{"unknown version", hubspotLegacyRequest("v4", hubspotV1Sig, "POST", "", hubspotV1Body), webhook.ErrInvalidHeader},
		{"not hex", hubspotLegacyRequest("v1", strings.Repeat("z", 64), "POST", "", hubspotV1Body), webhook.ErrInvalidHeader},
		{"other secret", hubspotLegacyRequest("v1", strings.Repeat("a", 64), "POST", "", hubspotV1Body), webhook.ErrNoValidSignature},
	} {
		if err := v.CheckSignature(tc.r); !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.want)
		}
	}
	// A v3 header present is the one checked: a valid v1 beside a bad v3 is refused.
	r := hubspotLegacyRequest("v1", hubspotV1Sig, "POST", "https://example.com/webhooks/hubspot", hubspotV1Body)
	r.Header.Set("x-hubspot-signature-v3", strings.Repeat("A", 43)+"=")
	r.Header.Set("x-hubspot-request-timestamp", "1")
	if err := v.CheckSignature(r); err == nil {
		t.Error("a bad v3 beside a good v1: accepted")
	}
}
