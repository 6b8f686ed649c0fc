package samtemplate_test

import (
	"encoding/json"
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

func expand(t *testing.T, src string, params map[string]string) (map[string]any, error) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	err := samtemplate.ApplyLanguageExtensions(doc, params)
	return doc, err
}

func TestForEachFollowsTheDocumentedRules(t *testing.T) {
	src := `{
	  "Transform": ["AWS::LanguageExtensions", "AWS::Serverless-2016-10-31"],
	  "Parameters": {"Names": {"Type": "CommaDelimitedList", "Default": "a-b, c"}},
	  "Mappings": {"M": {"a-b": {"V": "one"}, "c": {"V": "two"}}},
	  "Resources": {
	    "Fixed": {"Type": "T"},
	    "Fn::ForEach::Outer": ["N", {"Ref": "Names"}, {
	      "R${N}": {"Type": "T", "Properties": {
	        "Name": "${N}", "Ref": {"Ref": "N"}, "Sub": {"Fn::Sub": "${R${N}}-${AWS::Region}"},
	        "Found": {"Fn::FindInMap": ["M", {"Ref": "N"}, "V"]},
	        "Fn::ForEach::Tags": ["X", ["x", "y"], {"Tag${X}": "${N}/${X}"}]
	      }},
	      "Fn::ForEach::Inner": ["I", ["1", "${N}"], {"R${N}x${I}": {"Type": "U"}}]
	    }]
	  },
	  "Outputs": {"Fn::ForEach::Out": ["N", ["z"], {"O${N}": {"Value": {"Ref": "Fixed"}}}]}
	}`
	doc, err := expand(t, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"Fixed": map[string]any{"Type": "T"},
		"Ra-b": map[string]any{"Type": "T", "Properties": map[string]any{
			"Name": "a-b", "Ref": "a-b", "Sub": map[string]any{"Fn::Sub": "${Ra-b}-${AWS::Region}"},
			"Found": "one", "Tagx": "a-b/x", "Tagy": "a-b/y",
		}},
		"Rc": map[string]any{"Type": "T", "Properties": map[string]any{
			"Name": "c", "Ref": "c", "Sub": map[string]any{"Fn::Sub": "${Rc}-${AWS::Region}"},
			"Found": "two", "Tagx": "c/x", "Tagy": "c/y",
		}},
		"Ra-bx1": map[string]any{"Type": "U"}, "Ra-bxa-b": map[string]any{"Type": "U"},
		"Rcx1": map[string]any{"Type": "U"}, "Rcxc": map[string]any{"Type": "U"},
	}
	if !reflect.DeepEqual(doc["Resources"], want) {
		got, _ := json.MarshalIndent(doc["Resources"], "", " ")
		t.Errorf("resources:\n%s", got)
	}
	if _, ok := doc["Outputs"].(map[string]any)["Oz"]; !ok {
		t.Errorf("outputs %v, want Oz", doc["Outputs"])
	}

	// A given value replaces the parameter's default.
	doc, err = expand(t, src, map[string]string{"Names": "c"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := doc["Resources"].(map[string]any)["Ra-b"]; ok {
		t.Error("Names=c still makes Ra-b")
	}
}

func TestForEachRefusesWhatCloudFormationRefuses(t *testing.T) {
	base := `{
	  "Transform": "AWS::LanguageExtensions",
	  "Parameters": {"Names": {"Type": "CommaDelimitedList", "Default": "a,b"}, "One": {"Type": "String", "Default": "a"}},
	  "Mappings": {"M": {"a": {"V": "x"}}},
	  "Resources": {"Fn::ForEach::L": ["N", {"Ref": "Names"}, {"R${N}": {"Type": "T"}}]}
	}`
	for name, edit := range map[string][2]string{
		"a string parameter":  {`{"Ref": "Names"}`, `{"Ref": "One"}`},
		"no such parameter":   {`{"Ref": "Names"}`, `{"Ref": "Nothing"}`},
		"a repeated value":    {`"Default": "a,b"`, `"Default": "a,a"`},
		"a key written twice": {`"Resources": {`, `"Resources": {"Ra": {"Type": "T"}, `},
		"a malformed loop":    {`["N", {"Ref": "Names"}, {"R${N}": {"Type": "T"}}]`, `["N", {"Ref": "Names"}]`},
		"a missing map key":   {`{"Type": "T"}`, `{"Type": "T", "P": {"Fn::FindInMap": ["M", "${N}", "V"]}}`},
	} {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(base, edit[0], edit[1], 1)
			if src == base {
				t.Fatalf("edit %q did not apply", edit[0])
			}
			if _, err := expand(t, src, nil); !errors.Is(err, samtemplate.ErrTemplate) {
				t.Fatalf("ApplyLanguageExtensions: %v, want ErrTemplate", err)
			}
		})
	}
	if _, err := expand(t, base, nil); err != nil {
		t.Fatalf("the unedited template: %v", err)
	}
}
