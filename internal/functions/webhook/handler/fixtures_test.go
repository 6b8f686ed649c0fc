package handler

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

var update = flag.Bool("update", false, "rewrite testdata/deliveries from the providers' samples, signed at fixedNow with testSecret")

// recordedIDs are the event ids of the recorded deliveries in testdata/deliveries.
var recordedIDs = map[string]string{
	"stripe":   "evt_3QkR7uLkdIwHu7ix1aB2cD3e",
	"github":   "6f1e2d3c-f5a1-11f0-8a2b-4c3d2e1f0a9b",
	"shopify":  "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
	"standard": "msg_2pTjHHu8Yx6FMa5ZnV1JqRfT0kC",
	"slack":    "Ev08MFMKH6A1",
}

// slackURLVerification is the url_verification body from Slack's Events API documentation.
const slackURLVerification = `{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`

func deliveryPath(name string) string { return filepath.Join("testdata", "deliveries", name+".json") }

// TestRecordedDeliveriesAreAccepted replays API Gateway events recorded in testdata, exactly as
// Lambda would hand them to the function.
func TestRecordedDeliveriesAreAccepted(t *testing.T) {
	if *update {
		writeRecordedDeliveries(t)
	}
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		var req events.APIGatewayV2HTTPRequest
		readJSON(t, deliveryPath(pc.name), &req)
		hs := newHarness(t, pc.name, harnessConfig{})
		wantReceipt(t, hs.do(t, req), recordedIDs[pc.name])
		if sent := hs.sink.sent(); len(sent) != 1 || !bytes.Equal(sent[0].Body, []byte(req.Body)) {
			t.Errorf("sink did not get the recorded body once")
		}
	})
}

func TestFormEncodedGitHubDeliveryForwardsItsJSONPayload(t *testing.T) {
	var req events.APIGatewayV2HTTPRequest
	readJSON(t, deliveryPath("github_form"), &req)
	if !req.IsBase64Encoded {
		t.Fatal("fixture is not base64-encoded")
	}
	raw, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		t.Fatal(err)
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		t.Fatal(err)
	}

	hs := newHarness(t, "github", harnessConfig{})
	wantReceipt(t, hs.do(t, req), "1d4b3c2a-f5a1-11f0-9c3e-form0encoded")
	sent := hs.sink.sent()
	if len(sent) != 1 || string(sent[0].Body) != form.Get("payload") || !json.Valid(sent[0].Body) {
		t.Errorf("sink body is not the form's JSON payload")
	}
}

// writeRecordedDeliveries regenerates the files TestRecordedDeliveriesAreAccepted reads.
func writeRecordedDeliveries(t *testing.T) {
	t.Helper()
	write := func(name string, req events.APIGatewayV2HTTPRequest) {
		// Through a map, to drop the empty mTLS member the struct always writes and API
		// Gateway sends only with mutual TLS.
		var m map[string]any
		b, err := json.Marshal(req)
		if err == nil {
			err = json.Unmarshal(b, &m)
		}
		if err != nil {
			t.Fatal(err)
		}
		delete(m["requestContext"].(map[string]any), "authentication")
		if b, err = json.MarshalIndent(m, "", "  "); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(deliveryPath(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(deliveryPath(name), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for provider, id := range recordedIDs {
		write(provider, sampleDelivery(t, provider, id).signed(t, testSecret(provider), fixedNow))
	}

	slack := delivery{provider: "slack", body: []byte(slackURLVerification),
		headers: map[string]string{"content-type": "application/json", "user-agent": "Slackbot 1.0 (+https://api.slack.com/robots)"}}
	write("slack_url_verification", slack.signed(t, testSecret("slack"), fixedNow))

	payload, headers := signer(t, "github").Sample("1d4b3c2a-f5a1-11f0-9c3e-form0encoded", fixedNow)
	headers["content-type"] = "application/x-www-form-urlencoded"
	form := delivery{provider: "github", body: []byte(url.Values{"payload": {string(payload)}}.Encode()), headers: headers}
	req := form.signed(t, testSecret("github"), fixedNow)
	req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString(form.body), true
	write("github_form", req)
}
