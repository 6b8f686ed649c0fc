package webhook

import (
	"net/http"
	"time"

	"github.com/idemlambda/idem/internal/preset"
)

// NewVerifier builds a verifier for any preset, for tests that vary a row of
// the table.
func NewVerifier(p preset.Preset, secrets []string, tolerance time.Duration) (*Verifier, error) {
	return newVerifier(p, secrets, tolerance)
}

// CheckSignature is the signature half of Verify alone, for tests of the
// signing schemes whose bodies are not the sender's events.
func (v *Verifier) CheckSignature(r Request) error {
	if r.Now.IsZero() {
		r.Now = time.Now()
	}
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r = v.withAliases(r)
	_, err := v.verify(r, v.parse(r))
	return err
}

// HMACPreset is the preset NewHMAC builds from cfg.
func HMACPreset(cfg HMACConfig) (preset.Preset, error) { return hmacPreset(cfg) }

// Preset returns the preset v verifies.
func (v *Verifier) Preset() preset.Preset { return v.preset }

// Event is the delivery half of Verify alone: what Verify returns for r
// once its signature is taken as good, for tests of what a delivery yields.
func (v *Verifier) Event(r Request) (Delivery, error) {
	if r.Header == nil {
		r.Header = http.Header{}
	}
	r = v.withAliases(r)
	doc := v.parse(r)
	secret, _ := v.verify(r, doc)
	return v.delivery(r, doc, max(secret, 0))
}

// ScanJSON reads body in one pass as a preset reading the member at path
// would: whether it is one JSON document, its compact form, the text of the
// member at path (empty when absent or not a string or number), and the
// spans of the top-level members in the compact form.
func ScanJSON(body []byte, path string) (valid bool, compact []byte, member string, top [][]byte) {
	plan := planBody(preset.Preset{EventType: preset.Source{Field: path}, FingerprintFields: []string{"x"}})
	doc := scanJSON(body, plan)
	if doc.err != nil {
		return false, nil, "", nil
	}
	member, _ = doc.scalar(path, false)
	for _, m := range doc.top {
		top = append(top, doc.compact[m.start:m.end])
	}
	return true, doc.compact, member, top
}
