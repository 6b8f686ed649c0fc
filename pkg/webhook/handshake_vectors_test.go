package webhook_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
)

// Twitch publishes no fixed vector: the docs
// (https://dev.twitch.tv/docs/eventsub/handling-webhook-events/#verifying-the-event-message)
// show the procedure only, and twitchdev/twitch-cli
// internal/events/trigger/forward_event_test.go (TestForwardEventEventsub)
// computes its HMAC at run time with the secret "potaytoes". The expected
// signatures below were computed outside Go (Python's hmac) with that
// secret over message id + timestamp + body, as documented; the bodies are
// the docs' challenge example and a channel.follow notification.
const (
	twitchSecret        = "potaytoes"
	twitchTimestamp     = "2019-11-16T10:11:12.634234626Z"
	twitchChallengeBody = `{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","status":"webhook_callback_verification_pending","type":"channel.follow","version":"1","cost":1,"condition":{"broadcaster_user_id":"12826"},"transport":{"method":"webhook","callback":"https://example.com/webhooks/callback"},"created_at":"2019-11-16T10:11:12.634234626Z"}}`
	twitchChallengeID   = "e76c6bd4-55c9-4987-8304-da1588d8988b"
	twitchChallengeSig  = "sha256=142081faea1516fb230ba02450ad1fd32c352c2743f89acfd3a0628819c199a2"
	twitchNotifyBody    = `{"subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","status":"enabled","type":"channel.follow","version":"2","condition":{"broadcaster_user_id":"1337","moderator_user_id":"1337"},"transport":{"method":"webhook","callback":"https://example.com/webhooks/callback"},"created_at":"2019-11-16T10:11:12.634234626Z"},"event":{"user_id":"1234","user_login":"cool_user","user_name":"Cool_User","broadcaster_user_id":"1337","broadcaster_user_login":"cooler_user","broadcaster_user_name":"Cooler_User","followed_at":"2020-07-15T18:16:11.17106713Z"}}`
	twitchNotifyID      = "befa7b53-d79d-478f-86b9-120f112b044e"
	twitchNotifySig     = "sha256=e518ef77ecaf0c808ff2aa8748df4eaf19d2318a9cc5d7331a1df2018aa6a692"
)

var twitchNow = time.Date(2019, 11, 16, 10, 12, 0, 0, time.UTC)

func twitchRequest(kind, id, ts, sig, body string) webhook.Request {
	return webhook.Request{Body: []byte(body), Now: twitchNow, Header: hdr(map[string]string{
		"content-type":                      "application/json",
		"twitch-eventsub-message-id":        id,
		"twitch-eventsub-message-timestamp": ts,
		"twitch-eventsub-message-signature": sig,
		"twitch-eventsub-message-type":      kind,
	})}
}

func TestTwitchVectors(t *testing.T) {
	old := twitchRequest("notification", twitchNotifyID, twitchTimestamp, twitchNotifySig, twitchNotifyBody)
	old.Now = twitchNow.Add(11 * time.Minute)
	checkVectors(t, "twitch", []vector{
		{"notification", twitchSecret, twitchRequest("notification", twitchNotifyID, twitchTimestamp, twitchNotifySig, twitchNotifyBody), nil},
		{"challenge", twitchSecret, twitchRequest("webhook_callback_verification", twitchChallengeID, twitchTimestamp, twitchChallengeSig, twitchChallengeBody), nil},
		{"wrong secret", "tomatoes", twitchRequest("notification", twitchNotifyID, twitchTimestamp, twitchNotifySig, twitchNotifyBody), webhook.ErrNoValidSignature},
		{"tampered message id", twitchSecret, twitchRequest("notification", "replay-1", twitchTimestamp, twitchNotifySig, twitchNotifyBody), webhook.ErrNoValidSignature},
		{"tampered timestamp", twitchSecret, twitchRequest("notification", twitchNotifyID, "2019-11-16T10:11:13.634234626Z", twitchNotifySig, twitchNotifyBody), webhook.ErrNoValidSignature},
		{"no sha256= prefix", twitchSecret, twitchRequest("notification", twitchNotifyID, twitchTimestamp, twitchNotifySig[len("sha256="):], twitchNotifyBody), webhook.ErrInvalidHeader},
		// docs: reject messages older than 10 minutes
		{"older than 10 minutes", twitchSecret, old, webhook.ErrTooOld},
	})
}

func TestTwitchChallengeIsAnsweredAsText(t *testing.T) {
	v := presetVerifier(t, "twitch", twitchSecret)
	r := twitchRequest("webhook_callback_verification", twitchChallengeID, twitchTimestamp, twitchChallengeSig, twitchChallengeBody)
	d, err := v.Event(r)
	if err != nil {
		t.Fatal(err)
	}
	if d.Handshake == nil || string(d.Handshake.Body) != "pogchamp-kappa-360noscope-vohiyo" || d.Handshake.ContentType != "text/plain" || d.ID != "" {
		t.Fatalf("challenge: %+v, want the raw challenge as text/plain and no event", d)
	}
	// The message-type header is not signed: removing it does not turn the
	// signed challenge into a forwarded event.
	r.Header.Del("twitch-eventsub-message-type")
	if d, err := v.Event(r); err != nil || d.Handshake == nil {
		t.Fatalf("challenge without its type header: %+v, %v", d, err)
	}
	n, err := v.Event(twitchRequest("notification", twitchNotifyID, twitchTimestamp, twitchNotifySig, twitchNotifyBody))
	if err != nil {
		t.Fatal(err)
	}
	if n.Handshake != nil || n.ID != twitchNotifyID || n.Type != "channel.follow" || len(n.Unsigned) != 0 {
		t.Fatalf("notification: %+v", n)
	}
}

// Zoom publishes no fixed vector (zoom/webhook-sample index.js and
// zoom/rivet-javascript ship no tests); the docs
// (https://developers.zoom.us/docs/api/webhooks/#validate-your-webhook-endpoint)
// give the endpoint.url_validation request body but no secret. The expected
// values below were computed outside Go (Python's hmac) with the secret
// token "zoom-secret-token", as documented: x-zm-signature is
// "v0=" + hex HMAC-SHA256 of "v0:<timestamp>:<body>", encryptedToken the
// hex HMAC-SHA256 of plainToken.
const (
	zoomSecret         = "zoom-secret-token"
	zoomValidationBody = `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`
	zoomValidationSig  = "v0=fd1376db6cb3f4672c7ade33cc13700261143da5fd8058e52b5dd50c8bf002fe"
	zoomEncryptedToken = "d9e0d764a78494688ba3f2d5c0ed4ca311394b4834d959759213424d2df961e3"
	zoomEventBody      = `{"event":"meeting.started","event_ts":1626230691572,"payload":{"account_id":"AAAAAABBBB","object":{"id":"1234567890","uuid":"czLF6FFFoQOKgAB99DlDb9g==","host_id":"x1yCzABCDEfg23HiJKl4mN","topic":"My Meeting","type":8,"start_time":"2021-07-13T21:44:51Z","timezone":"America/Los_Angeles","duration":60}}}`
	zoomEventSig       = "v0=5d36b503d457b85d430f02c7ad413ebbd887084ce00bf45b9d5ecd58197cfb31"
)

func zoomRequest(ts, sig, body string, now int64) webhook.Request {
	return webhook.Request{Body: []byte(body), Now: time.Unix(now, 0), Header: hdr(map[string]string{
		"content-type": "application/json", "x-zm-request-timestamp": ts, "x-zm-signature": sig,
	})}
}

func TestZoomVectors(t *testing.T) {
	checkVectors(t, "zoom", []vector{
		{"url validation", zoomSecret, zoomRequest("1654503849", zoomValidationSig, zoomValidationBody, 1654503850), nil},
		{"event", zoomSecret, zoomRequest("1626230692", zoomEventSig, zoomEventBody, 1626230700), nil},
		{"wrong secret", "other", zoomRequest("1626230692", zoomEventSig, zoomEventBody, 1626230700), webhook.ErrNoValidSignature},
		{"tampered timestamp", zoomSecret, zoomRequest("1626230693", zoomEventSig, zoomEventBody, 1626230700), webhook.ErrNoValidSignature},
		{"no v0= prefix", zoomSecret, zoomRequest("1626230692", zoomEventSig[3:], zoomEventBody, 1626230700), webhook.ErrInvalidHeader},
		{"stale", zoomSecret, zoomRequest("1626230692", zoomEventSig, zoomEventBody, 1626230692+301), webhook.ErrTooOld},
	})
}

func TestZoomURLValidationIsAnswered(t *testing.T) {
	// The secret that signed the request answers, also during a rotation.
	v := presetVerifier(t, "zoom", "old-secret", zoomSecret)
	d, err := v.Event(zoomRequest("1654503849", zoomValidationSig, zoomValidationBody, 1654503850))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"plainToken":"qgg8vlvZRS6UYooatFL8Aw","encryptedToken":"` + zoomEncryptedToken + `"}`
	if d.Handshake == nil || string(d.Handshake.Body) != want || d.Handshake.ContentType != "application/json" || d.ID != "" {
		t.Fatalf("url validation: %+v, want %s", d, want)
	}
	e, err := v.Event(zoomRequest("1626230692", zoomEventSig, zoomEventBody, 1626230700))
	if err != nil {
		t.Fatal(err)
	}
	if e.Handshake != nil || e.Type != "meeting.started" || len(e.ID) != len("sha256:")+64 {
		t.Fatalf("event: %+v, want type meeting.started and a digest id", e)
	}
	// A retry is re-signed with a new timestamp: same id.
	retry := webhook.Request{Body: []byte(zoomEventBody), Header: hdr(map[string]string{"x-zm-request-timestamp": "1626231000"})}
	r, _ := v.Event(retry)
	if r.ID != e.ID {
		t.Fatalf("retry id %q, first %q", r.ID, e.ID)
	}
}

// GitLab sends its secret token as is (no signature, so nothing to publish):
// https://docs.gitlab.com/user/project/integrations/webhooks/#validate-requests-with-a-secret-token
func TestGitLabToken(t *testing.T) {
	body := `{"object_kind":"push","event_name":"push","ref":"refs/heads/main","checkout_sha":"da1560886d4f094c3e6c9ef40349f7d38b5d27d7","project_id":15}`
	req := func(token string) webhook.Request {
		h := map[string]string{"x-gitlab-event": "Push Hook"}
		if token != "" {
			h["x-gitlab-token"] = token
		}
		return webhook.Request{Body: []byte(body), Header: hdr(h)}
	}
	checkVectors(t, "gitlab", []vector{
		{"exact token", "glsecret", req("glsecret"), nil},
		{"other token", "glsecret", req("glsecreT"), webhook.ErrNoValidSignature},
		{"prefix of the token", "glsecret", req("glsec"), webhook.ErrNoValidSignature},
		{"trailing space", "glsecret", req("glsecret "), webhook.ErrNoValidSignature},
		{"no token", "glsecret", req(""), webhook.ErrNotSigned},
	})
	v := presetVerifier(t, "gitlab", "glsecret")
	a, err := v.Event(req("glsecret"))
	if err != nil {
		t.Fatal(err)
	}
	// A token binds nothing: the id is a digest of the body, the id, the
	// type and the payload are reported as unsigned, and another id header
	// changes nothing.
	b := req("glsecret")
	b.Header.Set("idempotency-key", "replay-1")
	bd, _ := v.Event(b)
	if a.ID != bd.ID || a.Type != "push" || strings.Join(a.Unsigned, ",") != "id,type,payload" {
		t.Fatalf("event %+v / %+v", a, bd)
	}
	if !errors.Is(v.CheckSignature(req("x")), webhook.ErrNoValidSignature) {
		t.Fatal("wrong token verified")
	}
}

// WooCommerce pings a webhook when it is saved: an unsigned form body
// "webhook_id=<n>" that must get a 200 (woocommerce/woocommerce
// class-wc-webhook.php, deliver_ping). It is answered, and nothing else
// unsigned passes.
func TestWooCommercePingIsAnsweredAndNothingElseUnsigned(t *testing.T) {
	v := presetVerifier(t, "woocommerce", "wc secret")
	ping := webhook.Request{Body: []byte("webhook_id=42"), Header: hdr(map[string]string{"content-type": "application/x-www-form-urlencoded"})}
	if err := v.CheckSignature(ping); err != nil {
		t.Fatalf("ping: %v", err)
	}
	d, err := v.Event(ping)
	if err != nil || d.Handshake == nil || len(d.Handshake.Body) != 0 || d.ID != "" {
		t.Fatalf("ping: %+v, %v", d, err)
	}
	for _, body := range []string{"webhook_id=42&x=1", "webhook_id=", "webhook_id=4a", `{"id":42}`, "webhook_id=123456789012345678901"} {
		r := ping
		r.Body = []byte(body)
		if err := v.CheckSignature(r); !errors.Is(err, webhook.ErrNotSigned) {
			t.Errorf("%q unsigned: %v", body, err)
		}
	}
	signed := ping
	signed.Header = hdr(map[string]string{"x-wc-webhook-signature": "EK6K7lbUeKTzZLFIyKru1dSkTBign6n0Ypj/bpbVVrM="})
	if err := v.CheckSignature(signed); !errors.Is(err, webhook.ErrNoValidSignature) {
		t.Errorf("a ping body with a wrong signature: %v", err)
	}
	// Other presets let no ping through.
	if err := presetVerifier(t, "razorpay", "s").CheckSignature(webhook.Request{Body: []byte("webhook_id=42")}); !errors.Is(err, webhook.ErrNotSigned) {
		t.Errorf("razorpay: %v", err)
	}
}

func TestZoomURLValidationWithoutPlainTokenIsBad(t *testing.T) {
	v := presetVerifier(t, "zoom", zoomSecret)
	_, err := v.Event(webhook.Request{Body: []byte(`{"event":"endpoint.url_validation","payload":{}}`)})
	if !errors.Is(err, webhook.ErrBadPayload) {
		t.Fatalf("%v, want ErrBadPayload", err)
	}
}

func TestUnsignedHeadersAreReported(t *testing.T) {
	for _, c := range []struct{ preset, header, value string }{
		{"bitbucket", "x-event-key", "repo:push"},
		{"woocommerce", "x-wc-webhook-topic", "order.created"},
	} {
		d, err := presetVerifier(t, c.preset, "s").Event(headerRequest(`{"id":7}`, c.header, c.value))
		if err != nil || d.Type != c.value || len(d.Unsigned) != 1 || d.Unsigned[0] != "type" {
			t.Errorf("%s: %+v, %v; want type %q reported unsigned", c.preset, d, err, c.value)
		}
	}
}
