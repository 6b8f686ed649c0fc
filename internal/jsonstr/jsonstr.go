// Package jsonstr writes JSON strings on the request paths in the bytes encoding/json writes,
// without its reflection, for the functions' hand-written documents (a receipt, a payment, a
// fingerprinted envelope).
package jsonstr

import (
	"encoding/json"
	"unicode/utf8"
)

// Plain reports whether json.Marshal writes s as it stands between its quotes: ASCII from the
// space on, without the quote, the backslash or the HTML characters it escapes (<, >, &).
func Plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// Append appends s as json.Marshal encodes a string: between quotes as it stands when it is
// Plain, else through json.Marshal itself.
func Append(b []byte, s string) []byte {
	if !Plain(s) {
		q, _ := json.Marshal(s) // a string always encodes
		return append(b, q...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
