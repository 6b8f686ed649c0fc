package sink

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
)

// FuzzResolve decodes any message body as an envelope and resolves it against a store holding
// one payload: it never panics, and it yields a payload only when the pointer names that
// payload's bucket, key, length and digest exactly.
func FuzzResolve(f *testing.F) {
	store := NewMemoryStore("payloads-fuzz")
	payload := []byte(`{"ref":"refs/heads/main"}`)
	key := PayloadKey("github", "sha256:ab")
	_ = store.Put(context.Background(), key, payload)
	sum := sha256.Sum256(payload)
	good, _ := json.Marshal(Envelope{Metadata: Metadata{Provider: "github", ID: "sha256:ab"},
		PayloadRef: &PayloadRef{Bucket: "payloads-fuzz", Key: key, Bytes: int64(len(payload)), SHA256: hex.EncodeToString(sum[:])}})
	f.Add(good)
	f.Add([]byte(`{"provider":"github","id":"sha256:ab","payload":{"a":1}}`))
	f.Add([]byte(`{"provider":"github","id":"sha256:ab","payload_ref":{"bucket":"payloads-fuzz","key":"` + key + `","bytes":-1}}`))
	f.Add([]byte(`{"payload_ref":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var env Envelope
		if json.Unmarshal(body, &env) != nil {
			return
		}
		ref := env.PayloadRef
		before := env.Payload
		err := env.Resolve(context.Background(), store)
		switch {
		case ref == nil:
			if err != nil || !bytes.Equal(env.Payload, before) {
				t.Fatalf("an envelope without a pointer changed: %v", err)
			}
		case err == nil:
			if ref.Bucket != "payloads-fuzz" || ref.Key != PayloadKey(env.Provider, env.ID) || ref.Key != key ||
				ref.Bytes != int64(len(payload)) || ref.SHA256 != hex.EncodeToString(sum[:]) || !bytes.Equal(env.Payload, payload) {
				t.Fatalf("resolved %+v to %q", ref, env.Payload)
			}
		case env.PayloadRef != ref:
			t.Fatal("a failed resolution changed the pointer")
		}
	})
}
