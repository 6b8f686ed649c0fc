package handler

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/idemlambda/idem/internal/config"
	"github.com/idemlambda/idem/internal/preset"
	"io"
	"maps"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
	"github.com/idemlambda/idem/pkg/webhook"
)

// TestCapturedDeliveryResentUnderFreshIDsExecutesOnce: GitHub and Shopify sign the body only.
// A delivery captured once and re-sent under 5 fresh delivery ids, and then under another
// event type, executes exactly once in total, on the shared real Redis (127.0.0.1:6379 unless
// REDIS_TEST_ADDR says otherwise) under a unique prefix: one key, one sink event labelled
// with the genuine delivery's headers.
func TestCapturedDeliveryResentUnderFreshIDsExecutesOnce(t *testing.T) {
	for _, tc := range []struct {
		provider               string
		deliveryHeaders        []string
		typeHeader, attackType string
	}{
		{"github", []string{"x-github-delivery"}, "x-github-event", "release"},
		{"shopify", []string{"x-shopify-webhook-id", "x-shopify-event-id"}, "x-shopify-topic", "refunds/create"},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			hs := newHarness(t, tc.provider, harnessConfig{})
			genuineID := tc.provider + "-genuine-0001"
			captured := sampleDelivery(t, tc.provider, genuineID).signed(t, testSecret(tc.provider), hs.clock.Now())
			first := hs.do(t, captured)
			wantReceipt(t, first, genuineID)

			resend := func(id, typ string) {
				t.Helper()
				req := captured // the same signed bytes and signature header
				req.Headers = maps.Clone(captured.Headers)
				for _, name := range tc.deliveryHeaders {
					req.Headers[name] = id
				}
				req.Headers[tc.typeHeader] = typ
				resp := hs.do(t, req)
				wantStatus(t, resp, 200, "")
				if resp.Body != first.Body || resp.Headers[idemhttp.HeaderReplayed] != "true" {
					t.Errorf("re-sent as %s/%s: %s %v, want the first's receipt replayed", id, typ, resp.Body, resp.Headers)
				}
			}
			for i := range 5 {
				resend(fmt.Sprintf("replay-%d", i), captured.Headers[tc.typeHeader])
			}
			resend("replay-type", tc.attackType)

			sent := hs.sink.sent()
			if n := hs.sink.attempts(); n != 1 || len(sent) != 1 {
				t.Fatalf("sink called %d times, want exactly 1", n)
			}
			if e := sent[0]; e.DeliveryID != genuineID || e.Type == tc.attackType || e.ID != bodyDigest([]byte(captured.Body)) {
				t.Errorf("sink event %+v, want the genuine delivery keyed on its body", e)
			}
			if keys := hs.keys(t); len(keys) != 1 {
				t.Errorf("%d keys under the prefix, want 1: %v", len(keys), keys)
			}
			// The key comes from bytes at hand: the budget of round trips is unchanged, 2 for
			// the first delivery and 1 for each replay.
			checkExecutedOnceThenReplayed(t, hs.logs.requests(t), 6)
		})
	}
}

// checkExecutedOnceThenReplayed checks that the request lines are one execution, in 2 round
// trips, and replays replays of 1 round trip each.
func checkExecutedOnceThenReplayed(t *testing.T, lines []map[string]any, replays int) {
	t.Helper()
	outcomes := map[any]int{}
	for _, l := range lines {
		outcomes[l["outcome"]]++
		want := map[any]float64{"executed": 2, "replayed": 1}[l["outcome"]]
		if l["redis_round_trips"] != want {
			t.Errorf("%v with %v round trips, want %v", l["outcome"], l["redis_round_trips"], want)
		}
	}
	if outcomes["executed"] != 1 || outcomes["replayed"] != replays {
		t.Errorf("outcomes %v, want 1 executed and %d replayed", outcomes, replays)
	}
}

// TestDevelopmentSecretRefusedInsideLambda: inside Lambda every provider's development secret,
// from WEBHOOK_SECRET (alone or in a rotation list, whichever provider published it) or from
// Secrets Manager, fails init with an error naming the variable; under sam local it starts.
func TestDevelopmentSecretRefusedInsideLambda(t *testing.T) {
	testsupport.IsolateAWS(t)
	const arnPrefix = "arn:aws:secretsmanager:us-east-1:123456789012:secret:dev-"
	stored := map[string]string{}
	for _, p := range webhook.Names() {
		stored[arnPrefix+p] = realSecret(p) + "," + webhook.DevSecret(p)
	}
	fake := newFakeSecretsManager(t, stored)
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", fake.URL)

	lambda := map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "REDIS_URL": "redis://" + testsupport.ClosedAddr(t)}
	for _, p := range webhook.Names() {
		variants := map[string]map[string]string{
			"its own":     {EnvSecret: webhook.DevSecret(p)},
			"in a list":   {EnvSecret: realSecret(p) + ", " + webhook.DevSecret(p)},
			"another's":   {EnvSecret: publishedKeyOf(p, otherProvider(p))},
			"from an ARN": {EnvSecretARN: arnPrefix + p},
		}
		if pre, _ := preset.Lookup(p); pre.Family == preset.FamilyPublicKey {
			// A public key is its sender's alone: no other sender publishes a key of its kind.
			delete(variants, "another's")
		}
		if p == "standard" {
			// The same key written without prefix or padding is the same secret.
			variants["re-encoded"] = map[string]string{EnvSecret: strings.TrimRight(strings.TrimPrefix(webhook.DevSecret(p), "whsec_"), "=")}
		}
		for name, vars := range variants {
			t.Run(p+"/"+name, func(t *testing.T) {
				all := map[string]string{EnvProvider: p}
				if p == "hmac" {
					all[config.HMACHeaderSetting] = "x-signature"
				}
				maps.Copy(all, lambda)
				maps.Copy(all, vars)
				wantVar := EnvSecret
				if vars[EnvSecretARN] != "" {
					wantVar = EnvSecretARN
				}

				h, err := New(context.Background(), env(all), WithLogOutput(io.Discard))
				if err == nil {
					h.Close()
					t.Fatal("init accepted a development secret inside Lambda")
				}
				var se *setting.Error
				if !errors.As(err, &se) || se.Var != wantVar || !strings.Contains(err.Error(), wantVar) {
					t.Fatalf("error %v, want a *setting.Error naming %s", err, wantVar)
				}
				if strings.Contains(err.Error(), realSecret(p)) {
					t.Errorf("error %q holds a secret", err)
				}

				all[EnvSAMLocal] = "true"
				h, err = New(context.Background(), env(all), WithLogOutput(io.Discard))
				if err != nil {
					t.Fatalf("under sam local: %v", err)
				}
				h.Close()
			})
		}
	}
}

// realSecret is a secret provider p can be configured with that is not published.
func realSecret(p string) string {
	_, verifying := secretPair(p, "real-rotated-secret-0123456789")
	return verifying
}

// publishedKeyOf is the development secret of provider other, written as provider p's
// secrets are (for standard, the same key bytes as a whsec_ secret).
func publishedKeyOf(p, other string) string {
	if p == "standard" {
		return whsec(webhook.DevSecret(other))
	}
	if p == "adyen" {
		return hex.EncodeToString([]byte(webhook.DevSecret(other))) // Adyen's keys are hex
	}
	return webhook.DevSecret(other)
}

// otherProvider is a provider other than p, for checking that every published secret is refused.
func otherProvider(p string) string {
	if p == "stripe" {
		return "github"
	}
	return "stripe"
}

// TestHugeSignatureHeaderGivesAShortLogLine: 500 KB of header text, quoted into the error of
// every provider's verifier, gives a request log line under 2 KiB.
func TestHugeSignatureHeaderGivesAShortLogLine(t *testing.T) {
	forEachProvider(t, func(t *testing.T, pc providerCase) {
		hs := newHarness(t, pc.name, harnessConfig{})
		d := sampleDelivery(t, pc.name, pc.eventID("huge"))
		req := d.signed(t, testSecret(pc.name), hs.clock.Now())
		element := strings.Repeat("\x01x\"", 500_000/3)
		for _, h := range []string{"stripe-signature", "x-hub-signature-256", "x-shopify-hmac-sha256",
			"webhook-signature", "x-slack-signature"} {
			if v, ok := req.Headers[h]; ok {
				req.Headers[h] = v + "," + element // Stripe quotes an element that is not key=value
			}
		}
		req.Headers["webhook-timestamp"] += element
		resp := hs.do(t, req)
		if resp.StatusCode != 401 {
			t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
		}
		longest := 0
		for line := range strings.Lines(hs.logs.String()) {
			longest = max(longest, len(line))
			if len(line) >= 2048 {
				t.Errorf("log line of %d bytes: %.200s", len(line), line)
			}
		}
		headerBytes := 0
		for _, v := range req.Headers {
			headerBytes += len(v)
		}
		t.Logf("%s: %d bytes of headers, longest log line %d bytes", pc.name, headerBytes, longest)
		lines := hs.logs.requests(t)
		if len(lines) != 1 {
			t.Fatalf("%d request lines", len(lines))
		}
		if msg, _ := lines[0]["error"].(string); pc.name == "stripe" && !strings.Contains(msg, "truncated") {
			t.Errorf("the quoted element was not cut: %.300s", msg)
		}
	})
}

// TestAmbiguousBodyIDIsRejectedWithoutTouchingRedis: a Stripe or Slack body naming its id
// twice, or with an id that is not valid UTF-8 (a raw bad byte, or an escaped lone surrogate),
// is 400 invalid_payload, signed or not, with no Redis command.
func TestAmbiguousBodyIDIsRejectedWithoutTouchingRedis(t *testing.T) {
	for provider, member := range map[string]string{"stripe": "id", "slack": "event_id"} {
		t.Run(provider, func(t *testing.T) {
			// The shared real Redis, whose commands the client counts, and a miniredis,
			// whose commands the server counts.
			mr := miniredis.RunT(t)
			mrc := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { mrc.Close() })
			for _, hs := range []*harness{newHarness(t, provider, harnessConfig{}), newHarness(t, provider, harnessConfig{rdb: mrc})} {
				checkAmbiguousBodies(t, hs, provider, member)
			}
			if n := mr.CommandCount(); n != 0 {
				t.Errorf("miniredis received %d commands, want none", n)
			}
		})
	}
}

func checkAmbiguousBodies(t *testing.T, hs *harness, provider, member string) {
	t.Helper()
	for _, body := range []string{
		`{"` + member + `":"evt_A","type":"event_callback","` + member + `":"evt_B"}`,
		`{"` + member + `":"evt_A\ud800","type":"event_callback"}`,
		`{"` + member + `":"evt_A\udfff\ud800","type":"event_callback"}`,
		`{"` + member + `":"evt_A` + "\xc3\x28" + `","type":"event_callback"}`,
	} {
		d := delivery{provider: provider, body: []byte(body), headers: map[string]string{"content-type": "application/json"}}
		wantStatus(t, hs.deliver(t, d), 400, "invalid_payload")
	}
	if n := hs.counter.Commands.Load(); n != 0 {
		t.Errorf("%d Redis commands for ambiguous ids, want none", n)
	}
	if n := hs.sink.attempts(); n != 0 {
		t.Errorf("sink called %d times", n)
	}
	for _, l := range hs.logs.requests(t) {
		if l["outcome"] != "rejected" || l["reason"] != "invalid_payload" || l["redis_round_trips"] != float64(0) {
			t.Errorf("log line %v", l)
		}
	}
}
