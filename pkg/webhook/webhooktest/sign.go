// Package webhooktest signs webhook deliveries the way each sender of
// package webhook's presets signs them, and provides sample bodies, so tests
// and local tools can produce deliveries that a webhook.Verifier accepts
// exactly as it accepts the sender's. It sits beside package webhook as
// net/http/httptest sits beside net/http, and is not linked into a
// deployed function.
//
// The signing side is written independently of the verifying side (from the
// preset's fields, not by calling the verifier's code), so a test that signs
// here and verifies there checks one against the other.
package webhooktest

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"maps"
	"mime"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemlambda/idem/pkg/webhook"
)

// Sign returns r signed with secret as p's sender signs it at r.Now: r's
// headers plus the signature headers (and the timestamp and message-id
// headers the scheme needs; an id already in r.Headers is kept, else one is
// derived from the body so a re-signed retry keeps it). For
// webhook.FamilyBodySignature the signature goes into the JSON body, which is
// re-encoded.
//
// A Twilio request whose headers declare a SharedKey signature
// (x-twilio-webhooks-signature-settings: algorithm=HMAC_SHA256) is signed with
// HMAC-SHA256, as Twilio signs it.
//
// secret is what the sender holds: the shared secret or token, or for
// webhook.FamilyPublicKey the private key (Ed25519: hex of the 32-byte seed;
// ECDSA P-256: base64 DER, SEC 1 or PKCS #8). A URL scheme needs r.URL.
func Sign(p webhook.Preset, secret string, r webhook.Request) (webhook.Request, error) {
	out := r
	out.Headers = maps.Clone(r.Headers)
	if out.Headers == nil {
		out.Headers = map[string]string{}
	}
	if p.Family == webhook.FamilyToken {
		out.Headers[p.SignatureHeader] = secret
		return out, nil
	}
	if p.Family == webhook.FamilyItemHMAC {
		return signItems(secret, out)
	}
	ts := formatTimestamp(r.Now, p.TimestampFormat)
	if p.TimestampField != "" && p.Family != webhook.FamilyBodySignature {
		// The sender stamps its body (Linear's webhookTimestamp); the body
		// given is signed as it is.
		ts = ""
	}
	if p.TimestampHeader != "" {
		out.Headers[p.TimestampHeader] = ts
	}
	if p.IDHeader != "" && out.Headers[p.IDHeader] == "" {
		sum := sha256.Sum256(r.Body)
		out.Headers[p.IDHeader] = "msg_" + hex.EncodeToString(sum[:12])
	}
	if p.Family == webhook.FamilyBodySignature {
		return signBody(p, secret, out, ts)
	}
	out.URL = SignedURL(p, out)
	content, err := signedContent(p, out, ts)
	if err != nil {
		return webhook.Request{}, err
	}
	var sig []byte
	switch p.Family {
	case webhook.FamilyPublicKey:
		if sig, err = signPublicKey(p.Algorithm, secret, content); err != nil {
			return webhook.Request{}, err
		}
	default:
		key, err := hmacKey(p.SecretFormat, secret)
		if err != nil {
			return webhook.Request{}, err
		}
		sig = mac(twilioAlgorithm(p, out.Headers), key, content)
	}
	encoded := p.Prefix + encode(p.Encoding, sig)
	if p.HeaderFormat != "" && p.HeaderFormat != "{signature}" {
		encoded = strings.NewReplacer("{timestamp}", ts, "{signature}", encoded).Replace(p.HeaderFormat)
	}
	out.Headers[p.SignatureHeader] = encoded
	return out, nil
}

// hmacKey is the HMAC key a sender holding secret signs with.
func hmacKey(f webhook.SecretFormat, secret string) ([]byte, error) {
	switch f {
	case webhook.SecretWhsec:
		return webhook.DecodeStandardSecret(secret)
	case webhook.SecretHTMLSpecialChars:
		return []byte(strings.NewReplacer("&amp;", "&", "&quot;", `"`, "&#039;", "'", "&#39;", "'", "&lt;", "<", "&gt;", ">").Replace(secret)), nil
	}
	return []byte(secret), nil
}

// formatTimestamp writes t as the sender does.
func formatTimestamp(t time.Time, f webhook.TimestampFormat) string {
	switch f {
	case webhook.UnixMilliseconds:
		return strconv.FormatInt(t.UnixMilli(), 10)
	case webhook.RFC3339:
		return t.UTC().Format(time.RFC3339Nano)
	default:
		return strconv.FormatInt(t.Unix(), 10)
	}
}

// signedContent renders the preset's layout for r.
func signedContent(p webhook.Preset, r webhook.Request, ts string) ([]byte, error) {
	if strings.Contains(p.Layout, "{url}") && r.URL == "" {
		return nil, fmt.Errorf("webhooktest: %s signs the public URL: set Request.URL", p.Name)
	}
	form := ""
	if strings.Contains(p.Layout, "{form}") && isForm(r) {
		values, err := url.ParseQuery(string(r.Body))
		if err != nil {
			return nil, fmt.Errorf("webhooktest: form body: %w", err)
		}
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(values)) {
			vs := slices.Compact(slices.Sorted(slices.Values(values[k])))
			for _, v := range vs {
				b.WriteString(k + v)
			}
		}
		form = b.String()
	}
	signedURL := r.URL
	if p.URLDecodeReserved {
		signedURL = webhook.DecodeReservedURL(signedURL)
	}
	method := r.Method
	if method == "" {
		method = "POST"
	}
	return []byte(strings.NewReplacer(
		"{body}", string(r.Body),
		"{timestamp}", ts,
		"{id}", r.Headers[p.IDHeader],
		"{url}", signedURL,
		"{method}", method,
		"{form}", form,
	).Replace(p.Layout)), nil
}

// SignedURL returns the URL a sender posts r to: r.URL, plus the body-hash
// query parameter for a scheme that signs a JSON body through the URL
// (Twilio's bodySHA256). Sign sets it as the signed request's URL.
func SignedURL(p webhook.Preset, r webhook.Request) string {
	if p.BodyHashParam == "" || isForm(r) {
		return r.URL
	}
	sum := sha256.Sum256(r.Body)
	sep := "?"
	if strings.Contains(r.URL, "?") {
		sep = "&"
	}
	return r.URL + sep + p.BodyHashParam + "=" + hex.EncodeToString(sum[:])
}

// isForm reports a form-encoded body.
func isForm(r webhook.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Headers["content-type"])
	return mt == "application/x-www-form-urlencoded"
}

// mac is the HMAC of content under key.
func mac(a webhook.Algorithm, key, content []byte) []byte {
	var h func() hash.Hash
	switch a {
	case webhook.SHA1:
		h = sha1.New
	case webhook.SHA512:
		h = sha512.New
	default:
		h = sha256.New
	}
	m := hmac.New(h, key)
	m.Write(content)
	return m.Sum(nil)
}

func encode(e webhook.Encoding, b []byte) string {
	if e == webhook.Base64 {
		return base64.StdEncoding.EncodeToString(b)
	}
	return hex.EncodeToString(b)
}

// signPublicKey signs content with a private key.
func signPublicKey(a webhook.Algorithm, secret string, content []byte) ([]byte, error) {
	switch a {
	case webhook.Ed25519:
		key, err := ed25519Key(secret)
		if err != nil {
			return nil, err
		}
		return ed25519.Sign(key, content), nil
	default:
		key, err := ecdsaKey(secret)
		if err != nil {
			return nil, err
		}
		digest := sha256.Sum256(content)
		return ecdsa.SignASN1(rand.Reader, key, digest[:])
	}
}

// ed25519Key parses an Ed25519 private key, the hex of its 32-byte seed.
func ed25519Key(secret string) (ed25519.PrivateKey, error) {
	seed, err := hex.DecodeString(secret)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, errors.New("webhooktest: an Ed25519 private key is the hex of a 32-byte seed")
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// ecdsaKey parses a base64 DER EC private key, SEC 1 or PKCS #8.
func ecdsaKey(secret string) (*ecdsa.PrivateKey, error) {
	der, err := base64.StdEncoding.DecodeString(secret)
	if err != nil {
		return nil, fmt.Errorf("webhooktest: ECDSA private key is not base64: %w", err)
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("webhooktest: ECDSA private key: %w", err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("webhooktest: not an ECDSA private key")
	}
	return ec, nil
}

// PublicKey returns the public key a verifier is configured with for a
// FamilyPublicKey private key given to Sign: hex for Ed25519, base64 DER
// SubjectPublicKeyInfo for ECDSA.
func PublicKey(a webhook.Algorithm, private string) (string, error) {
	switch a {
	case webhook.Ed25519:
		k, err := ed25519Key(private)
		if err != nil {
			return "", err
		}
		return hex.EncodeToString(k.Public().(ed25519.PublicKey)), nil
	case webhook.ECDSAP256:
		k, err := ecdsaKey(private)
		if err != nil {
			return "", err
		}
		der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			return "", err
		}
		return base64.StdEncoding.EncodeToString(der), nil
	}
	return "", fmt.Errorf("webhooktest: %q is not a public-key algorithm", a)
}

// signBody signs a FamilyBodySignature delivery (Mailgun): the timestamp,
// the token (kept when the body has one) and the MAC go into the body's
// signature object.
func signBody(p webhook.Preset, secret string, r webhook.Request, ts string) (webhook.Request, error) {
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return webhook.Request{}, fmt.Errorf("webhooktest: %s body: %w", p.Name, err)
	}
	sigObj, _ := body["signature"].(map[string]any)
	if sigObj == nil {
		sigObj = map[string]any{}
	}
	token, _ := sigObj["token"].(string)
	if token == "" {
		sum := sha256.Sum256(r.Body)
		token = hex.EncodeToString(sum[:25])
	}
	content := strings.NewReplacer("{timestamp}", ts, "{token}", token).Replace(p.Layout)
	sigObj["timestamp"] = ts
	sigObj["token"] = token
	sigObj["signature"] = encode(p.Encoding, mac(p.Algorithm, []byte(secret), []byte(content)))
	body["signature"] = sigObj
	b, err := json.Marshal(body)
	if err != nil {
		return webhook.Request{}, err
	}
	r.Body = b
	return r, nil
}

// twilioAlgorithm is the HMAC algorithm a Twilio delivery is signed with: HMAC-SHA256 when its
// headers hold an x-twilio-webhooks-signature-settings declaring algorithm=HMAC_SHA256 (a
// SharedKey signature, as a Webhook Rule makes Twilio send it), else the preset's.
func twilioAlgorithm(p webhook.Preset, headers map[string]string) webhook.Algorithm {
	if p.Name != "twilio" {
		return p.Algorithm
	}
	for part := range strings.SplitSeq(headers["x-twilio-webhooks-signature-settings"], ",") {
		if key, name, ok := strings.Cut(part, "="); ok && strings.TrimSpace(key) == "algorithm" && strings.EqualFold(strings.TrimSpace(name), "HMAC_SHA256") {
			return webhook.SHA256
		}
	}
	return p.Algorithm
}
