package deploytest

import (
	"slices"
	"strings"
	"testing"
)

// chosen are the webhook functions a deploy creates, as WebhookProviders keys with the provider
// each runs (its WEBHOOK_PROVIDER and the last segment of its route).
var chosen = []struct {
	overrides map[string]string
	keys      map[string]string
}{
	{nil, map[string]string{"Stripe": "stripe", "Github": "github", "Shopify": "shopify", "Standard": "standard", "Slack": "slack"}},
	{map[string]string{"WebhookProviders": "Stripe,Twilio, CoinbaseCommerce"}, map[string]string{"Stripe": "stripe", "Twilio": "twilio", "CoinbaseCommerce": "coinbase-commerce"}},
}

// Each chosen provider gets its function (in the VPC, with its own secret, route, reserved
// concurrency option and result retention default), its log group, its three alarms and its
// two outputs, under logical IDs that keep the original five's; no other provider gets any.
func TestWebhookProvidersMakeEachProvidersResources(t *testing.T) {
	for _, c := range chosen {
		for _, o := range []map[string]string{nil, {"WebhookReservedConcurrency": "4", "WebhookResultTtl": "120h", "WebhookSink": "eventbridge"}} {
			overrides := map[string]string{}
			for k, v := range c.overrides {
				overrides[k] = v
			}
			for k, v := range o {
				overrides[k] = v
			}
			s := deploy(t, overrides)
			checkWebhookFunctions(t, s, c.keys, o != nil)
		}
	}
}

// checkWebhookFunctions checks the resources and outputs of the webhook functions keys names
// (WebhookProviders keys and their providers) in s, and that no other provider has any; options
// says whether WebhookReservedConcurrency and WebhookResultTtl were set.
func checkWebhookFunctions(t *testing.T, s *stack, keys map[string]string, options bool) {
	t.Helper()
	var wantFns []string
	for key := range keys {
		wantFns = append(wantFns, "Webhook"+key+"Function")
	}
	slices.Sort(wantFns)
	var gotFns []string
	for _, name := range s.ofType("AWS::Serverless::Function") {
		if strings.HasPrefix(name, "Webhook") {
			gotFns = append(gotFns, name)
		}
	}
	if !slices.Equal(gotFns, wantFns) {
		t.Fatalf("%v: webhook functions %v, want %v", s.params["WebhookProviders"], gotFns, wantFns)
	}
	for key, provider := range keys {
		checkWebhookFunction(t, s, key, provider, options)
		checkWebhookSecretAndLogs(t, s, key)
		checkWebhookOutputs(t, s, key, provider)
	}
	checkNothingOfUnchosenProviders(t, s, keys)
}

// checkWebhookFunction checks the function of WebhookProviders key, which runs provider: its
// environment, its options, the Globals' VPC, its secret's policy and its one route.
func checkWebhookFunction(t *testing.T, s *stack, key, provider string, options bool) {
	t.Helper()
	fn, secret := "Webhook"+key+"Function", "Webhook"+key+"Secret"
	p := props(s.Resources[fn])
	env := get(p, "Environment", "Variables")
	if get(env, "WEBHOOK_PROVIDER") != provider || refersTo(get(env, "WEBHOOK_SECRET_ARN")) != secret {
		t.Errorf("%s: WEBHOOK_PROVIDER %v, WEBHOOK_SECRET_ARN %v", fn, get(env, "WEBHOOK_PROVIDER"), get(env, "WEBHOOK_SECRET_ARN"))
	}
	checkWebhookOptions(t, fn, p, options)
	if global := get(s.Globals, "Function", "VpcConfig"); p["VpcConfig"] != nil || global == nil {
		t.Errorf("%s: VpcConfig %v, want Globals' %v", fn, p["VpcConfig"], global)
	}
	if !slices.ContainsFunc(p["Policies"].([]any), func(pol any) bool {
		return refersTo(get(pol, "AWSSecretsManagerGetSecretValuePolicy", "SecretArn")) == secret
	}) {
		t.Errorf("%s cannot read %s: %v", fn, secret, p["Policies"])
	}
	events, _ := p["Events"].(map[string]any)
	if len(events) != 1 || get(events, "Webhook", "Type") != "HttpApi" || !isRef(get(events, "Webhook", "Properties", "ApiId"), "HttpApi") ||
		get(events, "Webhook", "Properties", "Method") != "POST" || get(events, "Webhook", "Properties", "Path") != "/webhooks/"+provider {
		t.Errorf("%s: events %v, want POST /webhooks/%s on HttpApi", fn, events, provider)
	}
}

// checkWebhookOptions checks that the function fn, of properties p, takes its result retention
// and its reserved concurrency from WebhookResultTtl and WebhookReservedConcurrency when options
// says they are set, and has neither otherwise: each provider's own retention applies.
func checkWebhookOptions(t *testing.T, fn string, p map[string]any, options bool) {
	t.Helper()
	if ttl := get(p, "Environment", "Variables", "IDEM_RESULT_TTL"); (ttl != nil) != options || (options && !isRef(ttl, "WebhookResultTtl")) {
		t.Errorf("%s: IDEM_RESULT_TTL %v (options %v)", fn, ttl, options)
	}
	if rc := p["ReservedConcurrentExecutions"]; (rc != nil) != options || (options && !isRef(rc, "WebhookReservedConcurrency")) {
		t.Errorf("%s: reserved concurrency %v (options %v)", fn, rc, options)
	}
}

// checkWebhookSecretAndLogs checks the secret, the log group and the three alarms of the
// function of WebhookProviders key.
func checkWebhookSecretAndLogs(t *testing.T, s *stack, key string) {
	t.Helper()
	fn, secret, logs := "Webhook"+key+"Function", "Webhook"+key+"Secret", "Webhook"+key+"LogGroup"
	if r := s.Resources[secret]; r["Type"] != "AWS::SecretsManager::Secret" || r["DeletionPolicy"] == nil || get(props(r), "GenerateSecretString") == nil {
		t.Errorf("%s: %v", secret, r)
	}
	// A log group named after the stack, handed to its function: it exists before the
	// function, so Lambda cannot create one of the same name first.
	if lg := props(s.Resources[logs]); jsonString(get(lg, "LogGroupName", "Fn::Sub")) != "/aws/lambda/${AWS::StackName}/"+fn || !isRef(lg["RetentionInDays"], "LogRetentionDays") {
		t.Errorf("%s: %v", logs, lg)
	}
	if p := props(s.Resources[fn]); refersTo(get(p, "LoggingConfig", "LogGroup")) != logs {
		t.Errorf("%s: LoggingConfig %v, want its log group %s", fn, p["LoggingConfig"], logs)
	}
	for _, alarm := range []string{"ErrorsAlarm", "ThrottlesAlarm", "OutcomeErrorAlarm"} {
		a := props(s.Resources["Webhook"+key+alarm])
		if a == nil || refersTo(get(a, "Dimensions", "0", "Value")) != fn || !isRef(get(a, "AlarmActions", "0"), "AlarmTopic") {
			t.Errorf("Webhook%s%s: %v", key, alarm, a)
		}
	}
}

// checkWebhookOutputs checks the two outputs of the function of WebhookProviders key: its
// route's URL and its secret's ARN.
func checkWebhookOutputs(t *testing.T, s *stack, key, provider string) {
	t.Helper()
	url := jsonString(get(s.Outputs["Webhook"+key+"Url"], "Value", "Fn::Sub", "0"))
	path := get(s.Outputs["Webhook"+key+"Url"], "Value", "Fn::Sub", "1", "Path")
	if !strings.HasPrefix(url, "https://${HttpApi}.execute-api.") || !strings.HasSuffix(url, "${Path}") || path != "/webhooks/"+provider {
		t.Errorf("output Webhook%sUrl: %v", key, s.Outputs["Webhook"+key+"Url"])
	}
	if refersTo(get(s.Outputs["Webhook"+key+"SecretArn"], "Value")) != "Webhook"+key+"Secret" {
		t.Errorf("output Webhook%sSecretArn: %v", key, s.Outputs["Webhook"+key+"SecretArn"])
	}
}

// checkNothingOfUnchosenProviders fails t if s has a webhook resource of a key not in keys.
func checkNothingOfUnchosenProviders(t *testing.T, s *stack, keys map[string]string) {
	t.Helper()
	for name := range s.Resources {
		key, ok := strings.CutPrefix(name, "Webhook")
		if !ok {
			continue
		}
		for _, suffix := range []string{"Function", "Secret", "LogGroup", "ErrorsAlarm", "ThrottlesAlarm", "OutcomeErrorAlarm"} {
			if k, ok := strings.CutSuffix(key, suffix); ok && keys[k] == "" {
				t.Errorf("%s exists, but %s was not chosen", name, k)
			}
		}
	}
}
