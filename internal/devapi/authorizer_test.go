package devapi

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	paymentshandler "github.com/idemlambda/idem/internal/functions/payments/handler"
)

// Each mode hands the function an identity of its own kind, one per local caller, and the
// header never reaches the function. (cmd/localapi's tests run the payments handler behind it.)
func TestEmulatedAuthorizerGivesEachLocalCallerItsOwnIdentity(t *testing.T) {
	for _, mode := range []string{paymentshandler.AuthIAM, paymentshandler.AuthJWT, paymentshandler.AuthLambda} {
		t.Run(mode, func(t *testing.T) {
			var seen []events.APIGatewayV2HTTPRequest
			record := func(_ context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				seen = append(seen, req)
				return events.APIGatewayV2HTTPResponse{StatusCode: 200}, nil
			}
			h := emulateAuthorizer(mode, record)
			for _, who := range []string{"", "alice", "bob"} {
				req := events.APIGatewayV2HTTPRequest{Headers: map[string]string{"content-type": "application/json"}}
				if who != "" {
					req.Headers["X-Idem-Local-Principal"] = who
				}
				if _, err := h(context.Background(), req); err != nil {
					t.Fatal(err)
				}
			}
			ids := map[string]bool{}
			for i, req := range seen {
				if _, ok := req.Headers["X-Idem-Local-Principal"]; ok {
					t.Errorf("request %d still carries %s", i, HeaderPrincipal)
				}
				id := identity(req.RequestContext.Authorizer, mode)
				if id == "" {
					t.Fatalf("request %d reaches the function without an identity: %+v", i, req.RequestContext.Authorizer)
				}
				ids[id] = true
			}
			if len(ids) != 3 {
				t.Fatalf("identities %v, want 3 distinct (default, alice, bob)", ids)
			}
		})
	}
	if h := emulateAuthorizer(paymentshandler.AuthNone, nil); h != nil {
		t.Fatal("mode none gets an authorizer")
	}
}

// identity returns the caller's identity in a, of the kind the function reads in mode, or "".
func identity(a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription, mode string) string {
	switch {
	case a == nil:
	case mode == paymentshandler.AuthIAM && a.IAM != nil:
		return a.IAM.UserARN
	case mode == paymentshandler.AuthJWT && a.JWT != nil:
		return a.JWT.Claims["sub"]
	case mode == paymentshandler.AuthLambda:
		id, _ := a.Lambda["principalId"].(string)
		return id
	}
	return ""
}
