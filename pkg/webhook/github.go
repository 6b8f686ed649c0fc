package webhook

import (
	"crypto/hmac"
	"encoding/hex"
	"fmt"
	"mime"
	"net/url"
	"strings"
	"time"
)

// GitHub signs each delivery in the X-Hub-Signature-256 header:
//
//	x-hub-signature-256: sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17
//
// the hex HMAC-SHA256 of the raw body keyed with the webhook's secret. The
// legacy SHA-1 X-Hub-Signature is not accepted. Neither a timestamp nor the
// X-GitHub-Delivery GUID nor the X-GitHub-Event name is signed, so replay
// protection rests on deduplicating the body itself: its digest is the
// deduplication key (BodyDigestID), which a redelivery, byte for byte the same
// body, keeps, and which no header sent with a captured body can change.
const (
	// GitHubSignatureHeader is the header carrying GitHub's signature.
	GitHubSignatureHeader = "x-hub-signature-256"
	// GitHubDeliveryHeader carries the delivery GUID, unsigned: Event.DeliveryID.
	GitHubDeliveryHeader = "x-github-delivery"
	// GitHubEventHeader carries the event name ("push", "pull_request", ...).
	GitHubEventHeader = "x-github-event"
	// GitHubResultTTL is how long a completed GitHub result is kept: GitHub
	// lets deliveries of the past three days be redelivered.
	GitHubResultTTL = 96 * time.Hour
)

// githubSignaturePrefix precedes the hex digest in GitHubSignatureHeader.
const githubSignaturePrefix = "sha256="

// GitHubSignature returns the x-hub-signature-256 header value GitHub sends
// with body signed with secret: "sha256=<hex HMAC-SHA256 of body>".
func GitHubSignature(secret string, body []byte) string {
	return githubSignaturePrefix + hex.EncodeToString(hmacSHA256([]byte(secret), body))
}

type githubProvider struct {
	secrets [][]byte
}

func newGitHub(c config) (Provider, error) {
	p := &githubProvider{}
	for _, s := range c.secrets {
		p.secrets = append(p.secrets, []byte(s))
	}
	return p, nil
}

func (p *githubProvider) Name() string { return "github" }

func (p *githubProvider) DefaultResultTTL() time.Duration { return GitHubResultTTL }

// parseGitHubSignature parses "sha256=<64 hex digits>".
func parseGitHubSignature(v string) ([]byte, error) {
	if v == "" {
		return nil, fmt.Errorf("%w: no %s header", ErrNotSigned, GitHubSignatureHeader)
	}
	digest, ok := strings.CutPrefix(v, githubSignaturePrefix)
	if !ok {
		return nil, fmt.Errorf("%w: %s does not start with %q", ErrInvalidHeader, GitHubSignatureHeader, githubSignaturePrefix)
	}
	sig, ok := decodeHexMAC(digest)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a hex HMAC-SHA256", ErrInvalidHeader, GitHubSignatureHeader)
	}
	return sig, nil
}

// Verify checks x-hub-signature-256 against every secret.
func (p *githubProvider) Verify(headers map[string]string, body []byte, _ time.Time) error {
	sig, err := parseGitHubSignature(header(headers, GitHubSignatureHeader))
	if err != nil {
		return err
	}
	for _, secret := range p.secrets {
		if hmac.Equal(hmacSHA256(secret, body), sig) {
			return nil
		}
	}
	return fmt.Errorf("%w: checked against %d secret(s)", ErrNoValidSignature, len(p.secrets))
}

// Event derives the deduplication key from the signed body (BodyDigestID),
// takes the delivery GUID and event name from the unsigned headers, and the
// repository (or organization) from the body. A webhook configured with
// content type application/x-www-form-urlencoded carries its JSON in the
// payload form field; the signature and the key cover the form, as sent.
func (p *githubProvider) Event(headers map[string]string, body []byte) (Event, error) {
	payload := body
	if mediaType, _, err := mime.ParseMediaType(header(headers, "content-type")); err == nil && mediaType == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return Event{}, fmt.Errorf("%w: form body: %s", ErrBadPayload, quote(err.Error()))
		}
		payload = []byte(form.Get("payload"))
	}
	obj, err := decodeObject(payload)
	if err != nil {
		return Event{}, err
	}
	ev := Event{
		ID:         BodyDigestID(body),
		DeliveryID: header(headers, GitHubDeliveryHeader),
		Type:       header(headers, GitHubEventHeader),
		Unsigned:   FieldDeliveryID | FieldType,
	}
	if ev.DeliveryID == "" {
		return Event{}, fmt.Errorf("%w: no %s header", ErrNoEventID, GitHubDeliveryHeader)
	}
	if repo := obj.obj("repository"); repo != nil {
		ev.ObjectID = repo.str("full_name")
	}
	if ev.ObjectID == "" {
		if org := obj.obj("organization"); org != nil {
			ev.ObjectID = org.str("login")
		}
	}
	return ev, nil
}

func (p *githubProvider) Sign(secret string, body []byte, _ time.Time) map[string]string {
	return map[string]string{GitHubSignatureHeader: GitHubSignature(secret, body)}
}

// Sample is a push event, compact as GitHub sends it, with the headers GitHub
// sets; eventID becomes the delivery GUID.
func (p *githubProvider) Sample(eventID string, now time.Time) ([]byte, map[string]string) {
	const (
		owner = "idemlambda"
		repo  = "demo"
	)
	before := derivedID("", "before"+eventID, 40)
	after := derivedID("", "after"+eventID, 40)
	pushedAt := now.UTC().Format(time.RFC3339)
	user := map[string]any{
		"login": "octocat", "id": 583231, "type": "User",
		"html_url": "https://github.com/octocat",
	}
	body := map[string]any{
		"ref":         "refs/heads/main",
		"before":      before,
		"after":       after,
		"created":     false,
		"deleted":     false,
		"forced":      false,
		"compare":     fmt.Sprintf("https://github.com/%s/%s/compare/%s...%s", owner, repo, before[:12], after[:12]),
		"commits":     []any{map[string]any{"id": after, "message": "Update README.md", "timestamp": pushedAt, "author": map[string]any{"name": "The Octocat", "username": "octocat"}, "added": []string{}, "removed": []string{}, "modified": []string{"README.md"}}},
		"pusher":      map[string]any{"name": "octocat", "email": "octocat@github.com"},
		"sender":      user,
		"head_commit": map[string]any{"id": after, "message": "Update README.md", "timestamp": pushedAt},
		"repository": map[string]any{
			"id":             702418393,
			"node_id":        "R_kgDOKd3P2Q",
			"name":           repo,
			"full_name":      owner + "/" + repo,
			"private":        true,
			"owner":          map[string]any{"login": owner, "id": 139426, "type": "Organization"},
			"html_url":       "https://github.com/" + owner + "/" + repo,
			"default_branch": "main",
			"pushed_at":      now.Unix(),
		},
		"organization": map[string]any{"login": owner, "id": 139426},
	}
	return mustJSON(body, false), map[string]string{
		"content-type":                           "application/json",
		"user-agent":                             "GitHub-Hookshot/" + derivedID("", "hookshot", 7),
		GitHubDeliveryHeader:                     eventID,
		GitHubEventHeader:                        "push",
		"x-github-hook-id":                       "498251737",
		"x-github-hook-installation-target-id":   "702418393",
		"x-github-hook-installation-target-type": "repository",
	}
}
