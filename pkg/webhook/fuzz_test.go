package webhook_test

// Fuzz targets for every signature-header parser and for Event extraction.
// Each verifier target checks two things on arbitrary input: no panic, and
// no acceptance unless the header carries, for the timestamp it names, the
// HMAC of the body under one of the accepted secrets, computed here with
// crypto/hmac independently of the package.

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idemlambda/idem/internal/preset"
	"mime"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

func mac(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

// withinTolerance reports whether ts is canonical Unix seconds no further
// than DefaultTolerance from testNow.
func withinTolerance(ts string) bool {
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != ts {
		return false
	}
	d := time.Unix(n, 0).Sub(testNow)
	return d <= webhook.DefaultTolerance && d >= -webhook.DefaultTolerance
}

// fuzzProvider returns a verifier of the provider name accepting its first
// two test secrets, those secrets, and the HMAC keys they stand for.
func fuzzProvider(f *testing.F, name string) (provider, []string, [][]byte) {
	secrets := testSecrets[name][:2]
	var keys [][]byte
	for _, s := range secrets {
		key := []byte(s)
		if name == "standard" {
			var err error
			if key, err = preset.DecodeWhsec(s); err != nil {
				f.Fatal(err)
			}
		}
		keys = append(keys, key)
	}
	return mustNew(f, name, secrets...), secrets, keys
}

// accepted reports whether p verifies headers and body at testNow; an error
// outside the sentinels fails t.
func accepted(t *testing.T, p provider, headers map[string]string, body []byte) bool {
	t.Helper()
	err := p.CheckSignature(headers, body, testNow)
	if err != nil && !isVerifyError(err) {
		t.Fatalf("Verify returned an error outside the sentinels: %v", err)
	}
	return err == nil
}

// madeWithOneOf fails t unless madeWith holds for one of keys: what was
// accepted must carry a signature made with an accepted secret.
func madeWithOneOf(t *testing.T, signature string, keys [][]byte, madeWith func(key []byte) bool) {
	t.Helper()
	if !slices.ContainsFunc(keys, madeWith) {
		t.Fatalf("accepted %q, which carries no signature made with an accepted secret", signature)
	}
}

// addSeeds adds to f, for each of fuzzBodies, the header values seeds
// makes for it.
func addSeeds(f *testing.F, seeds func(body []byte) []string) {
	for _, body := range fuzzBodies {
		for _, header := range seeds(body) {
			f.Add(header, body)
		}
	}
}

var fuzzBodies = [][]byte{
	[]byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`),
	{},
	[]byte("Hello, World!"),
}

func FuzzStripeSignatureHeader(f *testing.F) {
	p, secrets, keys := fuzzProvider(f, "stripe")
	addSeeds(f, func(body []byte) []string {
		good := webhooktest.StripeSignature(secrets[0], body, testNow)
		rotated := webhooktest.StripeSignature(secrets[1], body, testNow)
		v1 := good[strings.Index(good, "v1="):]
		return []string{
			good,
			rotated + ",v0=00",
			good + "," + rotated[strings.Index(rotated, "v1="):],
			"t=" + fmt.Sprint(testNow.Unix()+1) + "," + v1,
			v1 + ",t=" + fmt.Sprint(testNow.Unix()),
			strings.ToUpper(good),
			good[:len(good)-1],
			"t=,v1=",
			",,=,",
		}
	})
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		if !accepted(t, p, stripeHeader(header), body) {
			return
		}
		var ts []string
		var sigs []string
		for _, element := range strings.Split(header, ",") {
			if v, ok := strings.CutPrefix(element, "t="); ok {
				ts = append(ts, v)
			}
			if v, ok := strings.CutPrefix(element, "v1="); ok {
				sigs = append(sigs, v)
			}
		}
		if len(ts) != 1 || !withinTolerance(ts[0]) {
			t.Fatalf("accepted %q without exactly one t within tolerance", header)
		}
		madeWithOneOf(t, header, keys, func(key []byte) bool {
			want := hex.EncodeToString(mac(key, append([]byte(ts[0]+"."), body...)))
			return slices.ContainsFunc(sigs, func(sig string) bool { return strings.EqualFold(sig, want) })
		})
	})
}

func FuzzStandardSignatureHeaders(f *testing.F) {
	p, secrets, keys := fuzzProvider(f, "standard")
	ts := fmt.Sprint(testNow.Unix())
	for _, body := range fuzzBodies {
		good, _ := webhooktest.StandardSignature(secrets[0], "msg_1", body, testNow)
		rotated, _ := webhooktest.StandardSignature(secrets[1], "msg_1", body, testNow)
		f.Add("msg_1", ts, good, body)
		f.Add("msg_1", ts, "v1a,AAAA "+rotated+" v2,x", body)
		f.Add("msg_2", ts, good, body)
		f.Add("msg_1", ts+"0", good, body)
		f.Add("msg_1", ts, strings.TrimRight(good, "="), body)
		f.Add("msg_1", ts, good+" "+good, body)
		f.Add("msg_1", ts, " , ", body)
	}
	f.Fuzz(func(t *testing.T, id, timestamp, signature string, body []byte) {
		h := map[string]string{
			"webhook-id":        id,
			"webhook-timestamp": timestamp,
			"webhook-signature": signature,
		}
		if !accepted(t, p, h, body) {
			return
		}
		if id == "" || !withinTolerance(timestamp) {
			t.Fatalf("accepted id %q timestamp %q", id, timestamp)
		}
		madeWithOneOf(t, signature, keys, func(key []byte) bool {
			want := "v1," + base64.StdEncoding.EncodeToString(mac(key, []byte(id+"."+timestamp+"."+string(body))))
			return slices.Contains(strings.Split(signature, " "), want)
		})
	})
}

func FuzzSlackSignatureHeaders(f *testing.F) {
	p, secrets, keys := fuzzProvider(f, "slack")
	ts := fmt.Sprint(testNow.Unix())
	for _, body := range fuzzBodies {
		good := webhooktest.SlackSignature(secrets[0], body, testNow)
		f.Add(ts, good, body)
		f.Add(ts, webhooktest.SlackSignature(secrets[1], body, testNow), body)
		f.Add(ts, strings.ToUpper(good), body)
		f.Add(ts, "v0="+strings.ToUpper(good[3:]), body)
		f.Add(fmt.Sprint(testNow.Unix()-400), good, body)
		f.Add(ts, "v1"+good[2:], body)
		f.Add("", "", body)
	}
	f.Fuzz(func(t *testing.T, timestamp, signature string, body []byte) {
		if !accepted(t, p, slackHeaders(timestamp, signature), body) {
			return
		}
		digest, ok := strings.CutPrefix(signature, "v0=")
		if !ok || !withinTolerance(timestamp) {
			t.Fatalf("accepted timestamp %q signature %q", timestamp, signature)
		}
		madeWithOneOf(t, signature, keys, func(key []byte) bool {
			return strings.EqualFold(digest, hex.EncodeToString(mac(key, []byte("v0:"+timestamp+":"+string(body)))))
		})
	})
}

func FuzzGitHubSignatureHeader(f *testing.F) {
	p, secrets, keys := fuzzProvider(f, "github")
	addSeeds(f, func(body []byte) []string {
		good := webhooktest.GitHubSignature(secrets[0], body)
		return []string{
			good,
			webhooktest.GitHubSignature(secrets[1], body),
			"sha256=" + strings.ToUpper(good[7:]),
			"sha1=" + good[7:47],
			good + " ",
			"sha256=",
		}
	})
	f.Fuzz(func(t *testing.T, signature string, body []byte) {
		if !accepted(t, p, githubHeader(signature), body) {
			return
		}
		digest, ok := strings.CutPrefix(signature, "sha256=")
		if !ok {
			t.Fatalf("accepted %q", signature)
		}
		madeWithOneOf(t, signature, keys, func(key []byte) bool {
			return strings.EqualFold(digest, hex.EncodeToString(mac(key, body)))
		})
	})
}

func FuzzShopifyHMACHeader(f *testing.F) {
	p, secrets, keys := fuzzProvider(f, "shopify")
	addSeeds(f, func(body []byte) []string {
		good := webhooktest.ShopifyHMAC(secrets[0], body)
		return []string{
			good,
			webhooktest.ShopifyHMAC(secrets[1], body),
			strings.TrimRight(good, "="),
			good[:20] + "\n" + good[20:],
			good[:42] + "B=",
			strings.NewReplacer("+", "-", "/", "_").Replace(good),
		}
	})
	f.Fuzz(func(t *testing.T, signature string, body []byte) {
		if accepted(t, p, shopifyHeader(signature), body) {
			madeWithOneOf(t, signature, keys, func(key []byte) bool {
				return signature == base64.StdEncoding.EncodeToString(mac(key, body))
			})
		}
	})
}

// FuzzEvent checks, for every provider, that Event fails only with its
// sentinels and that what it accepts keeps the properties checkEvent lists.
func FuzzEvent(f *testing.F) {
	var providers []provider
	for _, name := range originalNames {
		providers = append(providers, mustNew(f, name, testSecrets[name][0]))
	}
	for _, fixture := range []string{
		"events/stripe_payment_intent_succeeded.json", "events/stripe_thin_event.json",
		"events/github_push.json", "events/github_org_ping.json",
		"events/shopify_orders_create.json", "events/standard_invoice_paid.json",
		"events/slack_event_callback.json", "events/slack_channel_created.json",
		"events/slack_url_verification.json", "events/slack_app_rate_limited.json",
	} {
		f.Add("id-1", "type-1", "application/json", readFixture(f, fixture))
	}
	f.Add("id-1", "push", "application/x-www-form-urlencoded", []byte("payload=%7B%22repository%22%3A%7B%22full_name%22%3A%22a%2Fb%22%7D%7D"))
	// GitHub's form deliveries, the media type in any case: the JSON is the payload field.
	f.Add("id-1", "push", "application/x-www-form-urlencoded", []byte("payload=%7B%7D"))
	f.Add("id-1", "push", "Application/X-WWW-Form-URLEncoded; charset=utf-8", []byte("payload=%7B%7D"))
	f.Add("", "", "", []byte(`{"id":{"id":1},"data":{"object":[]},"event":null}`))
	f.Add("x", "", "multipart/form-data; boundary=x", []byte("payload="))
	f.Fuzz(func(t *testing.T, id, typ, contentType string, body []byte) {
		headers := map[string]string{
			"content-type":         contentType,
			"x-github-delivery":    id,
			"x-github-event":       typ,
			"x-shopify-webhook-id": id,
			"x-shopify-topic":      typ,
			"webhook-id":           id,
		}
		for _, p := range providers {
			ev, err := p.Event(headers, body)
			if err != nil {
				if !errors.Is(err, webhook.ErrBadPayload) && !errors.Is(err, webhook.ErrNoEventID) {
					t.Fatalf("%s: Event error outside the sentinels: %v", p.Name(), err)
				}
				continue
			}
			checkEvent(t, p, contentType, body, ev)
		}
	})
}

// checkEvent checks what p.Event accepted from body: a handshake or an event
// with an id, keyed on signed bytes, read from a JSON object.
func checkEvent(t *testing.T, p provider, contentType string, body []byte, ev event) {
	t.Helper()
	checkEventHasID(t, p, ev)
	checkEventKey(t, p, body, ev)
	checkEventDocument(t, p, contentType, body)
}

// checkEventHasID checks that an accepted event has an id, unless it is one
// of Slack's handshakes (a challenge, or the app_rate_limited notice).
func checkEventHasID(t *testing.T, p provider, ev event) {
	t.Helper()
	switch {
	case ev.Challenge != "":
		if p.Name() != "slack" || ev.ID != "" {
			t.Fatalf("%s: challenge in %+v", p.Name(), ev)
		}
	case ev.Type == "app_rate_limited" && p.Name() == "slack" && ev.ID == "":
		// Slack's notice, answered as a handshake.
	case ev.ID == "":
		t.Fatalf("%s: accepted with no id: %+v", p.Name(), ev)
	}
}

// checkEventKey checks that the key is derived from signed bytes: the body's
// digest where only the body is signed; an id read from the body is valid
// text, so that no two raw ids share it.
func checkEventKey(t *testing.T, p provider, body []byte, ev event) {
	t.Helper()
	switch {
	case ev.Challenge != "":
	case ev.DeliveryID != "":
		if ev.ID != bodyDigest(body) || !slices.Contains(ev.Unsigned, "delivery_id") {
			t.Fatalf("%s: unsigned delivery id but key %q is not the body digest", p.Name(), ev.ID)
		}
	case p.Name() == "stripe" || p.Name() == "slack":
		if !utf8.ValidString(ev.ID) {
			t.Fatalf("%s: key %q read from the body is not valid text", p.Name(), ev.ID)
		}
	}
}

// checkEventDocument checks that what Event accepted is a JSON object: the
// body, or for GitHub's application/x-www-form-urlencoded deliveries (a media
// type is case-insensitive, and may carry parameters) the JSON of the payload
// field; the key still covers the form as sent.
func checkEventDocument(t *testing.T, p provider, contentType string, body []byte) {
	t.Helper()
	doc := body
	if mt, _, err := mime.ParseMediaType(contentType); err == nil && mt == "application/x-www-form-urlencoded" && p.Name() == "github" {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			t.Fatalf("%s: Event accepted a form body that does not parse: %q", p.Name(), body)
		}
		doc = []byte(form.Get("payload"))
	}
	if trimmed := bytes.TrimSpace(doc); !json.Valid(doc) || len(trimmed) == 0 || trimmed[0] != '{' {
		t.Fatalf("%s: Event accepted a delivery whose document is not a JSON object: %q (content type %q)", p.Name(), body, contentType)
	}
}

// FuzzSignThenVerify checks that every provider accepts its own signing of
// any body with any usable secret, and refuses it after a one-byte change.
func FuzzSignThenVerify(f *testing.F) {
	f.Add("s3cr3t", []byte(`{"id":"evt_1"}`), int64(0), uint16(3))
	f.Add("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", []byte{}, int64(-299), uint16(0))
	f.Add("x", []byte("\x00\xff"), int64(299), uint16(1))
	f.Fuzz(func(t *testing.T, secret string, body []byte, skew int64, flip uint16) {
		if secret == "" || skew > 300 || skew < -300 {
			return
		}
		at := testNow.Add(time.Duration(skew) * time.Second)
		for _, name := range originalNames {
			s := secret
			if name == "standard" {
				s = whsec(secret)
			}
			p := mustNew(t, name, s)
			h := p.Sign(s, body, at)
			if err := p.CheckSignature(h, body, testNow); err != nil {
				t.Fatalf("%s: own signature refused: %v", name, err)
			}
			if len(body) == 0 {
				continue
			}
			changed := append([]byte(nil), body...)
			changed[int(flip)%len(changed)] ^= 0x20
			if err := p.CheckSignature(h, changed, testNow); !errors.Is(err, webhook.ErrNoValidSignature) {
				t.Fatalf("%s: changed body: error = %v", name, err)
			}
		}
	})
}
