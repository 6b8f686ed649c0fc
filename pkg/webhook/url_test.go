package webhook_test

import (
	"errors"
	"testing"

	"github.com/idemlambda/idem/pkg/webhook"
)

// The Square vector verifies at the URL pasted into Square, and at no other
// (the API Gateway URL behind a custom domain).
func TestSquareVerifiesBehindACustomDomain(t *testing.T) {
	v := presetVerifier(t, "square", squareKey)
	r := squareRequest(squareURL, squareBody, squareSig)
	if err := v.CheckSignature(r); err != nil {
		t.Fatal(err)
	}
	r.URL = "https://abc.execute-api.us-east-1.amazonaws.com/webhooks/square"
	if err := v.CheckSignature(r); !errors.Is(err, webhook.ErrNoValidSignature) {
		t.Fatalf("without the override: %v", err)
	}
}
