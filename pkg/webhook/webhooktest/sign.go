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
	"cmp"
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
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemlambda/idem/internal/preset"
	"github.com/idemlambda/idem/pkg/webhook"
)

// Sign returns r signed with secret as the sender called provider
// (webhook.Names) signs it at r.Now (time.Now when zero): r's headers plus
// the signature headers (and the timestamp and message-id headers the scheme
// needs; an id already in r.Header is kept, else one is derived from the body
// so a re-signed retry keeps it). A sender that signs inside its body
// (Mailgun) gets the signature there, and the body is re-encoded.
//
// secret is what the sender holds: the shared secret or token, or for a
// public-key sender the private key (Ed25519: hex of the 32-byte seed;
// ECDSA P-256: base64 DER, SEC 1 or PKCS #8; KeyPair makes both halves). A
// URL-signing sender needs r.URL; for one that signs a JSON body through the
// URL (Twilio's bodySHA256), the returned URL carries the body's hash.
func Sign(provider, secret string, r webhook.Request) (webhook.Request, error) {
	p, ok := preset.Lookup(provider)
	if !ok {
		return webhook.Request{}, fmt.Errorf("webhooktest: no sender %q (known: %s)", provider, strings.Join(webhook.Names(), ", "))
	}
	return sign(p, secret, r)
}

// sign signs r as p's sender does.
func sign(p preset.Preset, secret string, r webhook.Request) (webhook.Request, error) {
	out := r
	out.Header = r.Header.Clone()
	if out.Header == nil {
		out.Header = http.Header{}
	}
	if out.Now.IsZero() {
		out.Now = time.Now()
	}
	r.Now = out.Now
	if p.Family == preset.FamilyToken {
		out.Header.Set(p.SignatureHeader, secret)
		return out, nil
	}
	if p.Family == preset.FamilyItemHMAC {
		return signItems(secret, out)
	}
	ts := formatTimestamp(r.Now, p.TimestampFormat)
	if p.TimestampField != "" && p.Family != preset.FamilyBodySignature {
		// The sender stamps its body (Linear's webhookTimestamp); the body
		// given is signed as it is.
		ts = ""
	}
	if p.TimestampHeader != "" {
		out.Header.Set(p.TimestampHeader, ts)
	}
	if p.IDHeader != "" && out.Header.Get(p.IDHeader) == "" {
		sum := sha256.Sum256(r.Body)
		out.Header.Set(p.IDHeader, "msg_"+hex.EncodeToString(sum[:12]))
	}
	if p.Family == preset.FamilyBodySignature {
		return signBody(p, secret, out, ts)
	}
	out.URL = signedURL(p, out)
	content, err := signedContent(p, out, ts)
	if err != nil {
		return webhook.Request{}, err
	}
	sig, err := signature(p, secret, content, signatureAlgorithm(p, out.Header))
	if err != nil {
		return webhook.Request{}, err
	}
	encoded := p.Prefix + encode(p.Encoding, sig)
	if p.HeaderFormat != "" && p.HeaderFormat != "{signature}" {
		encoded = strings.NewReplacer("{timestamp}", ts, "{signature}", encoded).Replace(p.HeaderFormat)
	}
	out.Header.Set(p.SignatureHeader, encoded)
	return out, nil
}

// signature signs content as p's sender does: a public-key signature, or an HMAC with alg.
func signature(p preset.Preset, secret string, content []byte, alg preset.Algorithm) ([]byte, error) {
	if p.Family == preset.FamilyPublicKey {
		return signPublicKey(p.Algorithm, secret, content)
	}
	key, err := hmacKey(p.SecretFormat, secret)
	if err != nil {
		return nil, err
	}
	return mac(alg, key, content), nil
}

// hmacKey is the HMAC key a sender holding secret signs with.
func hmacKey(f preset.SecretFormat, secret string) ([]byte, error) {
	switch f {
	case preset.SecretWhsec:
		return preset.DecodeWhsec(secret)
	case preset.SecretHTMLSpecialChars:
		return []byte(strings.NewReplacer("&amp;", "&", "&quot;", `"`, "&#039;", "'", "&#39;", "'", "&lt;", "<", "&gt;", ">").Replace(secret)), nil
	}
	return []byte(secret), nil
}

// formatTimestamp writes t as the sender does.
func formatTimestamp(t time.Time, f preset.TimestampFormat) string {
	switch f {
	case preset.UnixMilliseconds:
		return strconv.FormatInt(t.UnixMilli(), 10)
	case preset.RFC3339:
		return t.UTC().Format(time.RFC3339Nano)
	default:
		return strconv.FormatInt(t.Unix(), 10)
	}
}

// signedContent renders the preset's layout for r.
func signedContent(p preset.Preset, r webhook.Request, ts string) ([]byte, error) {
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
	target := r.URL
	if p.URLDecodeReserved {
		target = decodeReserved.Replace(target)
	}
	method := r.Method
	if method == "" {
		method = "POST"
	}
	return []byte(strings.NewReplacer(
		"{body}", string(r.Body),
		"{timestamp}", ts,
		"{id}", r.Header.Get(p.IDHeader),
		"{url}", target,
		"{method}", method,
		"{form}", form,
	).Replace(p.Layout)), nil
}

// signedURL returns the URL a sender posts r to: r.URL, plus the body-hash
// query parameter for a scheme that signs a JSON body through the URL
// (Twilio's bodySHA256).
func signedURL(p preset.Preset, r webhook.Request) string {
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
	mt, _, _ := mime.ParseMediaType(r.Header.Get("content-type"))
	return mt == "application/x-www-form-urlencoded"
}

// mac is the HMAC of content under key.
func mac(a preset.Algorithm, key, content []byte) []byte {
	var h func() hash.Hash
	switch a {
	case preset.SHA1:
		h = sha1.New
	case preset.SHA512:
		h = sha512.New
	default:
		h = sha256.New
	}
	m := hmac.New(h, key)
	m.Write(content)
	return m.Sum(nil)
}

func encode(e preset.Encoding, b []byte) string {
	if e == preset.Base64 {
		return base64.StdEncoding.EncodeToString(b)
	}
	return hex.EncodeToString(b)
}

// signPublicKey signs content with a private key.
func signPublicKey(a preset.Algorithm, secret string, content []byte) ([]byte, error) {
	switch a {
	case preset.Ed25519:
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

// publicKey returns the public key a verifier is configured with for a
// public-key sender's private key given to Sign: hex for Ed25519, base64 DER
// SubjectPublicKeyInfo for ECDSA.
func publicKey(a preset.Algorithm, private string) (string, error) {
	switch a {
	case preset.Ed25519:
		k, err := ed25519Key(private)
		if err != nil {
			return "", err
		}
		return hex.EncodeToString(k.Public().(ed25519.PublicKey)), nil
	case preset.ECDSAP256:
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
func signBody(p preset.Preset, secret string, r webhook.Request, ts string) (webhook.Request, error) {
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

// decodeReserved decodes the percent-encodings of : / ? @ ! $ ' ( ) * , ;
// in either case, as HubSpot does before signing a URL.
var decodeReserved = func() *strings.Replacer {
	var pairs []string
	for _, c := range ":/?@!$'()*,;" {
		enc := fmt.Sprintf("%%%02X", c)
		pairs = append(pairs, enc, string(c), strings.ToLower(enc), string(c))
	}
	return strings.NewReplacer(pairs...)
}()

// SignHMAC returns r signed with secret as the sender cfg describes signs it
// (webhook.NewHMAC verifies it), with the defaults HMACConfig documents.
func SignHMAC(cfg webhook.HMACConfig, secret string, r webhook.Request) (webhook.Request, error) {
	p := preset.Preset{
		Name:            preset.HMACName,
		Family:          preset.FamilyBodyHMAC,
		SignatureHeader: cfg.Header,
		Prefix:          cfg.Prefix,
		HeaderFormat:    cfg.HeaderFormat,
		TimestampHeader: cfg.TimestampHeader,
		IDHeader:        cfg.IDHeader,
		Layout:          cfg.Layout,
		Algorithm:       preset.Algorithm(strings.ToLower(cmp.Or(cfg.Algorithm, "sha256"))),
		Encoding:        preset.Encoding(strings.ToLower(cmp.Or(cfg.Encoding, "hex"))),
		TimestampFormat: preset.TimestampFormat(strings.ToLower(cfg.TimestampFormat)),
	}
	if strings.EqualFold(cfg.SecretFormat, "whsec") {
		p.SecretFormat = preset.SecretWhsec
	}
	signsTimestamp := p.TimestampHeader != "" || strings.Contains(p.HeaderFormat, "{timestamp}")
	if p.Layout == "" {
		switch {
		case p.IDHeader != "" && signsTimestamp:
			p.Layout = "{id}.{timestamp}.{body}"
		case signsTimestamp:
			p.Layout = "{timestamp}.{body}"
		default:
			p.Layout = "{body}"
		}
	}
	return sign(p, secret, r)
}

// signatureAlgorithm is the HMAC algorithm a delivery is signed with: the one
// its headers declare in the preset's settings header (Twilio's
// x-twilio-webhooks-signature-settings, algorithm=HMAC_SHA256 for a SharedKey
// signature), else the preset's.
func signatureAlgorithm(p preset.Preset, h http.Header) preset.Algorithm {
	if p.SignatureSettingsHeader == "" {
		return p.Algorithm
	}
	for part := range strings.SplitSeq(h.Get(p.SignatureSettingsHeader), ",") {
		if key, name, ok := strings.Cut(part, "="); ok && strings.TrimSpace(key) == "algorithm" && strings.EqualFold(strings.TrimSpace(name), "HMAC_SHA256") {
			return preset.SHA256
		}
	}
	return p.Algorithm
}
