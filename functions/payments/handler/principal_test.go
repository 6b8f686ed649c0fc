package handler

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
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

func TestPrincipalComesFromTheAuthorizer(t *testing.T) {
	for file, want := range map[string]string{
		"create_payment.json":                 Anonymous,
		"authorizer_jwt.json":                 "jwt:5f1c3f9e-6d0a-4c1b-9a59-3c2b1d0e8f7a",
		"authorizer_iam.json":                 "iam:arn:aws:sts::123456789012:assumed-role/CheckoutService/checkout",
		"authorizer_lambda.json":              "lambda:merchant-42",
		"authorizer_lambda_no_principal.json": Anonymous,
	} {
		if got := principalOf(loadEvent(t, file)); got != want {
			t.Errorf("%s: principal %q, want %q", file, got, want)
		}
	}
}

func TestIAMPrincipalFallsBackToCallerID(t *testing.T) {
	req := loadEvent(t, "authorizer_iam.json")
	req.RequestContext.Authorizer.IAM.UserARN = ""
	if got := principalOf(req); got != "iam:AROAEXAMPLEROLEID1234:checkout" {
		t.Fatalf("principal %q", got)
	}
}

func TestPrincipalKindsNeverCollide(t *testing.T) {
	jwt := loadEvent(t, "authorizer_jwt.json")
	jwt.RequestContext.Authorizer.JWT.Claims["sub"] = Anonymous
	lambda := loadEvent(t, "authorizer_lambda.json")
	lambda.RequestContext.Authorizer.Lambda["principalId"] = Anonymous
	seen := map[string]bool{Anonymous: true}
	for _, req := range []events.APIGatewayV2HTTPRequest{jwt, lambda} {
		p := principalOf(req)
		if seen[p] {
			t.Fatalf("principal %q shared by two kinds of caller", p)
		}
		seen[p] = true
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
