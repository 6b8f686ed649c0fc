package webhook_test

import (
	"net/url"
	"testing"

	"github.com/idemlambda/idem/pkg/webhook"
)

// Twilio's published request-validation vectors. Sources:
//   - twilio/twilio-node spec/validation.spec.js, describe "Request validation"
//   - twilio/twilio-go client/request_validator_test.go,
//     TestRequestValidator_Validate and TestRequestValidator_ValidateBody
//
// All use the auth token "12345" and https://mycompany.com/myapp.php?foo=1&bar=2.
const (
	twilioToken = "12345"
	twilioURL   = "https://mycompany.com/myapp.php?foo=1&bar=2"
	twilioBody  = `{"property": "value", "boolean": true}`
	twilioHash  = "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
)

// twilioParams5 is twilio-node's parameter set; twilioParams7 is
// twilio-go's, with two names that sort tightly (Reason, ReasonConferenceEnded).
var (
	twilioParams5 = url.Values{
		"CallSid": {"CA1234567890ABCDE"},
		"Caller":  {"+14158675309"},
		"Digits":  {"1234"},
		"From":    {"+14158675309"},
		"To":      {"+18005551212"},
	}
	twilioParams7 = url.Values{
		"CallSid":               {"CA1234567890ABCDE"},
		"Caller":                {"+14158675309"},
		"Digits":                {"1234"},
		"From":                  {"+14158675309"},
		"To":                    {"+18005551212"},
		"ReasonConferenceEnded": {"test"},
		"Reason":                {"Participant"},
	}
)

// twilioForm is a form-encoded delivery of params to rawURL.
func twilioForm(rawURL string, params url.Values, signature string) webhook.Request {
	h := map[string]string{"content-type": "application/x-www-form-urlencoded"}
	if signature != "" {
		h["x-twilio-signature"] = signature
	}
	return webhook.Request{URL: rawURL, Header: hdr(h), Body: []byte(params.Encode())}
}

// twilioJSON is a JSON delivery to rawURL.
func twilioJSON(rawURL, body, signature string) webhook.Request {
	return webhook.Request{URL: rawURL, Body: []byte(body), Header: hdr(map[string]string{
		"content-type": "application/json", "x-twilio-signature": signature,
	})}
}

func TestTwilioPublishedVectors(t *testing.T) {
	checkVectors(t, "twilio", []vector{
		// twilio-node "should succeed with the correct signature"
		{"node correct signature", twilioToken, twilioForm(twilioURL, twilioParams5, "RSOYDt4T1cUTdK1PDd93/VVr8B8="), nil},
		// twilio-node "should fail with the wrong signature"
		{"node wrong signature", twilioToken, twilioForm(twilioURL, twilioParams5, "WRONG_SIGNATURE"), webhook.ErrInvalidHeader},
		// twilio-node "should fail if signature undefined"
		{"node no signature", twilioToken, twilioForm(twilioURL, twilioParams5, ""), webhook.ErrNotSigned},
		// twilio-node "should validate https urls with ports by stripping them"
		{"node https port stripped", twilioToken, twilioForm("https://mycompany.com:1234/myapp.php?foo=1&bar=2", twilioParams5, "RSOYDt4T1cUTdK1PDd93/VVr8B8="), nil},
		// twilio-node "should validate http urls with ports"
		{"node http with port", twilioToken, twilioForm("http://mycompany.com:1234/myapp.php?foo=1&bar=2", twilioParams5, "Zmvh+3yNM1Phv2jhDCwEM3q5ebU="), nil},
		// twilio-node "should validate https urls without ports by adding standard port 443"
		{"node https add 443", twilioToken, twilioForm(twilioURL, twilioParams5, "kvajT1Ptam85bY51eRf/AJRuM3w="), nil},
		// twilio-node "should validate http urls without ports by adding standard port 80"
		{"node http add 80", twilioToken, twilioForm("http://mycompany.com/myapp.php?foo=1&bar=2", twilioParams5, "0ZXoZLH/DfblKGATFgpif+LLRf4="), nil},
		// twilio-node "should validate urls with credentials"
		{"node credentials", twilioToken, twilioForm("https://user:pass@mycompany.com/myapp.php?foo=1&bar=2", twilioParams5, "CukzLTc1tT5dXEDIHm/tKBanW10="), nil},
		// twilio-node "should validate urls with just username"
		{"node username", twilioToken, twilioForm("https://user@mycompany.com/myapp.php?foo=1&bar=2", twilioParams5, "2YRLlVAflCqxaNicjMpJcSTgzSs="), nil},
		// twilio-node "should validate urls with credentials by adding port"
		{"node credentials add port", twilioToken, twilioForm("https://user:pass@mycompany.com/myapp.php?foo=1&bar=2", twilioParams5, "ZQFR1PTIZXF2MXB8ZnKCvnnA+rI="), nil},
		// twilio-node "should validate urls with special characters": Twilio
		// posts the query as it serialises it (' as %27), which is what
		// API Gateway's raw query string holds.
		{"node special characters", twilioToken, twilioForm(twilioURL+"&Body=It%27s+amazing", twilioParams5, "TfZzewPq8wqrGlMfyAud8+/IvJ0="), nil},
		// twilio-node "should validate request body with an array parameter"
		{"node array parameter", twilioToken, twilioForm(twilioURL, url.Values{"MessagingBinding.Address": {"+1415xxxxxxx", "+1325xxxxxxx"}}, "83O6e2vORAoJHUNzJjDWN1jz+BA="), nil},
		// twilio-node "should validate request body with multiple parameters and values"
		{"node multiple values", twilioToken, twilioForm(twilioURL, url.Values{"Sid": {"CA123"}, "SidAccount": {"AC123"}, "Digits": {"5678", "1234", "1234"}}, "IK+Dwps556ElfBT0I3Rgjkr1wJU="), nil},
		// twilio-go "returns true when validation succeeds"
		{"go validation succeeds", twilioToken, twilioForm(twilioURL, twilioParams7, "vOEb5UThFn24KEfnOFLQY2AE5FY="), nil},
		// twilio-go "returns false when validation fails"
		{"go validation fails", twilioToken, twilioForm(twilioURL, twilioParams7, "WRONG SIGNATURE"), webhook.ErrInvalidHeader},
		// twilio-go "returns true when https and port is specified but signature is generated without it"
		{"go https port stripped", twilioToken, twilioForm("https://mycompany.com:1234/myapp.php?foo=1&bar=2", twilioParams7, "vOEb5UThFn24KEfnOFLQY2AE5FY="), nil},
		// twilio-go "returns true when http and port port is specified but signature is generated without it"
		{"go http without port", twilioToken, twilioForm("http://mycompany.com/myapp.php?foo=1&bar=2", twilioParams7, "n2xBNyzSW7rfYStDtOFiFMv7qNo="), nil},
		// twilio-go "returns true when http and port is specified and signature is generated with it"
		{"go http port 1234", twilioToken, twilioForm("http://mycompany.com:1234/myapp.php?foo=1&bar=2", twilioParams7, "n2xBNyzSW7rfYStDtOFiFMv7qNo="), nil},
		// twilio-go "returns false when params are sorted incorrectly"
		{"go params sorted incorrectly", twilioToken, twilioForm(twilioURL, twilioParams7, "95+Bu0JVPi0r/SsESZCVf0dWAjw="), webhook.ErrNoValidSignature},
		// wrong token (twilio-node validation.spec.js signs with "12345" only;
		// any other token must fail)
		{"other token", "54321", twilioForm(twilioURL, twilioParams5, "RSOYDt4T1cUTdK1PDd93/VVr8B8="), webhook.ErrNoValidSignature},

		// JSON bodies: the URL carries bodySHA256, the URL is signed.
		// twilio-go/twilio-node "validation succeeds with json body"
		{"json body", twilioToken, twilioJSON(twilioURL+"&bodySHA256="+twilioHash, twilioBody, "a9nBmqA0ju/hNViExpshrM61xv4="), nil},
		// twilio-go "returns false when validation fails" (ValidateBody): no bodySHA256
		{"json body without bodySHA256", twilioToken, twilioJSON(twilioURL, twilioBody, "RSOYDt4T1cUTdK1PDd93/VVr8B8="), webhook.ErrNotSigned},
		// twilio-go/twilio-node "returns true when there's no other parameters and the signature is right"
		{"json only sha param", twilioToken, twilioJSON("https://mycompany.com/myapp.php?bodySHA256="+twilioHash, twilioBody, "y77kIzt2vzLz71DgmJGsen2scGs="), nil},
		// twilio-node "should validate request body when empty"
		{"json empty object", twilioToken, twilioJSON(twilioURL+"&bodySHA256=44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a", "{}", "Ldidvp12m26NI7eqEvxnEpkd9Hc="), nil},
		// twilio-node validateBody "should fail with the wrong hash"
		{"json body tampered", twilioToken, twilioJSON(twilioURL+"&bodySHA256="+twilioHash, `{"property": "value", "boolean": false}`, "a9nBmqA0ju/hNViExpshrM61xv4="), webhook.ErrNoValidSignature},
		// twilio-go "form body": property=value&boolean=true, form encoded
		{"go form body", twilioToken, twilioForm(twilioURL, url.Values{"property": {"value"}, "boolean": {"true"}}, "NBdBDr/T/lgjI+tlgpXjKZQZs/k="), nil},
	})
}

func TestTwilioNeedsThePublicURL(t *testing.T) {
	v := presetVerifier(t, "twilio", twilioToken)
	r := twilioForm("", twilioParams5, "RSOYDt4T1cUTdK1PDd93/VVr8B8=")
	if err := v.CheckSignature(r); err == nil {
		t.Fatal("verified without a URL")
	}
}

func TestTwilioIDIsTheSameForEveryOrderOfTheSignedForm(t *testing.T) {
	v := presetVerifier(t, "twilio", twilioToken)
	a := twilioForm(twilioURL, twilioParams5, "RSOYDt4T1cUTdK1PDd93/VVr8B8=")
	// The same parameters in another order still verify: the signature
	// covers them sorted. The dedupe id must not change with the order or
	// with the port spelling.
	b := a
	b.Body = []byte("To=%2B18005551212&From=%2B14158675309&Digits=1234&Caller=%2B14158675309&CallSid=CA1234567890ABCDE")
	b.URL = "https://mycompany.com:443/myapp.php?foo=1&bar=2"
	for _, r := range []webhook.Request{a, b} {
		if err := v.CheckSignature(r); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	}
	da, err := v.Event(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := v.Event(b)
	if err != nil {
		t.Fatal(err)
	}
	if da.ID != db.ID || da.ID == "" {
		t.Fatalf("ids %q and %q: one signed delivery, two ids", da.ID, db.ID)
	}
	c := twilioForm(twilioURL, url.Values{"property": {"value"}, "boolean": {"true"}}, "NBdBDr/T/lgjI+tlgpXjKZQZs/k=")
	dc, _ := v.Event(c)
	if dc.ID == da.ID {
		t.Fatal("two different deliveries share an id")
	}
}
