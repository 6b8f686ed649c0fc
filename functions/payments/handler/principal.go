package handler

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemlambda/idem/pkg/idem"
)

// Anonymous is the principal of a request that carries no authorizer identity.
const Anonymous = "anonymous"

// maxPrincipalInKey is the longest principal written as is into a scoped key; a longer one (or
// one holding control characters) is replaced there by its SHA-256, which keeps the scoped key
// within the limits of the core (idem.MaxIDLength) and of the ledger.
const maxPrincipalInKey = 512

// principalOf returns who is calling, from the authorizer API Gateway ran, namespaced by the
// kind of authorizer so that identities of different kinds never collide (nor with Anonymous):
//
//	JWT authorizer      "jwt:" + the sub claim
//	IAM authorization   "iam:" + the caller's user ARN, else its caller id
//	Lambda authorizer   "lambda:" + the principalId (else sub) string of its context
//
// A request with none of these is Anonymous.
func principalOf(req events.APIGatewayV2HTTPRequest) string {
	a := req.RequestContext.Authorizer
	if a == nil {
		return Anonymous
	}
	if a.JWT != nil {
		if sub := a.JWT.Claims["sub"]; sub != "" {
			return "jwt:" + sub
		}
	}
	if a.IAM != nil {
		if a.IAM.UserARN != "" {
			return "iam:" + a.IAM.UserARN
		}
		if a.IAM.CallerID != "" {
			return "iam:" + a.IAM.CallerID
		}
	}
	for _, name := range []string{"principalId", "sub"} {
		if s, ok := a.Lambda[name].(string); ok && s != "" {
			return "lambda:" + s
		}
	}
	return Anonymous
}

// scopedKey returns the key under which both the core and the ledger record a request: the
// caller's idempotency key joined unambiguously to its principal, so that one caller can never
// reach another's record.
func scopedKey(principal, key string) string {
	part := principal
	if len(part) > maxPrincipalInKey || !printable(part) {
		sum := sha256.Sum256([]byte(principal))
		part = "sha256:" + hex.EncodeToString(sum[:])
	}
	return idem.JoinID(part, key)
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}
