// Package samtemplate reads what the local tools need from the SAM template: each function, the
// HTTP API routes its events declare, its timeout and its static environment, with the
// template's Globals applied. The local API server, the sample-event generator and the
// Lambda-runtime tests all take their routes and settings from here, so none of them can
// drift from template.yaml.
//
// The template is parsed with goformation, which understands SAM's HttpApi events (Method,
// Path, ApiId) and resolves intrinsic functions the way a deploy with every parameter at its
// default would. Two of its intrinsic handlers are replaced: Ref and Fn::Sub of a resource
// (as opposed to a parameter) resolve to nothing that can leak into an environment value,
// because such values only exist after a deploy; Ref of a resource is kept as its logical ID
// only where the template names an API (ApiId).
//
// goformation knows nothing of the AWS::LanguageExtensions transform, which the template uses to
// write one webhook function per provider of a parameter with Fn::ForEach: ApplyLanguageExtensions
// expands those loops first, for the parameters' defaults or for the values LoadWithParameters is
// given, so the local tools see the functions a deploy with those values would create.
package samtemplate

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/cloudformation/serverless"
	"github.com/awslabs/goformation/v7/intrinsics"
)

// prepare returns the template as JSON (short-form intrinsics in long form), as deployed with
// params: each given parameter's Default replaced by its value, then the
// AWS::LanguageExtensions transform applied (ApplyLanguageExtensions). It also drops what
// goformation's SAM specification does not know, since it refuses unknown properties, and the
// local tools have no use for it: the AccessLogSettings of the AWS::Serverless::HttpApi resources
// (which it names AccessLogSetting), and the LoggingConfig and VpcConfig.Ipv6AllowedForDualStack
// of the functions and of Globals (where their logs go, how they reach AWS over IPv6).
func prepare(data []byte, params map[string]string) ([]byte, error) {
	js, err := intrinsics.ProcessYAML(data, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, err
	}
	parameters, _ := doc["Parameters"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(params)) {
		p, ok := parameters[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: no parameter %s", ErrTemplate, name)
		}
		// goformation resolves a Ref to a parameter to its Default.
		p["Default"] = params[name]
	}
	if err := ApplyLanguageExtensions(doc, params); err != nil {
		return nil, err
	}
	resources, _ := doc["Resources"].(map[string]any)
	for _, r := range resources {
		r, ok := r.(map[string]any)
		if !ok {
			continue
		}
		props, _ := r["Properties"].(map[string]any)
		switch r["Type"] {
		case "AWS::Serverless::HttpApi":
			delete(props, "AccessLogSettings")
		case "AWS::Serverless::Function":
			dropUnknownFunctionProperties(props)
		}
	}
	if globals, ok := doc["Globals"].(map[string]any); ok {
		fn, _ := globals["Function"].(map[string]any)
		dropUnknownFunctionProperties(fn)
	}
	return json.Marshal(doc)
}

// dropUnknownFunctionProperties removes from a function's properties (or Globals' Function
// section) what goformation's SAM specification lacks: LoggingConfig and
// VpcConfig.Ipv6AllowedForDualStack. A nil props is left alone.
func dropUnknownFunctionProperties(props map[string]any) {
	if props == nil {
		return
	}
	delete(props, "LoggingConfig")
	if vpc, ok := props["VpcConfig"].(map[string]any); ok {
		delete(vpc, "Ipv6AllowedForDualStack")
	}
}

// DefaultTimeout is a function's timeout when neither it nor Globals sets one: 3 seconds, as
// in Lambda and SAM.
const DefaultTimeout = 3 * time.Second

// ImplicitAPI is the logical ID SAM gives the HTTP API it creates for HttpApi events that
// name no ApiId.
const ImplicitAPI = "ServerlessHttpApi"

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

// Template is what the local tools need from a SAM template.
type Template struct {
	// Path is the file the template was read from.
	Path string
	// Functions are the template's AWS::Serverless::Function resources, sorted by LogicalID.
	Functions []Function
	// Mappings is the template's Mappings section: mapping name, top-level key, second-level
	// key, value (a string or a list of strings).
	Mappings map[string]map[string]map[string]any
}

// Function is one AWS::Serverless::Function of the template.
type Function struct {
	// LogicalID is the resource's name in the template, e.g. "WebhookStripeFunction". SAM
	// uses it as the function name in local runs and as the key of --env-vars files.
	LogicalID string
	// Code is the program the function runs, from its environment (see Code's constants).
	Code Code
	// Env holds the function's environment variables with Globals applied, as a deploy with
	// every parameter at its default would set them, except those whose value depends on a
	// resource (an ARN, a queue URL, a cache endpoint): they are known only after a deploy
	// and left out.
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
	// Event is the event's name in the function's Events, e.g. "CreatePayment".
	Event string
	// Method is the upper-case HTTP method, or "ANY".
	Method string
	// Path is the route's path, with {name} and {name+} parameters, or "$default".
	Path string
	// API is the logical ID of the AWS::Serverless::HttpApi the route belongs to
	// (ImplicitAPI when the event names no ApiId).
	API string
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
	for _, f := range t.Functions {
		if f.LogicalID == logicalID {
			return f, true
		}
	}
	return Function{}, false
}

// WebhookFunction returns the webhook function of provider (the one whose WEBHOOK_PROVIDER
// it is), or false.
func (t *Template) WebhookFunction(provider string) (Function, bool) {
	for _, f := range t.Functions {
		if f.Code == Webhook && f.Env["WEBHOOK_PROVIDER"] == provider {
			return f, true
		}
	}
	return Function{}, false
}

// resourceMarker precedes a resource's logical ID where Ref resolved to one. It cannot occur
// in a template's own strings, so a value holding it is known to depend on a resource.
const resourceMarker = "\x00resource:"

// Load reads and parses the SAM template at path, with every parameter at its default.
func Load(path string) (*Template, error) { return LoadWithParameters(path, nil) }

// LoadWithParameters reads and parses the SAM template at path as deployed with params (by
// parameter name; a CommaDelimitedList's value comma-separated), every other parameter at its
// default. A name that is not a parameter of the template is an error wrapping ErrTemplate.
func LoadWithParameters(path string, params map[string]string) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("samtemplate: %w", err)
	}
	t, err := ParseWithParameters(data, params)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t.Path = path
	return t, nil
}

// Parse parses a SAM template held in data (YAML or JSON), with every parameter at its default.
func Parse(data []byte) (*Template, error) { return ParseWithParameters(data, nil) }

// ParseWithParameters parses a SAM template held in data (YAML or JSON) as deployed with params,
// as LoadWithParameters does.
func ParseWithParameters(data []byte, params map[string]string) (*Template, error) {
	data, err := prepare(data, params)
	if err != nil {
		if errors.Is(err, ErrTemplate) {
			return nil, err
		}
		return nil, fmt.Errorf("samtemplate: parse: %w", err)
	}
	tpl, err := goformation.ParseJSONWithOptions(data, &intrinsics.ProcessorOptions{
		IntrinsicHandlerOverrides: map[string]intrinsics.IntrinsicHandler{
			"Ref":     ref,
			"Fn::Sub": sub,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("samtemplate: parse: %w", err)
	}

	var globalEnv map[string]string
	globalTimeout, globalMemory := 0, 0
	if g, err := tpl.GetServerlessGlobalFunction(); err == nil {
		if g.Environment != nil {
			globalEnv = g.Environment.Variables
		}
		globalTimeout = deref(g.Timeout)
		globalMemory = deref(g.MemorySize)
	}

	out := &Template{}
	if len(tpl.Mappings) > 0 {
		// Through JSON: goformation holds the section as untyped values.
		js, err := json.Marshal(tpl.Mappings)
		if err == nil {
			err = json.Unmarshal(js, &out.Mappings)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: Mappings: %v", ErrTemplate, err)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(tpl.GetAllServerlessFunctionResources())) {
		fn := tpl.GetAllServerlessFunctionResources()[id]
		f := Function{
			LogicalID:  id,
			Env:        map[string]string{},
			Timeout:    DefaultTimeout,
			MemorySize: 128,
		}
		// Function variables replace global ones of the same name, as in SAM.
		var own map[string]string
		if fn.Environment != nil {
			own = fn.Environment.Variables
		}
		for _, vars := range []map[string]string{globalEnv, own} {
			for k, v := range vars {
				if v == "" || strings.Contains(v, resourceMarker) {
					delete(f.Env, k)
					continue
				}
				f.Env[k] = v
			}
		}
		if s := cmp.Or(deref(fn.Timeout), globalTimeout); s > 0 {
			f.Timeout = time.Duration(s) * time.Second
		}
		f.MemorySize = cmp.Or(deref(fn.MemorySize), globalMemory, f.MemorySize)
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
		routes, err := routesOf(tpl, id, fn)
		if err != nil {
			return nil, err
		}
		f.Routes = routes
		out.Functions = append(out.Functions, f)
	}
	if err := checkUnique(out.Routes()); err != nil {
		return nil, err
	}
	return out, nil
}

func routesOf(tpl *cloudformation.Template, id string, fn *serverless.Function) ([]Route, error) {
	var routes []Route
	for _, name := range slices.Sorted(maps.Keys(fn.Events)) {
		ev := fn.Events[name]
		switch ev.Type {
		case "HttpApi":
		case "Api":
			// A REST API event would need payload v1.0, which nothing here builds: refuse it
			// rather than serve a template that is not what gets deployed.
			return nil, fmt.Errorf("%w: function %s event %s: REST API (Type: Api) events are not supported", ErrTemplate, id, name)
		default:
			continue // not an HTTP route (SQS, Schedule, ...)
		}
		var p serverless.Function_HttpApiEvent
		if ev.Properties != nil && ev.Properties.HttpApiEvent != nil {
			p = *ev.Properties.HttpApiEvent
		}
		if v := deref(p.PayloadFormatVersion); v != "" && v != "2.0" {
			return nil, fmt.Errorf("%w: function %s event %s: PayloadFormatVersion %s (only 2.0 is served)", ErrTemplate, id, name, v)
		}
		r := Route{
			Event:    name,
			Method:   strings.ToUpper(cmp.Or(deref(p.Method), "ANY")),
			Path:     cmp.Or(deref(p.Path), "$default"),
			API:      ImplicitAPI,
			Function: id,
		}
		if a := deref(p.ApiId); a != "" {
			api, ok := strings.CutPrefix(a, resourceMarker)
			if !ok {
				return nil, fmt.Errorf("%w: function %s event %s: ApiId must be a Ref to an AWS::Serverless::HttpApi", ErrTemplate, id, name)
			}
			if _, err := tpl.GetServerlessHttpApiWithName(api); err != nil {
				return nil, fmt.Errorf("%w: function %s event %s: ApiId %s is not an AWS::Serverless::HttpApi", ErrTemplate, id, name, api)
			}
			r.API = api
		}
		if r.Path != "$default" && !strings.HasPrefix(r.Path, "/") {
			return nil, fmt.Errorf("%w: function %s event %s: path %q does not start with /", ErrTemplate, id, name, r.Path)
		}
		routes = append(routes, r)
	}
	slices.SortFunc(routes, func(a, b Route) int { return cmp.Compare(a.Key(), b.Key()) })
	return routes, nil
}

// checkUnique refuses two functions on one route of one API, which a deploy would refuse too.
func checkUnique(routes []Route) error {
	seen := map[string]string{}
	for _, r := range routes {
		k := r.API + " " + r.Key()
		if other, ok := seen[k]; ok {
			return fmt.Errorf("%w: route %s of %s is declared by %s and %s", ErrTemplate, r.Key(), r.API, other, r.Function)
		}
		seen[k] = r.Function
	}
	return nil
}

// ref resolves Ref: pseudo parameters and parameters as goformation does (parameters to
// their defaults), resources to resourceMarker followed by their logical ID.
func ref(name string, input, template any) any {
	if id, ok := input.(string); ok && isResource(id, template) {
		return resourceMarker + id
	}
	return intrinsics.Ref(name, input, template)
}

// subVariable matches a ${Name} or ${Name.Attribute} variable of Fn::Sub.
var subVariable = regexp.MustCompile(`\$\{([.:0-9A-Za-z]+)\}`)

// sub resolves Fn::Sub as goformation does, except that a string naming a resource or a
// resource attribute, which goformation would resolve to a string with a hole in it,
// resolves to nothing.
func sub(name string, input, template any) any {
	switch v := input.(type) {
	case string:
		for _, m := range subVariable.FindAllStringSubmatch(v, -1) {
			if strings.Contains(m[1], ".") || isResource(m[1], template) {
				return nil
			}
		}
	case []any:
		if len(v) == 2 {
			vars, _ := v[1].(map[string]any)
			for _, val := range vars {
				if s, ok := val.(string); !ok || strings.Contains(s, resourceMarker) {
					return nil
				}
			}
			if src, ok := v[0].(string); ok {
				for _, m := range subVariable.FindAllStringSubmatch(src, -1) {
					if _, named := vars[m[1]]; named {
						continue
					}
					if strings.Contains(m[1], ".") || isResource(m[1], template) {
						return nil
					}
				}
			}
		}
	}
	return intrinsics.FnSub(name, input, template)
}

func isResource(id string, template any) bool {
	t, _ := template.(map[string]any)
	resources, _ := t["Resources"].(map[string]any)
	_, ok := resources[id]
	return ok
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
