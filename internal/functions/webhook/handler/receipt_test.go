package handler

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// The receipt is written as json.Marshal writes it, byte for byte: every string the sender
// can put in an id or a type, escapes, HTML characters, invalid UTF-8 and U+2028 included.
func TestReceiptIsEncodedAsEncodingJSONDoes(t *testing.T) {
	texts := []string{"", "evt_1", "payment_intent.succeeded", `a"b`, `a\b`, "<script>&", "tab\there",
		"nl\n\r", "\x00\x01\x1f\x7f", "\b\f", "é ü 日本", "\u2028\u2029", "\xff\xfe", "bad \xc3 utf8", "sha256:" + strings.Repeat("ab", 32)}
	r := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
			if r.IntN(3) > 0 {
				b[i] = byte(0x20 + r.IntN(0x60))
			}
		}
		texts = append(texts, string(b))
	}
	for i, id := range texts {
		for _, rc := range []receipt{
			{Received: true, ID: id, Type: texts[(i+1)%len(texts)]},
			{Received: true, ID: id, DeliveryID: texts[(i+2)%len(texts)], Type: texts[(i+3)%len(texts)]},
			{ID: id},
		} {
			want, err := json.Marshal(rc)
			if err != nil {
				t.Fatal(err)
			}
			if got := rc.appendJSON(nil); string(got) != string(want) {
				t.Fatalf("%+v: got %s, want %s", rc, got, want)
			}
		}
	}
}
