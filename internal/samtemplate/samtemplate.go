// Package samtemplate reads what the local tools need from the SAM template: each function, the
// HTTP API routes its events declare, its timeout, memory size and static environment, with the
// template's Globals applied, as a deploy with a given WebhookProviders would create them. The
// local API, the sample events and the Lambda-runtime tests take their routes and settings from
// here, so none of them can drift from template.yaml.
//
// It reads what template.yaml uses, no more. goformation turns the YAML's short-form intrinsics
// into their long form; then the AWS::LanguageExtensions transform is applied as CloudFormation
// applies it before SAM reads the template (ApplyLanguageExtensions: the Fn::ForEach loops that
// write one webhook function per provider, and Fn::FindInMap). An environment value is static
// when it is a literal or a Ref to a parameter; any other (Fn::If, Fn::Sub, a Ref to a resource)
// is known only after a deploy, and left out.
package samtemplate

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/awslabs/goformation/v7/intrinsics"
)

// The template's choice of webhook providers: a deploy creates one function per key listed in
// ProvidersParameter, each a key of the ProvidersMapping mapping.
const (
	// ProvidersParameter is the template parameter listing the webhook providers to deploy.
	ProvidersParameter = "WebhookProviders"
	// ProvidersMapping is the template mapping with one row per provider that can be deployed.
	ProvidersMapping = "WebhookProvider"
	// AllProviders, as the providers of LoadProviders, stands for every key of ProvidersMapping.
	AllProviders = "all"
)

// DefaultTimeout is a function's timeout when neither it nor Globals sets one: 3 seconds, as
// in Lambda and SAM.
const DefaultTimeout = 3 * time.Second

// Code names the Go program a function runs: the package ./functions/<Code>.
type Code string

// The programs of this repository.
const (
	// Webhook is ./functions/webhook; a function runs it when its environment sets
	// WEBHOOK_PROVIDER.
	Webhook Code = "webhook"
	// Payments is ./functions/payments; a function runs it when its environment sets
	// PAYMENTS_LEDGER.
	Payments Code = "payments"
	// Consumer is ./functions/consumer; a function runs it when its environment sets
	// CONSUMER_CONCURRENCY. It has no route: the queue of the sqs sink invokes it.
	Consumer Code = "consumer"
)

// ErrTemplate is wrapped by every error about the template's content (as opposed to reading
// the file).
var ErrTemplate = errors.New("samtemplate: unsupported template")

// ErrUnknownProvider is wrapped by the error of LoadProviders for a provider that is not a key of
// the template's ProvidersMapping (the template's own rule refuses it too, at deploy).
var ErrUnknownProvider = errors.New("samtemplate: unknown webhook provider")

// Template is what the local tools need from a SAM template.
type Template struct {
	// Path is the file the template was read from.
	Path string
	// Functions are the template's AWS::Serverless::Function resources, sorted by LogicalID.
	Functions []Function
}

// Function is one AWS::Serverless::Function of the template.
type Function struct {
	// LogicalID is the resource's name in the template, e.g. "WebhookStripeFunction". SAM
	// uses it as the function name in local runs and as the key of --env-vars files.
	LogicalID string
	// Code is the program the function runs, from its environment (see Code's constants).
	Code Code
	// Env holds the function's static environment variables, Globals' replaced by its own of
	// the same name; an empty value is unset.
	Env map[string]string
	// Timeout is the function's Timeout, else Globals' Timeout, else DefaultTimeout.
	Timeout time.Duration
	// MemorySize is the function's MemorySize in MB, else Globals', else 128.
	MemorySize int
	// Routes are the function's HttpApi events, sorted by route key.
	Routes []Route
}

// Route is one HttpApi event of a function.
type Route struct {
	// Method is the upper-case HTTP method, or "ANY".
	Method string
	// Path is the route's path, with {name} and {name+} parameters, or "$default".
	Path string
	// Function is the LogicalID of the function the route invokes.
	Function string
}

// Key returns the route key API Gateway puts in routeKey: "POST /payments", or "$default".
func (r Route) Key() string {
	if r.Path == "$default" {
		return r.Path
	}
	return r.Method + " " + r.Path
}

// Routes returns every function's routes, sorted by route key.
func (t *Template) Routes() []Route {
	var all []Route
	for _, f := range t.Functions {
		all = append(all, f.Routes...)
	}
	slices.SortFunc(all, func(a, b Route) int { return cmp.Compare(a.Key(), b.Key()) })
	return all
}

// Function returns the function called logicalID, or false.
func (t *Template) Function(logicalID string) (Function, bool) {
	i := slices.IndexFunc(t.Functions, func(f Function) bool { return f.LogicalID == logicalID })
	if i < 0 {
		return Function{}, false
	}
	return t.Functions[i], true
}

// WebhookFunction returns the webhook function of provider (the one whose WEBHOOK_PROVIDER
// it is), or false.
func (t *Template) WebhookFunction(provider string) (Function, bool) {
	i := slices.IndexFunc(t.Functions, func(f Function) bool { return f.Code == Webhook && f.Env["WEBHOOK_PROVIDER"] == provider })
	if i < 0 {
		return Function{}, false
	}
	return t.Functions[i], true
}

// Load reads the SAM template at path, with every parameter at its default.
func Load(path string) (*Template, error) { return LoadProviders(path, "") }

// LoadProviders reads the SAM template at path as deployed with ProvidersParameter set to
// providers (keys of ProvidersMapping, comma-separated), every other parameter at its default.
// An empty providers keeps the parameter's default; AllProviders is every key of the mapping.
func LoadProviders(path, providers string) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("samtemplate: %w", err)
	}
	t, err := Parse(data, providers)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.Path = path
	return t, nil
}

// Parse parses a SAM template held in data (YAML or JSON) as LoadProviders does.
func Parse(data []byte, providers string) (*Template, error) {
	js, err := intrinsics.ProcessYAML(data, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		return nil, fmt.Errorf("samtemplate: parse: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, fmt.Errorf("samtemplate: parse: %w", err)
	}
	params := map[string]string{}
	if providers != "" {
		if params[ProvidersParameter], err = resolveProviders(doc, providers); err != nil {
			return nil, err
		}
	}
	if err := ApplyLanguageExtensions(doc, params); err != nil {
		return nil, err
	}
	return functions(doc, params)
}

// resolveProviders returns providers as the template's ProvidersParameter takes them, AllProviders
// replaced by every key of ProvidersMapping.
func resolveProviders(doc map[string]any, providers string) (string, error) {
	keys := slices.Sorted(maps.Keys(asMap(asMap(doc["Mappings"])[ProvidersMapping])))
	if strings.TrimSpace(providers) == AllProviders {
		return strings.Join(keys, ","), nil
	}
	for k := range strings.SplitSeq(providers, ",") {
		if !slices.Contains(keys, strings.TrimSpace(k)) {
			return "", fmt.Errorf("%w %q in %s (one of %s, or %s)", ErrUnknownProvider, strings.TrimSpace(k), ProvidersParameter, strings.Join(keys, ", "), AllProviders)
		}
	}
	return providers, nil
}

// functions returns the template of doc, whose loops are expanded.
func functions(doc map[string]any, params map[string]string) (*Template, error) {
	globals := asMap(asMap(doc["Globals"])["Function"])
	resources := asMap(doc["Resources"])
	out := &Template{}
	for _, id := range slices.Sorted(maps.Keys(resources)) {
		if asMap(resources[id])["Type"] != "AWS::Serverless::Function" {
			continue
		}
		props := asMap(asMap(resources[id])["Properties"])
		f := Function{LogicalID: id, Env: map[string]string{}, Timeout: DefaultTimeout, MemorySize: 128}
		for _, p := range []map[string]any{globals, props} {
			for k, v := range asMap(asMap(p["Environment"])["Variables"]) {
				if s := static(v, doc, params); s != "" {
					f.Env[k] = s
				} else {
					delete(f.Env, k)
				}
			}
			if s, ok := p["Timeout"].(float64); ok {
				f.Timeout = time.Duration(s * float64(time.Second))
			}
			if mb, ok := p["MemorySize"].(float64); ok {
				f.MemorySize = int(mb)
			}
		}
		switch {
		case f.Env["WEBHOOK_PROVIDER"] != "":
			f.Code = Webhook
		case f.Env["PAYMENTS_LEDGER"] != "":
			f.Code = Payments
		case f.Env["CONSUMER_CONCURRENCY"] != "":
			f.Code = Consumer
		default:
			return nil, fmt.Errorf("%w: function %s: no WEBHOOK_PROVIDER, PAYMENTS_LEDGER or CONSUMER_CONCURRENCY in its environment, so which program it runs is unknown", ErrTemplate, id)
		}
		var err error
		if f.Routes, err = routes(id, asMap(props["Events"])); err != nil {
			return nil, err
		}
		out.Functions = append(out.Functions, f)
	}
	return out, nil
}

// routes returns the HttpApi events of function id as routes, sorted by route key.
func routes(id string, evs map[string]any) ([]Route, error) {
	var out []Route
	for _, name := range slices.Sorted(maps.Keys(evs)) {
		ev := asMap(evs[name])
		switch ev["Type"] {
		case "HttpApi":
		case "Api":
			// A REST API event would need payload v1.0, which nothing here builds: refuse it
			// rather than serve a template that is not what gets deployed.
			return nil, fmt.Errorf("%w: function %s event %s: REST API (Type: Api) events are not supported", ErrTemplate, id, name)
		default:
			continue // not an HTTP route (SQS, Schedule, ...)
		}
		p := asMap(ev["Properties"])
		method, _ := cmp.Or(p["Method"], any("ANY")).(string)
		path, _ := cmp.Or(p["Path"], any("$default")).(string)
		if v, ok := p["PayloadFormatVersion"]; ok && v != "2.0" {
			return nil, fmt.Errorf("%w: function %s event %s: PayloadFormatVersion %v (only 2.0 is served)", ErrTemplate, id, name, v)
		}
		if method == "" || path != "$default" && !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("%w: function %s event %s: method %v, path %v: want a method and a path that starts with /", ErrTemplate, id, name, p["Method"], p["Path"])
		}
		out = append(out, Route{Method: strings.ToUpper(method), Path: path, Function: id})
	}
	slices.SortFunc(out, func(a, b Route) int { return cmp.Compare(a.Key(), b.Key()) })
	return out, nil
}

// static returns an environment value as deployed: a literal, or the value of the parameter a
// Ref names (given, else its Default); "" for anything else, which only a deploy knows.
func static(v any, doc map[string]any, params map[string]string) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	case map[string]any:
		name, ok := v["Ref"].(string)
		p, isParam := asMap(doc["Parameters"])[name].(map[string]any)
		if !ok || len(v) != 1 || !isParam {
			return ""
		}
		if given, ok := params[name]; ok {
			return given
		}
		return static(p["Default"], doc, params)
	}
	return ""
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }
