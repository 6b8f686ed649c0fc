package webhook_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// BenchmarkVerifyStripe2KB is Verify alone on a 2 KB Stripe delivery: the
// signature, the one pass over the body, the delivery and its fingerprint.
func BenchmarkVerifyStripe2KB(b *testing.B) {
	now := time.Now()
	r, err := webhooktest.Sample("stripe", "evt_bench_verify", now)
	if err != nil {
		b.Fatal(err)
	}
	if pad := 2048 - len(r.Body); pad > 12 {
		r.Body = bytes.Replace(r.Body, []byte(`"metadata": {`), []byte(`"metadata": {"note": "`+strings.Repeat("x", pad-12)+`",`), 1)
	}
	signed, err := webhooktest.Sign("stripe", "whsec_bench", r)
	if err != nil {
		b.Fatal(err)
	}
	v, err := webhook.New("stripe", []string{"whsec_bench"}, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(signed.Body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(signed); err != nil {
			b.Fatal(err)
		}
	}
}
