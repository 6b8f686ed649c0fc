package handler

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/pkg/idem"
)

func loadEvent(t testing.TB, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	var req events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(readFixture(t, "testdata/events/"+name), &req); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return req
}

func TestPrincipalComesFromTheConfiguredAuthorizer(t *testing.T) {
	const (
		iamARN  = "iam:arn:aws:sts::123456789012:assumed-role/CheckoutService/checkout"
		jwtSub  = "jwt:5f1c3f9e-6d0a-4c1b-9a59-3c2b1d0e8f7a"
		lambdaP = "lambda:merchant-42"
	)
	files := []string{"create_payment.json", "authorizer_iam.json", "authorizer_jwt.json",
		"authorizer_lambda.json", "authorizer_lambda_no_principal.json"}
	// want[mode][file]: the principal, or "" for a request that must be refused.
	want := map[string]map[string]string{
		AuthIAM:    {"authorizer_iam.json": iamARN},
		AuthJWT:    {"authorizer_jwt.json": jwtSub},
		AuthLambda: {"authorizer_lambda.json": lambdaP},
		AuthNone: {"create_payment.json": Anonymous, "authorizer_iam.json": Anonymous, "authorizer_jwt.json": Anonymous,
			"authorizer_lambda.json": Anonymous, "authorizer_lambda_no_principal.json": Anonymous},
	}
	for mode, byFile := range want {
		for _, file := range files {
			got, ok := principalOf(loadEvent(t, file), mode)
			if w := byFile[file]; got != w || ok != (w != "") {
				t.Errorf("%s, %s: principal %q (ok %v), want %q", mode, file, got, ok, w)
			}
		}
	}
}

func TestUnusableIdentitiesAreRefused(t *testing.T) {
	jwtNoSub := loadEvent(t, "authorizer_jwt.json")
	delete(jwtNoSub.RequestContext.Authorizer.JWT.Claims, "sub")
	jwtEmptySub := loadEvent(t, "authorizer_jwt.json")
	jwtEmptySub.RequestContext.Authorizer.JWT.Claims["sub"] = ""
	lambdaNumber := loadEvent(t, "authorizer_lambda.json")
	lambdaNumber.RequestContext.Authorizer.Lambda["principalId"] = 42.0
	lambdaEmpty := loadEvent(t, "authorizer_lambda.json")
	lambdaEmpty.RequestContext.Authorizer.Lambda["principalId"] = ""
	lambdaSubOnly := loadEvent(t, "authorizer_lambda_no_principal.json")
	lambdaSubOnly.RequestContext.Authorizer.Lambda["sub"] = "merchant-42"
	iamEmpty := loadEvent(t, "authorizer_iam.json")
	iamEmpty.RequestContext.Authorizer.IAM.UserARN, iamEmpty.RequestContext.Authorizer.IAM.CallerID = "", ""
	for _, tt := range []struct {
		name, mode string
		req        events.APIGatewayV2HTTPRequest
	}{
		{"JWT without sub", AuthJWT, jwtNoSub},
		{"JWT with an empty sub", AuthJWT, jwtEmptySub},
		{"numeric principalId", AuthLambda, lambdaNumber},
		{"empty principalId", AuthLambda, lambdaEmpty},
		{"sub but no principalId", AuthLambda, lambdaSubOnly},
		{"IAM context without identity", AuthIAM, iamEmpty},
		{"JWT context under iam", AuthIAM, loadEvent(t, "authorizer_jwt.json")},
		{"IAM context under lambda", AuthLambda, loadEvent(t, "authorizer_iam.json")},
	} {
		if p, ok := principalOf(tt.req, tt.mode); ok {
			t.Errorf("%s: principal %q accepted", tt.name, p)
		}
	}
}

func TestIAMPrincipalFallsBackToCallerID(t *testing.T) {
	req := loadEvent(t, "authorizer_iam.json")
	req.RequestContext.Authorizer.IAM.UserARN = ""
	if got, ok := principalOf(req, AuthIAM); !ok || got != "iam:AROAEXAMPLEROLEID1234:checkout" {
		t.Fatalf("principal %q", got)
	}
}

func TestPrincipalKindsNeverCollide(t *testing.T) {
	jwt := loadEvent(t, "authorizer_jwt.json")
	jwt.RequestContext.Authorizer.JWT.Claims["sub"] = Anonymous
	lambda := loadEvent(t, "authorizer_lambda.json")
	lambda.RequestContext.Authorizer.Lambda["principalId"] = Anonymous
	seen := map[string]bool{Anonymous: true}
	for _, c := range []struct {
		req  events.APIGatewayV2HTTPRequest
		mode string
	}{{jwt, AuthJWT}, {lambda, AuthLambda}} {
		p, _ := principalOf(c.req, c.mode)
		if seen[p] {
			t.Fatalf("principal %q shared by two kinds of caller", p)
		}
		seen[p] = true
	}
}

func TestAuthModeFromTheEnvironment(t *testing.T) {
	for _, tt := range []struct {
		value        string
		insideLambda bool
		want         string // "" for an error naming PAYMENTS_AUTH
	}{
		{"", false, AuthNone},
		{"", true, ""},
		{"iam", true, AuthIAM},
		{"JWT", true, AuthJWT},
		{"lambda", false, AuthLambda},
		{"none", true, AuthNone},
		{"cognito", false, ""},
		{"cognito", true, ""},
	} {
		got, err := authFromEnv(tt.value, tt.insideLambda)
		var se *setting.Error
		switch {
		case tt.want == "" && (!errors.As(err, &se) || se.Var != EnvAuth):
			t.Errorf("%q (inside Lambda %v): %q, %v; want an error naming %s", tt.value, tt.insideLambda, got, err, EnvAuth)
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("%q (inside Lambda %v): %q, %v; want %q", tt.value, tt.insideLambda, got, err, tt.want)
		}
	}
}

func TestScopedKeyStaysUsableForAnyPrincipal(t *testing.T) {
	key := strings.Repeat("k", MaxKeyLength)
	for _, principal := range []string{Anonymous, "jwt:" + strings.Repeat("s", 4000), "lambda:a\nb"} {
		scoped := scopedKey(principal, key)
		if err := (idem.Key{Scope: Scope, ID: scoped}).Validate(); err != nil {
			t.Errorf("principal of %d bytes: %v", len(principal), err)
		}
	}
	if scopedKey("jwt:a", "b c") == scopedKey("jwt:a b", "c") {
		t.Fatal("scoped keys collide")
	}
	long := "jwt:" + strings.Repeat("s", 4000)
	if scopedKey(long, "k") == scopedKey(long+"t", "k") {
		t.Fatal("long principals collide")
	}
}

func TestMatchRoute(t *testing.T) {
	get := loadEvent(t, "get_payment.json")
	named := loadEvent(t, "default_route_named_stage.json")
	if r := matchRoute(loadEvent(t, "create_payment.json")); r.key != RouteCreate {
		t.Errorf("create_payment.json: %+v", r)
	}
	if r := matchRoute(get); r.key != RouteGet || r.id != "pay_placeholder" {
		t.Errorf("get_payment.json: %+v", r)
	}
	if r := matchRoute(named); r.key != RouteCreate {
		t.Errorf("default_route_named_stage.json: %+v", r)
	}
	fallback := func(method, path string) route {
		req := named
		req.RequestContext.HTTP.Method = method
		req.RawPath = path
		return matchRoute(req)
	}
	for _, tt := range []struct {
		method, path string
		want         route
	}{
		{"GET", "/prod/payments/pay_1", route{key: RouteGet, id: "pay_1"}},
		{"GET", "/prod/payments/pay%5F1", route{key: RouteGet, id: "pay_1"}},
		{"GET", "/prod/payments", route{allow: "POST"}},
		{"DELETE", "/prod/payments/pay_1", route{allow: "GET"}},
		{"POST", "/prod/payments/pay_1", route{allow: "GET"}},
		{"POST", "/prod/payments/", route{}},
		{"GET", "/prod/payments/a/b", route{}},
		{"POST", "/prod/paymentsx", route{}},
		{"POST", "/prod/other", route{}},
	} {
		if got := fallback(tt.method, tt.path); got != tt.want {
			t.Errorf("%s %s: %+v, want %+v", tt.method, tt.path, got, tt.want)
		}
	}
}

// The scoped key is the core's key for the request: idem.JoinID of the principal in the key and
// the idempotency key, which idemhttp joins for the caller.
func TestScopedKeyIsJoinIDOfPrincipalAndKey(t *testing.T) {
	for _, tt := range []struct{ principal, key string }{
		{Anonymous, "k"},
		{"jwt:a b", "c d"},
		{"iam:" + strings.Repeat("p", maxPrincipalInKey), strings.Repeat("k", MaxKeyLength)},
		{"lambda:a\nb", "1:2 3"},
		{"", ""},
	} {
		if got, want := scopedKey(tt.principal, tt.key), idem.JoinID(principalInKey(tt.principal), tt.key); got != want {
			t.Errorf("scopedKey(%.20q, %.20q) = %.40q, want %.40q", tt.principal, tt.key, got, want)
		}
	}
}
