package idemhttp

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemlambda/idem/pkg/idem"
)

func TestParseKey(t *testing.T) {
	long := strings.Repeat("k", MaxKeyLength)
	tests := []struct {
		name, header, want string
		missing, invalid   bool
	}{
		{name: "uuid bare", header: "8e03978e-40d5-43e8-bc93-6894a57f9324", want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{name: "uuid quoted", header: `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, want: "8e03978e-40d5-43e8-bc93-6894a57f9324"},
		{name: "one character", header: "a", want: "a"},
		{name: "max length bare", header: long, want: long},
		{name: "max length quoted", header: `"` + long + `"`, want: long},
		{name: "inner spaces kept", header: "order 42 try 1", want: "order 42 try 1"},
		{name: "surrounding white space trimmed", header: " \tabc\t ", want: "abc"},
		{name: "spaces inside quotes kept", header: `" abc "`, want: " abc "},
		{name: "every printable ASCII character bare", header: "!#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", want: "!#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"},
		{name: "bare quote inside", header: `a"b`, want: `a"b`},
		{name: "escaped quote", header: `"a\"b"`, want: `a"b`},
		{name: "escaped backslash", header: `"a\\b"`, want: `a\b`},
		{name: "bare backslash", header: `a\b`, want: `a\b`},
		{name: "quoted max length after unescaping", header: `"` + strings.Repeat(`\"`, MaxKeyLength) + `"`, want: strings.Repeat(`"`, MaxKeyLength)},

		{name: "absent", header: "", missing: true},
		{name: "blank", header: "  \t ", missing: true},
		{name: "empty quoted string", header: `""`, invalid: true},
		{name: "too long bare", header: long + "k", invalid: true},
		{name: "too long quoted", header: `"` + long + `k"`, invalid: true},
		{name: "non-ASCII", header: "clé-42", invalid: true},
		{name: "non-ASCII quoted", header: `"clé-42"`, invalid: true},
		{name: "control character", header: "a\x01b", invalid: true},
		{name: "tab inside", header: "a\tb", invalid: true},
		{name: "DEL", header: "a\x7fb", invalid: true},
		{name: "unterminated quote", header: `"abc`, invalid: true},
		{name: "lone quote", header: `"`, invalid: true},
		{name: "escaped closing quote only", header: `"abc\"`, invalid: true},
		{name: "unknown escape", header: `"a\nb"`, invalid: true},
		{name: "trailing backslash", header: `"abc\`, invalid: true},
		{name: "structured-field parameters", header: `"abc";v=1`, invalid: true},
		{name: "two quoted keys joined by a proxy", header: `"abc", "def"`, invalid: true},
		{name: "unescaped quote inside quotes", header: `"a"b"`, invalid: true},
		{name: "byte sequence key (RFC 8941)", header: `:YWJj:`, want: ":YWJj:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKey(tt.header)
			switch {
			case tt.missing:
				if !errors.Is(err, ErrMissingKey) || !errors.Is(err, idem.ErrInvalidKey) {
					t.Fatalf("ParseKey(%q) = %q, %v; want ErrMissingKey, an idem.ErrInvalidKey", tt.header, got, err)
				}
			case tt.invalid:
				if !errors.Is(err, idem.ErrInvalidKey) || errors.Is(err, ErrMissingKey) {
					t.Fatalf("ParseKey(%q) = %q, %v; want an idem.ErrInvalidKey that is not ErrMissingKey", tt.header, got, err)
				}
			case err != nil || got != tt.want:
				t.Fatalf("ParseKey(%q) = %q, %v; want %q", tt.header, got, err, tt.want)
			}
		})
	}
}

// quoteKey returns key as an RFC 8941 sf-string.
func quoteKey(key string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(key) + `"`
}

func FuzzParseKey(f *testing.F) {
	for _, seed := range []string{"", "a", `"a"`, `"a\"b"`, `"a\\b"`, `"abc`, `"a";p`, " x ",
		"8e03978e-40d5-43e8-bc93-6894a57f9324", strings.Repeat("k", MaxKeyLength+1), "\x00", "é"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		key, err := ParseKey(header)
		if err != nil {
			if !errors.Is(err, idem.ErrInvalidKey) {
				t.Fatalf("ParseKey(%q): unexpected error type %T: %v", header, err, err)
			}
			return
		}
		wantPrintable(t, header, key)
		wantEveryFormSameKey(t, key)
	})
}

// wantPrintable checks that the key ParseKey accepted from header is 1 to MaxKeyLength
// printable ASCII characters.
func wantPrintable(t *testing.T, header, key string) {
	t.Helper()
	if len(key) < 1 || len(key) > MaxKeyLength {
		t.Fatalf("ParseKey(%q) accepted a key of %d characters", header, len(key))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			t.Fatalf("ParseKey(%q) accepted byte %#x", header, key[i])
		}
	}
}

// wantEveryFormSameKey checks that key's quoted form, and its bare form wherever one exists,
// parse as key.
func wantEveryFormSameKey(t *testing.T, key string) {
	t.Helper()
	if again, err := ParseKey(quoteKey(key)); err != nil || again != key {
		t.Fatalf("quoted form of %q parsed as %q, %v", key, again, err)
	}
	if key[0] != '"' && key[0] != ' ' && key[len(key)-1] != ' ' {
		if again, err := ParseKey(key); err != nil || again != key {
			t.Fatalf("bare form of %q parsed as %q, %v", key, again, err)
		}
	}
}
