package webhook

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"testing"

	"github.com/idemlambda/idem/internal/preset"
)

// plainWordOracle is plainWord byte by byte, from plainStringByte.
func plainWordOracle(x uint64) bool {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], x)
	for _, c := range b {
		if !plainStringByte[c] {
			return false
		}
	}
	return true
}

// plainWord agrees with plainStringByte: every byte value at every position
// among plain neighbours, beside every other byte value, and random words.
func TestPlainWord(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			for _, fill := range []byte{'a', ' ', '~', 0x7f, 0x80, 0xff} {
				w := bytes.Repeat([]byte{fill}, 8)
				w[pos] = byte(c)
				for other := range 256 {
					w2 := bytes.Clone(w)
					w2[(pos+1)%8] = byte(other)
					x := binary.LittleEndian.Uint64(w2)
					if got, want := plainWord(x), plainWordOracle(x); got != want {
						t.Fatalf("plainWord(%q) = %v, want %v", w2, got, want)
					}
				}
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		x := r.Uint64()
		if r.IntN(2) == 0 {
			x &= 0x7f7f7f7f7f7f7f7f // ASCII only
		}
		if got, want := plainWord(x), plainWordOracle(x); got != want {
			t.Fatalf("plainWord(%#x) = %v, want %v", x, got, want)
		}
	}
}

// appendSignature decodes as encoding/hex and strict base64 decode, and
// refuses what they refuse or what does not decode to the signature's size.
func TestAppendSignature(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	sig := make([]byte, 32)
	for range 1000 {
		for i := range sig {
			sig[i] = byte(r.Uint32())
		}
		for _, enc := range []preset.Encoding{preset.Hex, preset.Base64} {
			s := hex.EncodeToString(sig)
			if enc == preset.Base64 {
				s = base64.StdEncoding.EncodeToString(sig)
			} else if r.IntN(2) == 0 {
				s = string(bytes.ToUpper([]byte(s)))
			}
			got, ok := appendSignature([]byte("pre"), s, enc, 32)
			if !ok || !bytes.Equal(got, append([]byte("pre"), sig...)) {
				t.Fatalf("%s %q: %x %v", enc, s, got, ok)
			}
			// One byte changed to each value: accepted exactly when the
			// standard decoder accepts it.
			i := r.IntN(len(s))
			for c := range 256 {
				b := []byte(s)
				b[i] = byte(c)
				var dec []byte
				var err error
				if enc == preset.Hex {
					dec, err = hex.DecodeString(string(b))
				} else {
					dec, err = base64.StdEncoding.Strict().DecodeString(string(b))
				}
				if _, ok := appendSignature(nil, string(b), enc, 32); ok != (err == nil && len(dec) == 32) {
					t.Fatalf("%s %q: accepted %v, standard decoder: %v", enc, b, ok, err)
				}
			}
		}
	}
	if _, ok := appendSignature(nil, hex.EncodeToString(sig)[:62], preset.Hex, 32); ok {
		t.Fatal("a short hex signature was accepted")
	}
}

// A header with more signatures than a parsedSignature holds inline keeps
// every one, in order.
func TestParsedSignatureBeyondInline(t *testing.T) {
	var p parsedSignature
	var want [][]byte
	for i := range inlineSignatures + 3 {
		sig := bytes.Repeat([]byte{byte(i + 1)}, 32)
		want = append(want, sig)
		if !p.add(hex.EncodeToString(sig), preset.Hex, 32) {
			t.Fatalf("signature %d refused", i)
		}
	}
	if p.add("zz", preset.Hex, 32) || p.n != len(want) {
		t.Fatalf("%d signatures after a bad one, want %d", p.n, len(want))
	}
	for i, sig := range want {
		if !bytes.Equal(p.signature(i), sig) || !p.matches(sig) {
			t.Fatalf("signature %d: %x", i, p.signature(i))
		}
	}
	if p.matches(bytes.Repeat([]byte{0xff}, 32)) {
		t.Fatal("matched a signature never added")
	}
}
