package samtemplate_test

import (
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemlambda/idem/internal/samtemplate"
	"github.com/idemlambda/idem/pkg/webhook"
)

// originals are the five providers every existing deployment has, with the logical IDs they had
// before the template wrote its webhook functions with Fn::ForEach.
var originals = map[string]string{
	"WebhookStripeFunction": "stripe", "WebhookGithubFunction": "github", "WebhookShopifyFunction": "shopify",
	"WebhookStandardFunction": "standard", "WebhookSlackFunction": "slack",
}

func webhookFunctions(t *testing.T, tpl *samtemplate.Template) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, f := range tpl.Functions {
		if f.Code != samtemplate.Webhook {
			continue
		}
		got[f.LogicalID] = f.Env["WEBHOOK_PROVIDER"]
		if len(f.Routes) != 1 || f.Routes[0].Key() != "POST /webhooks/"+f.Env["WEBHOOK_PROVIDER"] {
			t.Errorf("%s (%s): routes %+v, want POST /webhooks/<provider>", f.LogicalID, f.Env["WEBHOOK_PROVIDER"], f.Routes)
		}
	}
	return got
}

func TestTheDefaultProvidersKeepTheirLogicalIDs(t *testing.T) {
	tpl, err := samtemplate.Load(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	if got := webhookFunctions(t, tpl); !reflect.DeepEqual(got, originals) {
		t.Fatalf("webhook functions %v, want %v", got, originals)
	}
}

func TestWebhookProvidersChoosesTheFunctions(t *testing.T) {
	tpl, err := samtemplate.LoadProviders(templatePath, "Stripe, CoinbaseCommerce,Twilio")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"WebhookStripeFunction": "stripe", "WebhookCoinbaseCommerceFunction": "coinbase-commerce", "WebhookTwilioFunction": "twilio"}
	if got := webhookFunctions(t, tpl); !reflect.DeepEqual(got, want) {
		t.Fatalf("webhook functions %v, want %v", got, want)
	}
	if _, ok := tpl.Function("PaymentsFunction"); !ok {
		t.Error("the payments function is gone")
	}
	// A name that is no key of the mapping is refused with the keys.
	for _, bad := range []string{"stripe", "Stripe,Bogus", ","} {
		_, err := samtemplate.LoadProviders(templatePath, bad)
		if !errors.Is(err, samtemplate.ErrUnknownProvider) || !strings.Contains(err.Error(), "CoinbaseCommerce") {
			t.Errorf("LoadProviders(%q): %v, want ErrUnknownProvider naming the keys", bad, err)
		}
	}
}

func TestAllProvidersIsEveryProviderTheTemplateCanDeploy(t *testing.T) {
	keys, _ := mappingKeys(t)
	tpl, err := samtemplate.LoadProviders(templatePath, samtemplate.AllProviders)
	if err != nil {
		t.Fatal(err)
	}
	if got := webhookFunctions(t, tpl); len(got) != len(keys) || len(keys) < 20 {
		t.Errorf("%d webhook functions for the %d keys of the mapping", len(got), len(keys))
	}
}

// mappingKeys returns the keys of the template's WebhookProvider mapping, read with a plain YAML
// parser, and the rule's list of accepted values.
func mappingKeys(t *testing.T) (keys, allowed []string) {
	t.Helper()
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Mappings struct {
			WebhookProvider map[string]yaml.Node `yaml:"WebhookProvider"`
		} `yaml:"Mappings"`
		Rules struct {
			WebhookProvidersAreKnown struct {
				Assertions []struct {
					Assert yaml.Node `yaml:"Assert"`
				} `yaml:"Assertions"`
			} `yaml:"WebhookProvidersAreKnown"`
		} `yaml:"Rules"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for k := range doc.Mappings.WebhookProvider {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	a := doc.Rules.WebhookProvidersAreKnown.Assertions
	if len(a) != 1 || a[0].Assert.Tag != "!EachMemberIn" || len(a[0].Assert.Content) != 2 {
		t.Fatalf("rule WebhookProvidersAreKnown: %+v", a)
	}
	for _, n := range a[0].Assert.Content[1].Content {
		allowed = append(allowed, n.Value)
	}
	slices.Sort(allowed)
	return keys, allowed
}

// Every preset the webhook function knows can be deployed, and nothing else: the mapping, the
// rule that validates WebhookProviders and the presets agree.
func TestEveryPresetCanBeDeployed(t *testing.T) {
	keys, allowed := mappingKeys(t)
	if !slices.Equal(keys, allowed) {
		t.Errorf("rule WebhookProvidersAreKnown accepts %v, the mapping has %v", allowed, keys)
	}
	tpl, err := samtemplate.LoadProviders(templatePath, strings.Join(keys, ","))
	if err != nil {
		t.Fatal(err)
	}
	got := webhookFunctions(t, tpl)
	deployed := map[string]bool{}
	for id, provider := range got {
		deployed[provider] = true
		if strings.ToLower(id) != "webhook"+strings.ReplaceAll(provider, "-", "")+"function" {
			t.Errorf("%s runs %s: its key is not the provider's name", id, provider)
		}
	}
	want := slices.Concat(webhook.Names(), []string{"stripe", "github", "shopify", "standard", "slack"})
	for _, p := range want {
		if !deployed[p] {
			t.Errorf("preset %s cannot be deployed: no row in the WebhookProvider mapping", p)
		}
	}
	if len(deployed) != len(got) || len(got) > len(want) {
		t.Errorf("deployed providers %v, want exactly %v", got, want)
	}
	for id, p := range originals {
		if got[id] != p {
			t.Errorf("%s runs %q, want %s", id, got[id], p)
		}
	}
}
