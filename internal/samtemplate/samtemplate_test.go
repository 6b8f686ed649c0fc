package samtemplate_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/idemlambda/idem/internal/samtemplate"
)

const templatePath = "../../template.yaml"

// yamlRoutes reads the HttpApi events of template.yaml with a plain YAML parser, independently
// of goformation and of ApplyLanguageExtensions: "<LogicalID> <METHOD> <path>" for each, the
// webhook functions' loop unrolled by hand for the default of WebhookProviders (each key K of the
// WebhookProvider mapping makes WebhookKFunction on the mapping's Path).
func yamlRoutes(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	var routes []string
	resources := get(doc.Content[0], "Resources")
	for i := 0; i+1 < len(resources.Content); i += 2 {
		id, res := resources.Content[i].Value, resources.Content[i+1]
		if id == "Fn::ForEach::WebhookProvider" {
			if res.Content[0].Value != "Provider" || res.Content[1].Tag != "!Ref" || res.Content[1].Value != "WebhookProviders" {
				t.Fatalf("the webhook loop is not over WebhookProviders: %v", res.Content[:2])
			}
			fn := get(res.Content[2], "Webhook${Provider}Function")
			def := get(get(get(doc.Content[0], "Parameters"), "WebhookProviders"), "Default").Value
			mapping := get(get(doc.Content[0], "Mappings"), "WebhookProvider")
			for _, key := range strings.Split(def, ",") {
				routes = append(routes, eventsOf("Webhook"+key+"Function", fn, func(p *yaml.Node) string {
					// !FindInMap [WebhookProvider, !Ref Provider, Path]
					if p.Tag != "!FindInMap" || p.Content[0].Value != "WebhookProvider" || p.Content[1].Value != "Provider" {
						t.Fatalf("webhook path %v", p)
					}
					return get(get(mapping, key), p.Content[2].Value).Value
				})...)
			}
			continue
		}
		// Other loops (the alarms) declare no function: were one to, goformation's routes
		// would hold more than these and the test would fail.
		if strings.HasPrefix(id, "Fn::ForEach::") || get(res, "Type").Value != "AWS::Serverless::Function" {
			continue
		}
		routes = append(routes, eventsOf(id, res, func(p *yaml.Node) string { return p.Value })...)
	}
	slices.Sort(routes)
	return routes
}

// get returns the value of key in the mapping node n, or nil.
func get(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// eventsOf returns "<id> <METHOD> <path>" for each HttpApi event of the function resource res,
// its path read from the Path node by path.
func eventsOf(id string, res *yaml.Node, path func(*yaml.Node) string) []string {
	var routes []string
	evs := get(get(res, "Properties"), "Events")
	for j := 0; evs != nil && j+1 < len(evs.Content); j += 2 {
		ev := evs.Content[j+1]
		if get(ev, "Type").Value != "HttpApi" {
			continue
		}
		p := get(ev, "Properties")
		routes = append(routes, id+" "+get(p, "Method").Value+" "+path(get(p, "Path")))
	}
	return routes
}

func TestRoutesAreThoseTheTemplateDeclares(t *testing.T) {
	tpl, err := samtemplate.Load(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range tpl.Routes() {
		got = append(got, r.Function+" "+r.Key())
	}
	slices.Sort(got)
	want := yamlRoutes(t, templatePath)
	if !slices.Equal(got, want) {
		t.Fatalf("routes:\n got %q\nwant %q", got, want)
	}
	if len(want) < 7 {
		t.Fatalf("only %d routes in the template; expected the five webhooks and two payments routes", len(want))
	}
}

func TestFunctionsTakeGlobalsAndTheirOwnEnvironment(t *testing.T) {
	tpl, err := samtemplate.Load(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	stripe, ok := tpl.Function("WebhookStripeFunction")
	if !ok {
		t.Fatal("no WebhookStripeFunction")
	}
	if stripe.Code != samtemplate.Webhook || stripe.Env["WEBHOOK_PROVIDER"] != "stripe" {
		t.Errorf("stripe function: code %q, env %v", stripe.Code, stripe.Env)
	}
	if stripe.Timeout != 10*time.Second || stripe.MemorySize != 256 {
		t.Errorf("stripe function: timeout %s memory %d, want Globals' 10s and 256", stripe.Timeout, stripe.MemorySize)
	}
	// Globals' variables, with parameters at their defaults.
	if stripe.Env["IDEM_KEY_PREFIX"] != "idem" || stripe.Env["LOG_LEVEL"] != "info" {
		t.Errorf("stripe function env %v lacks Globals' IDEM_KEY_PREFIX=idem LOG_LEVEL=info", stripe.Env)
	}
	// Values that exist only after a deploy are left out, never half-resolved.
	for _, name := range []string{"WEBHOOK_SECRET_ARN", "REDIS_URL", "WEBHOOK_QUEUE_URL"} {
		if v, ok := stripe.Env[name]; ok {
			t.Errorf("%s = %q; a value that depends on a resource must be left out", name, v)
		}
	}
	payments, ok := tpl.Function("PaymentsFunction")
	if !ok || payments.Code != samtemplate.Payments || len(payments.Routes) != 2 {
		t.Fatalf("payments function: %+v", payments)
	}
	if _, ok := payments.Env["PAYMENTS_TABLE"]; ok {
		t.Errorf("PAYMENTS_TABLE (a Ref to the table) must be left out: %v", payments.Env)
	}
}

const minimal = `
Transform: AWS::Serverless-2016-10-31
Parameters:
  Prefix: {Type: String, Default: local}
Resources:
  Api:
    Type: AWS::Serverless::HttpApi
  Table:
    Type: AWS::DynamoDB::Table
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Environment:
        Variables:
          PAYMENTS_LEDGER: memory
          IDEM_KEY_PREFIX: !Ref Prefix
          PAYMENTS_TABLE: !Ref Table
          ARN: !Sub arn:aws:dynamodb:${AWS::Region}:${AWS::AccountId}:table/${Table}
          NAME: !Sub ${Prefix}-name
          SINK: !If [IsProd, sqs, log]
      Events:
        Get:
          Type: HttpApi
          Properties: {Method: get, Path: "/items/{id}", ApiId: !Ref Api}
        Queue:
          Type: SQS
          Properties: {Queue: arn:aws:sqs:us-east-1:123456789012:q}
`

func TestParseAppliesSAMDefaults(t *testing.T) {
	tpl, err := samtemplate.Parse([]byte(minimal), "")
	if err != nil {
		t.Fatal(err)
	}
	f := tpl.Functions[0]
	if f.Timeout != samtemplate.DefaultTimeout {
		t.Errorf("timeout %s, want the default %s", f.Timeout, samtemplate.DefaultTimeout)
	}
	// A literal and a Ref to a parameter are static; a Ref to a resource, Fn::Sub and Fn::If are
	// known only after a deploy.
	want := map[string]string{"PAYMENTS_LEDGER": "memory", "IDEM_KEY_PREFIX": "local"}
	if len(f.Env) != len(want) {
		t.Errorf("env %v, want %v", f.Env, want)
	}
	for k, v := range want {
		if f.Env[k] != v {
			t.Errorf("env %s = %q, want %q", k, f.Env[k], v)
		}
	}
	var keys []string
	for _, r := range f.Routes {
		keys = append(keys, r.Key())
	}
	if !slices.Equal(keys, []string{"GET /items/{id}"}) {
		t.Errorf("routes %q, want the HttpApi event's (SQS is no route)", keys)
	}
}

func TestParseRefusesWhatItCannotServe(t *testing.T) {
	for name, edit := range map[string][2]string{
		"unknown program":          {"PAYMENTS_LEDGER: memory", "OTHER: x"},
		"HttpApi event, no path":   {`Path: "/items/{id}", `, ""},
		"loop over a literal list": {"Resources:\n", "Resources:\n  Fn::ForEach::L: [X, [a, b], {Fn${X}: {Type: AWS::Serverless::Function}}]\n"},
	} {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(minimal, edit[0], edit[1], 1)
			if src == minimal {
				t.Fatalf("edit %q did not apply", edit[0])
			}
			_, err := samtemplate.Parse([]byte(src), "")
			if !errors.Is(err, samtemplate.ErrTemplate) {
				t.Fatalf("Parse: %v, want ErrTemplate", err)
			}
		})
	}
}

const loops = `
Parameters:
  Names: {Type: CommaDelimitedList, Default: "a, b"}
  Indexes: {Type: CommaDelimitedList, Default: "1,2"}
Mappings:
  Route: {a: {Path: /a}, b: {Path: /b}, c: {Path: /c}}
Resources:
  Fn::ForEach::Outer:
    - N
    - !Ref Names
    - Fn${N}:
        Type: AWS::Serverless::Function
        Properties:
          Environment: {Variables: {WEBHOOK_PROVIDER: !Ref N, NAME: "name-${N}"}}
          Events: {Hook: {Type: HttpApi, Properties: {Method: POST, Path: !FindInMap [Route, !Ref N, Path]}}}
      Fn::ForEach::Inner:
        - I
        - !Ref Indexes
        - Fn${N}x${I}:
            Type: AWS::Serverless::Function
            Properties: {Environment: {Variables: {PAYMENTS_LEDGER: "${N}${I}"}}}
`

// Loops write one function per value of their collection, with the value in place of ${N} and
// !Ref N, and may hold loops.
func TestLoopsWriteTheirFunctions(t *testing.T) {
	tpl, err := samtemplate.Parse([]byte(loops), "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range tpl.Functions {
		got = append(got, f.LogicalID+" "+f.Env["WEBHOOK_PROVIDER"]+f.Env["PAYMENTS_LEDGER"]+" "+f.Env["NAME"])
	}
	want := []string{"Fna a name-a", "Fnax1 a1 ", "Fnax2 a2 ", "Fnb b name-b", "Fnbx1 b1 ", "Fnbx2 b2 "}
	if !slices.Equal(got, want) {
		t.Errorf("functions %q, want %q", got, want)
	}
	if r := tpl.Routes(); len(r) != 2 || r[0].Key() != "POST /a" || r[1].Key() != "POST /b" {
		t.Errorf("routes %+v", r)
	}
	// The list is checked against the template's WebhookProvider mapping, which this one lacks.
	if _, err := samtemplate.Parse([]byte(loops), "c"); !errors.Is(err, samtemplate.ErrUnknownProvider) {
		t.Errorf("Parse(c): %v, want ErrUnknownProvider", err)
	}
}
