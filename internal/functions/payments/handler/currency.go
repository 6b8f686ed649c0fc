package handler

import (
	_ "embed"
	"strings"
)

// iso4217 holds the accepted currency codes, one per line; see the file for what is left out.
//
//go:embed iso4217.txt
var iso4217 string

// currencies is the set of accepted codes, upper case, each the value under itself: the code
// currencyCode returns is this string, never a new one.
var currencies = func() map[string]string {
	set := make(map[string]string, 200)
	for line := range strings.Lines(iso4217) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		set[line] = line
	}
	return set
}()

// currencyCode returns s upper-cased when it is three ASCII letters naming an accepted ISO 4217
// currency, in any case.
func currencyCode[T string | []byte](s T) (string, bool) {
	if len(s) != 3 {
		return "", false
	}
	var b [3]byte
	for i := range 3 {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z':
			c -= 'a' - 'A'
		case c < 'A' || c > 'Z':
			return "", false
		}
		b[i] = c
	}
	code, ok := currencies[string(b[:])]
	return code, ok
}
