package handler

import "github.com/idemlambda/idem/pkg/idem/idemhttp"

// HeaderIdempotencyKey is the request header carrying the idempotency key (lower-case, as API
// Gateway HTTP API delivers header names). Its value is parsed by idemhttp.ParseKey: bare or a
// structured-field string, 1 to MaxKeyLength printable ASCII characters.
const HeaderIdempotencyKey = "idempotency-key"

// MaxKeyLength is the longest idempotency key accepted, in characters.
const MaxKeyLength = idemhttp.MaxKeyLength
