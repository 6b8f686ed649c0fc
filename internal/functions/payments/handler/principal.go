package handler

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// Anonymous is the one principal of every request under PAYMENTS_AUTH=none.
const Anonymous = "anonymous"

// maxPrincipalInKey is the longest principal written as is into a scoped key; a longer one (or
// one holding control characters) is replaced there by its SHA-256, which keeps the scoped key
// within the limits of the core (idem.MaxIDLength) and of the ledger.
const maxPrincipalInKey = 512

// principalOf returns who is calling, from the authorizer that mode (PAYMENTS_AUTH) says API
// Gateway ran, namespaced by the kind of authorizer so that identities of different kinds never
// collide (nor with Anonymous):
//
//	AuthIAM     "iam:" + the caller's user ARN, else its caller id
//	AuthJWT     "jwt:" + the sub claim
//	AuthLambda  "lambda:" + the principalId of the authorizer's context, when it is a string
//	AuthNone    Anonymous, whatever the request carries
//
// ok is false when the request carries no usable identity of that kind (no authorizer context,
// a JWT without sub, an empty or non-string principalId): such a request must be refused, never
// served as a shared principal.
func principalOf(req events.APIGatewayV2HTTPRequest, mode string) (principal string, ok bool) {
	if mode == AuthNone {
		return Anonymous, true
	}
	a := req.RequestContext.Authorizer
	if a == nil {
		return "", false
	}
	switch mode {
	case AuthIAM:
		if a.IAM == nil {
			return "", false
		}
		if a.IAM.UserARN != "" {
			return "iam:" + a.IAM.UserARN, true
		}
		if a.IAM.CallerID != "" {
			return "iam:" + a.IAM.CallerID, true
		}
	case AuthJWT:
		if a.JWT != nil && a.JWT.Claims["sub"] != "" {
			return "jwt:" + a.JWT.Claims["sub"], true
		}
	case AuthLambda:
		if s, isString := a.Lambda["principalId"].(string); isString && s != "" {
			return "lambda:" + s, true
		}
	}
	return "", false
}

// scopedKey returns the key under which both the core and the ledger record a request: the
// caller's idempotency key joined unambiguously to its principal, so that one caller can never
// reach another's record.
func scopedKey(principal, key string) string {
	return joinID(principalInKey(principal), key)
}

// joinID is idem.JoinID(a, b), written in one allocation.
func joinID(a, b string) string {
	var la, lb [20]byte
	na := strconv.AppendInt(la[:0], int64(len(a)), 10)
	nb := strconv.AppendInt(lb[:0], int64(len(b)), 10)
	var sb strings.Builder
	sb.Grow(len(na) + 1 + len(a) + 1 + len(nb) + 1 + len(b))
	sb.Write(na)
	sb.WriteByte(':')
	sb.WriteString(a)
	sb.WriteByte(' ')
	sb.Write(nb)
	sb.WriteByte(':')
	sb.WriteString(b)
	return sb.String()
}

// principalInKey is how principal is written into a scoped key: as is, or its SHA-256 when it is
// long or holds control characters. It is the caller idemhttp joins to the idempotency key, so
// the core's key is exactly scopedKey.
func principalInKey(principal string) string {
	if len(principal) > maxPrincipalInKey || !printable(principal) {
		sum := sha256.Sum256([]byte(principal))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	return principal
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}
