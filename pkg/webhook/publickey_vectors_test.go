package webhook_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"github.com/idemlambda/idem/internal/preset"
	"strconv"
	"testing"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
	"github.com/idemlambda/idem/pkg/webhook/webhooktest"
)

// SendGrid's published Signed Event Webhook vectors. Sources:
//   - sendgrid/sendgrid-go helpers/eventwebhook/eventwebhook_test.go,
//     TestVerifySignature and TestConvertPublicKeyBase64ToECDSA
//   - sendgrid/sendgrid-nodejs packages/eventwebhook/src/eventwebhook.spec.js,
//     describe "EventWebhook" > "#verifySignature()"
const (
	sendgridKey1 = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
	sendgridSig1 = "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM="
	sendgridTS1  = "1600112502"
	sendgridKey2 = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEQ4LIFtWztlsF7skFqOncjD1lun4H5w8XOhyOArHW9RcIx/FfEzx6cikC/yPfUvwaX/JScE7Fc9CJD2afQ9Ok3Q=="
	sendgridSig2 = "MEYCIQC/I4o6vCgqRYrTljjoVWB/GRWNtxeePlLMHr3x9ETeRQIhAIpV+03nREPTTHWSW0wIOA0EoMPdcNgXa70yCaqDJlu5"
	sendgridTS2  = "1619651159"
	// sendgridBody1 ends with CR LF, as SendGrid sends it.
	sendgridBody1 = `[{"email":"hello@world.com","event":"dropped","reason":"Bounced Address","sg_event_id":"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA","sg_message_id":"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0","smtp-id":"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>","timestamp":1600112492}]` + "\r\n"
	sendgridBody2 = `[{"email":"invalid@gmail.com","event":"processed","send_at":0,"sg_event_id":"cHJvY2Vzc2VkLTE5OTQyMTEyLXFOd0JMZ1BRUWpXNkRKdktRd1NBYnctMA","sg_message_id":"qNwBLgPQQjW6DJvKQwSAbw.filterdrecv-canary-547b64655b-cw6zx-1-6089EA4A-56.0","smtp-id":"<qNwBLgPQQjW6DJvKQwSAbw@ismtpd0178p1mdw1.sendgrid.net>","timestamp":1619651146},` + "\r\n" +
		`{"email":"invalid@gmail.com","event":"bounce","ip":"167.89.101.76","reason":"552 5.2.2 The email account that you tried to reach is over quota and inactive. Please direct the recipient to https://support.google.com/mail/?p=OverQuotaPerm c17si1130468pgv.34 - gsmtp","sg_event_id":"Ym91bmNlLTAtMTk5NDIxMTItcU53QkxnUFFRalc2REp2S1F3U0Fidy0w","sg_message_id":"qNwBLgPQQjW6DJvKQwSAbw.filterdrecv-canary-547b64655b-cw6zx-1-6089EA4A-56.0","smtp-id":"<qNwBLgPQQjW6DJvKQwSAbw@ismtpd0178p1mdw1.sendgrid.net>","status":"5.2.2","timestamp":1619651147,"tls":1,"type":"blocked"}]` + "\r\n"
)

const (
	sendgridGoKey  = "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA=="
	sendgridGoSig  = "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH2j/0="
	sendgridGoBody = `{"category":"example_payload","event":"test_event","message_id":"message_id"}`
)

func sendgridRequest(body, sig, ts string) webhook.Request {
	h := map[string]string{"content-type": "application/json"}
	if sig != "" {
		h["x-twilio-email-event-webhook-signature"] = sig
	}
	if ts != "" {
		h["x-twilio-email-event-webhook-timestamp"] = ts
	}
	// The published vectors are old: the receiver's clock is their signing
	// time, within SendGrid's tolerance.
	now := time.Unix(1700000000, 0)
	if n, err := strconv.ParseInt(ts, 10, 64); err == nil {
		now = time.Unix(n, 0)
	}
	return webhook.Request{Header: hdr(h), Body: []byte(body), Now: now}
}

func TestSendGridPublishedVectors(t *testing.T) {
	checkVectors(t, "sendgrid", []vector{
		// sendgrid-go TestVerifySignature (verifications) / sendgrid-nodejs "should verify a valid signature"
		{"valid single event", sendgridKey1, sendgridRequest(sendgridBody1, sendgridSig1, sendgridTS1), nil},
		// sendgrid-nodejs "should verify a valid signature with multiple events"
		{"valid multiple events", sendgridKey2, sendgridRequest(sendgridBody2, sendgridSig2, sendgridTS2), nil},
		// sendgrid-nodejs "should reject for invalid key"
		{"invalid key", "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEqTxd43gyp8IOEto2LdIfjRQrIbsd4SXZkLW6jDutdhXSJCWHw8REntlo7aNDthvj+y7GjUuFDb/R1NGe1OPzpA==", sendgridRequest(sendgridBody1, sendgridSig1, sendgridTS1), webhook.ErrNoValidSignature},
		// sendgrid-nodejs "should reject for bad payload"
		{"bad payload", sendgridKey1, sendgridRequest("payload", sendgridSig1, sendgridTS1), webhook.ErrNoValidSignature},
		// sendgrid-go "not valid payload"
		{"not valid payload", sendgridKey1, sendgridRequest("this is not valid payload for the given signature", sendgridSig1, sendgridTS1), webhook.ErrNoValidSignature},
		// sendgrid-nodejs "should reject for bad signature"
		{"bad signature", sendgridKey1, sendgridRequest(sendgridBody1, "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nlxFDWYNH3j/0=", sendgridTS1), webhook.ErrNoValidSignature},
		// sendgrid-go "not valid signature": not base64
		{"signature not base64", sendgridKey1, sendgridRequest(sendgridBody1, sendgridSig1+"causing failure", sendgridTS1), webhook.ErrInvalidHeader},
		// sendgrid-go "not valid timestamp" / sendgrid-nodejs "should reject for bad timestamp":
		// a timestamp checked against the tolerance must be one
		{"bad timestamp", sendgridKey1, sendgridRequest(sendgridBody1, sendgridSig1, "invalid timestamp"), webhook.ErrInvalidHeader},
		// sendgrid-go "empty timestamp"
		{"empty timestamp", sendgridKey1, sendgridRequest(sendgridBody1, sendgridSig1, ""), webhook.ErrNotSigned},
		{"no signature", sendgridKey1, sendgridRequest(sendgridBody1, "", sendgridTS1), webhook.ErrNotSigned},
		// sendgrid-go at 11d4fa96, eventwebhook_test.go TestVerifySignature:
		// testPublicKey, signature over "1588788367" and the marshalled
		// generateTestPayload()
		{"go 11d4fa96 valid", sendgridGoKey, sendgridRequest(sendgridGoBody, sendgridGoSig, "1588788367"), nil},
		{"go 11d4fa96 not valid payload", sendgridGoKey, sendgridRequest("this is not valid payload for the given signature", sendgridGoSig, "1588788367"), webhook.ErrNoValidSignature},
		{"go 11d4fa96 not valid signature", sendgridGoKey, sendgridRequest(sendgridGoBody, sendgridGoSig+"causing failure", "1588788367"), webhook.ErrInvalidHeader},
		{"go 11d4fa96 not valid timestamp", sendgridGoKey, sendgridRequest(sendgridGoBody, sendgridGoSig, "invalid timestamp"), webhook.ErrInvalidHeader},
		{"signed an hour before the receiver's clock", sendgridKey1, older(sendgridRequest(sendgridBody1, sendgridSig1, sendgridTS1), time.Hour), webhook.ErrTooOld},
	})
}

func TestSendGridBatchIDIsADigestOfTheSignedBody(t *testing.T) {
	v := presetVerifier(t, "sendgrid", sendgridKey1)
	d, err := v.Event(sendgridRequest(sendgridBody1, sendgridSig1, sendgridTS1))
	if err != nil {
		t.Fatal(err)
	}
	// sha256 of sendgridBody1, as listed with the published vector.
	if want := "sha256:ef3e4606385ea6adbc55fceb6117cf2784040cf145a010e5ef4afc2bc7c70452"; d.ID != want {
		t.Fatalf("ID = %q, want %q", d.ID, want)
	}
}

// Discord publishes no fixed vector: discord/discord-interactions-js
// src/__tests__/verifyKey.ts ("verify key method") generates a key pair per
// run and signs timestamp+body. These tests do the same with a fixed key
// (RFC 8032 section 7.1, test 1) and the request bodies of that suite
// (src/__tests__/utils/SharedTestUtils.ts).
const (
	discordPrivateSeedHex = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"
	discordPublicKeyHex   = "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
	discordOtherSeedHex   = "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb"

	discordPing    = `{"id":"787053080478613555","token":"ThisIsATokenFromDiscordThatIsVeryLong","type":1,"version":1}`
	discordCommand = `{"id":"787053080478613556","token":"ThisIsATokenFromDiscordThatIsVeryLong","type":2,"version":1,"data":{"id":"787053080478613554","name":"test"}}`
)

func discordSigned(t *testing.T, seed, body string, now time.Time) webhook.Request {
	t.Helper()
	p, _ := preset.Lookup("discord")
	r, err := webhooktest.Sign(p.Name, seed, webhook.Request{Body: []byte(body), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDiscordVerifyKeyCases(t *testing.T) {
	now := time.Unix(1700000000, 0)
	if seed, err := hex.DecodeString(discordPrivateSeedHex); err != nil || hex.EncodeToString(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)) != discordPublicKeyHex {
		t.Fatalf("the seed's public key is not %s, as RFC 8032 test 1 says (%v)", discordPublicKeyHex, err)
	}
	valid := discordSigned(t, discordPrivateSeedHex, discordPing, now)
	invalidBody := valid
	invalidBody.Body = []byte("example invalid body")
	invalidSig := discordSigned(t, discordPrivateSeedHex, discordPing, now)
	invalidSig.Header.Set("x-signature-ed25519", "example invalid signature")
	invalidTS := discordSigned(t, discordPrivateSeedHex, discordPing, now)
	invalidTS.Header.Set("x-signature-timestamp", "1699990000") // now-10000, as the suite does
	invalidTS.Now = time.Unix(1699990000, 0)
	checkVectors(t, "discord", []vector{
		{"valid ping", discordPublicKeyHex, valid, nil},
		{"valid application command", discordPublicKeyHex, discordSigned(t, discordPrivateSeedHex, discordCommand, now), nil},
		{"invalid key", discordPublicKeyHex, discordSigned(t, discordOtherSeedHex, discordPing, now), webhook.ErrNoValidSignature},
		{"invalid body", discordPublicKeyHex, invalidBody, webhook.ErrNoValidSignature},
		{"invalid signature", discordPublicKeyHex, invalidSig, webhook.ErrInvalidHeader},
		{"invalid timestamp", discordPublicKeyHex, invalidTS, webhook.ErrNoValidSignature},
		{"no headers", discordPublicKeyHex, webhook.Request{Body: []byte(discordPing), Now: now}, webhook.ErrNotSigned},
	})
}

func TestDiscordPingIsAnsweredWithPong(t *testing.T) {
	now := time.Unix(1700000000, 0)
	v := presetVerifier(t, "discord", discordPublicKeyHex)
	ping := discordSigned(t, discordPrivateSeedHex, discordPing, now)
	if err := v.CheckSignature(ping); err != nil {
		t.Fatal(err)
	}
	d, err := v.Event(ping)
	if err != nil {
		t.Fatal(err)
	}
	// discord-interactions-js verifyKeyMiddleware.ts: a PING gets
	// {"type":1} as application/json.
	if d.Handshake == nil || string(d.Handshake.Body) != `{"type":1}` || d.Handshake.ContentType != "application/json" || d.ID != "" {
		t.Fatalf("PING: %+v, want the PONG handshake and no event", d)
	}
	cmd := discordSigned(t, discordPrivateSeedHex, discordCommand, now)
	d, err = v.Event(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if d.Handshake != nil || d.ID != "787053080478613556" || d.Type != "2" {
		t.Fatalf("command: %+v, want id 787053080478613556, type 2", d)
	}
}

func TestDiscordRejectsStaleTimestamps(t *testing.T) {
	v := presetVerifier(t, "discord", discordPublicKeyHex)
	r := discordSigned(t, discordPrivateSeedHex, discordCommand, time.Unix(1700000000, 0))
	r.Now = r.Now.Add(webhook.DefaultTolerance + time.Second)
	if err := v.CheckSignature(r); err == nil {
		t.Fatal("a signature older than the tolerance verified")
	}
}

// older is r received d after it was signed.
func older(r webhook.Request, d time.Duration) webhook.Request {
	r.Now = r.Now.Add(d)
	return r
}
