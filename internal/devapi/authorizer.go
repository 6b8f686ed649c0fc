package devapi

import (
	"cmp"
	"context"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	paymentshandler "github.com/idemlambda/idem/internal/functions/payments/handler"
	"github.com/idemlambda/idem/internal/gateway"
)

// HeaderPrincipal names the caller of a local payments request, in place of the identity the
// deployed API's authorizer would establish (a SigV4-signed IAM identity, a JWT's sub, a Lambda
// authorizer's principalId). Only the local API reads it: a deployed function takes its caller
// from the authorizer context alone, so sending this header to AWS identifies nobody.
const HeaderPrincipal = "x-idem-local-principal"

// DefaultPrincipal is the local caller of a request without HeaderPrincipal, so that plain curl
// works against `make run` with no credentials.
const DefaultPrincipal = "local-developer"

// emulateAuthorizer returns h behind the authorizer that mode (PAYMENTS_AUTH) names: each
// request reaches h without HeaderPrincipal, and with the authorizer context API Gateway would
// add for the caller that header names (DefaultPrincipal when absent), written for each kind of
// authorizer (IAM, JWT, Lambda), of which the function reads the one mode names. With mode none,
// h is returned unchanged.
func emulateAuthorizer(mode string, h gateway.Handler) gateway.Handler {
	if mode == paymentshandler.AuthNone {
		return h
	}
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		principal := DefaultPrincipal
		for name, v := range req.Headers {
			if strings.EqualFold(name, HeaderPrincipal) {
				principal = cmp.Or(strings.TrimSpace(v), principal)
				delete(req.Headers, name)
			}
		}
		req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
				AccountID: "000000000000", CallerID: principal, UserARN: "arn:aws:iam::000000000000:user/" + principal, UserID: principal},
			JWT:    &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": principal}},
			Lambda: map[string]any{"principalId": principal},
		}
		return h(ctx, req)
	}
}
