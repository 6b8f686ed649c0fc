// Package samtemplate reads what the local tools need from the SAM template: each function, the
// HTTP API routes its events declare, its timeout, memory size and static environment, with
// Globals applied, as a deploy with a given WebhookProviders creates them. The local API, the
// sample events and the Lambda-runtime tests take them from here, so none can drift from
// template.yaml.
//
// It reads what template.yaml uses, with gopkg.in/yaml.v3: resources written out or by
// Fn::ForEach loops over a CommaDelimitedList parameter (as the AWS::LanguageExtensions transform
// expands them before SAM reads the template: ${Identifier} and !Ref Identifier replaced by each
// value), HttpApi events with a Method and a Path, and the short-form !Ref and !FindInMap. A value
// is static when it is a literal, a !Ref to a parameter or a loop's identifier, or a !FindInMap of
// static values; any other (!If, !Sub, a !Ref to a resource) is known only after a deploy, and
// left out.
package samtemplate

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// The template's choice of webhook providers: a deploy creates one function per key listed in
// ProvidersParameter, each a key of the ProvidersMapping mapping; AllProviders, as the providers
// of LoadProviders, stands for every key of the mapping.
const (
	ProvidersParameter = "WebhookProviders"
	ProvidersMapping   = "WebhookProvider"
	AllProviders       = "all"
)

// RoutesPath is where the local API answers GET with Served, the webhook providers it serves:
// how the sender learns which routes a running local API serves. A deployed API answers 404.
const RoutesPath = "/_localapi/routes"

// Served is RoutesPath's answer.
type Served struct {
	Providers []string `json:"providers"` // the WEBHOOK_PROVIDER of each webhook function served, sorted
}

// DefaultTimeout is a function's timeout when neither it nor Globals sets one: 3 seconds, as
// in Lambda and SAM.
const DefaultTimeout = 3 * time.Second

// Code names the Go program a function runs: the package ./functions/<Code>.
type Code string

// The programs of this repository, each run by a function whose environment sets a variable of
// its own: WEBHOOK_PROVIDER, PAYMENTS_LEDGER, CONSUMER_CONCURRENCY. The consumer has no route:
// the queue of the sqs sink invokes it.
const (
	Webhook  Code = "webhook"
	Payments Code = "payments"
	Consumer Code = "consumer"
)

var (
	// ErrTemplate is wrapped by every error about the template's content.
	ErrTemplate = errors.New("samtemplate: unsupported template")
	// ErrUnknownProvider is wrapped by the error of LoadProviders for a provider that is not a
	// key of ProvidersMapping (the template's own rule refuses it too, at deploy).
	ErrUnknownProvider = errors.New("samtemplate: unknown webhook provider")
)

// Template is what the local tools need from a SAM template.
type Template struct {
	Path      string     // the file the template was read from
	Functions []Function // its AWS::Serverless::Function resources, sorted by LogicalID
}

// Function is one AWS::Serverless::Function of the template.
type Function struct {
	// LogicalID is the resource's name, e.g. "WebhookStripeFunction": SAM's function name in
	// local runs and the key of --env-vars files.
	LogicalID  string
	Code       Code              // the program it runs, known from its environment
	Env        map[string]string // its static variables, its own over Globals'; empty is unset
	Timeout    time.Duration     // its Timeout, else Globals', else DefaultTimeout
	MemorySize int               // its MemorySize in MB, else Globals', else 128
	Routes     []Route           // its HttpApi events, in the order of their names
}

// Route is one HttpApi event of a function.
type Route struct {
	Method   string // upper case, or "ANY"
	Path     string // with {name} parameters
	Function string // the LogicalID of the function it invokes
}

// Key returns the route key API Gateway puts in routeKey: "POST /payments".
func (r Route) Key() string { return r.Method + " " + r.Path }

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
	return t.find(func(f Function) bool { return f.LogicalID == logicalID })
}

// WebhookFunction returns the webhook function whose WEBHOOK_PROVIDER is provider, or false.
func (t *Template) WebhookFunction(provider string) (Function, bool) {
	return t.find(func(f Function) bool { return f.Code == Webhook && f.Env["WEBHOOK_PROVIDER"] == provider })
}

func (t *Template) find(match func(Function) bool) (Function, bool) {
	if i := slices.IndexFunc(t.Functions, match); i >= 0 {
		return t.Functions[i], true
	}
	return Function{}, false
}

// Load reads the SAM template at path, with every parameter at its default.
func Load(path string) (*Template, error) { return LoadProviders(path, "") }

// LoadProviders reads the SAM template at path as deployed with ProvidersParameter set to
// providers (keys of ProvidersMapping, comma-separated), every other parameter at its default.
// An empty providers keeps the parameter's default; AllProviders is every key of the mapping;
// another name is an error wrapping ErrUnknownProvider, which names the keys.
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

// document is what is read of a template.
type document struct {
	Parameters map[string]struct {
		Type    string    `yaml:"Type"`
		Default yaml.Node `yaml:"Default"`
	} `yaml:"Parameters"`
	Mappings map[string]map[string]map[string]yaml.Node `yaml:"Mappings"`
	Globals  struct {
		Function properties `yaml:"Function"`
	} `yaml:"Globals"`
	Resources yaml.Node `yaml:"Resources"`

	params map[string]string // the parameters given
}

// properties are what is read of a function's Properties, or of Globals' Function section.
type properties struct {
	Timeout     float64 `yaml:"Timeout"`
	MemorySize  int     `yaml:"MemorySize"`
	Environment struct {
		Variables map[string]yaml.Node `yaml:"Variables"`
	} `yaml:"Environment"`
	Events map[string]struct {
		Type       string `yaml:"Type"`
		Properties struct {
			Method yaml.Node `yaml:"Method"`
			Path   yaml.Node `yaml:"Path"`
		} `yaml:"Properties"`
	} `yaml:"Events"`
}

// Parse parses a SAM template held in data as LoadProviders does.
func Parse(data []byte, providers string) (*Template, error) {
	var doc document
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	doc.params = map[string]string{}
	if providers != "" {
		keys := slices.Sorted(maps.Keys(doc.Mappings[ProvidersMapping]))
		if strings.TrimSpace(providers) == AllProviders {
			providers = strings.Join(keys, ",")
		}
		for k := range strings.SplitSeq(providers, ",") {
			if !slices.Contains(keys, strings.TrimSpace(k)) {
				return nil, fmt.Errorf("%w %q in %s (one of %s, or %s)", ErrUnknownProvider, strings.TrimSpace(k), ProvidersParameter, strings.Join(keys, ", "), AllProviders)
			}
		}
		doc.params[ProvidersParameter] = providers
	}
	t := &Template{}
	if err := doc.resources(t, &doc.Resources, nil); err != nil {
		return nil, err
	}
	slices.SortFunc(t.Functions, func(a, b Function) int { return cmp.Compare(a.LogicalID, b.LogicalID) })
	return t, nil
}

// resources adds to t the functions of the mapping node m, a section of resources, in which
// the loop variables of scope have their values.
func (doc *document) resources(t *Template, m *yaml.Node, scope map[string]string) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		id, r := substitute(m.Content[i].Value, scope), m.Content[i+1]
		if !strings.HasPrefix(id, "Fn::ForEach::") {
			if err := doc.function(t, id, r, scope); err != nil {
				return err
			}
			continue
		}
		if len(r.Content) != 3 || r.Content[1].Tag != "!Ref" || doc.Parameters[r.Content[1].Value].Type != "CommaDelimitedList" {
			return fmt.Errorf("%w: %s must be [Identifier, !Ref <CommaDelimitedList parameter>, {OutputKey: OutputValue}]", ErrTemplate, id)
		}
		list, _ := doc.value(r.Content[1], scope) // a parameter's value is a literal
		for v := range strings.SplitSeq(list, ",") {
			inner := maps.Collect(maps.All(scope))
			inner[r.Content[0].Value] = strings.TrimSpace(v)
			if err := doc.resources(t, r.Content[2], inner); err != nil {
				return fmt.Errorf("%s (%s=%s): %w", id, r.Content[0].Value, strings.TrimSpace(v), err)
			}
		}
	}
	return nil
}

// function adds the resource r called id to t if it is an AWS::Serverless::Function.
func (doc *document) function(t *Template, id string, r *yaml.Node, scope map[string]string) error {
	var res struct {
		Type       string     `yaml:"Type"`
		Properties properties `yaml:"Properties"`
	}
	err := r.Decode(&res)
	if res.Type != "AWS::Serverless::Function" {
		return nil // another resource: nothing of it is read
	} else if err != nil {
		return fmt.Errorf("%w: function %s: %v", ErrTemplate, id, err)
	}
	props := res.Properties
	f := Function{LogicalID: id, Env: map[string]string{}, Timeout: DefaultTimeout, MemorySize: 128}
	for _, p := range []properties{doc.Globals.Function, props} {
		for k, v := range p.Environment.Variables {
			s, err := doc.value(&v, scope)
			if err != nil {
				return fmt.Errorf("function %s: %s: %w", id, k, err)
			}
			f.Env[k] = s
			if s == "" { // unset, or known only after a deploy
				delete(f.Env, k)
			}
		}
		if p.Timeout > 0 {
			f.Timeout = time.Duration(p.Timeout * float64(time.Second))
		}
		f.MemorySize = cmp.Or(p.MemorySize, f.MemorySize)
	}
	switch {
	case f.Env["WEBHOOK_PROVIDER"] != "":
		f.Code = Webhook
	case f.Env["PAYMENTS_LEDGER"] != "":
		f.Code = Payments
	case f.Env["CONSUMER_CONCURRENCY"] != "":
		f.Code = Consumer
	default:
		return fmt.Errorf("%w: function %s: no WEBHOOK_PROVIDER, PAYMENTS_LEDGER or CONSUMER_CONCURRENCY in its environment, so which program it runs is unknown", ErrTemplate, id)
	}
	if f.Routes, err = doc.routes(id, props, scope); err != nil {
		return err
	}
	t.Functions = append(t.Functions, f)
	return nil
}

// routes returns the routes of the HttpApi events of function id, in the order of their names.
func (doc *document) routes(id string, props properties, scope map[string]string) ([]Route, error) {
	var out []Route
	for _, name := range slices.Sorted(maps.Keys(props.Events)) {
		ev := props.Events[name]
		if ev.Type != "HttpApi" {
			continue // not an HTTP API route (SQS, Schedule, ...)
		}
		method, err1 := doc.value(&ev.Properties.Method, scope)
		path, err2 := doc.value(&ev.Properties.Path, scope)
		if err := cmp.Or(err1, err2); err != nil {
			return nil, fmt.Errorf("function %s event %s: %w", id, name, err)
		} else if method == "" || path == "" {
			return nil, fmt.Errorf("%w: function %s event %s: an HttpApi event without Method and Path", ErrTemplate, id, name)
		}
		out = append(out, Route{Method: strings.ToUpper(method), Path: path, Function: id})
	}
	return out, nil
}

// value returns the static value of n (see the package documentation), or "" when n is absent
// or known only after a deploy.
func (doc *document) value(n *yaml.Node, scope map[string]string) (string, error) {
	switch n.Tag {
	case "!!str", "!!int", "!!float", "!!bool":
		return substitute(n.Value, scope), nil
	case "!Ref":
		p, isParam := doc.Parameters[n.Value]
		if v, ok := scope[n.Value]; ok || !isParam {
			return v, nil
		}
		if v, ok := doc.params[n.Value]; ok {
			return v, nil
		}
		return doc.value(&p.Default, nil)
	case "!FindInMap":
		var keys [3]string
		for i := range keys {
			if len(n.Content) != 3 {
				return "", fmt.Errorf("%w: !FindInMap takes 3 arguments", ErrTemplate)
			}
			keys[i], _ = doc.value(n.Content[i], scope)
		}
		v, ok := doc.Mappings[keys[0]][keys[1]][keys[2]]
		if !ok {
			return "", fmt.Errorf("%w: !FindInMap %q: no such key in the template's Mappings", ErrTemplate, keys)
		}
		return doc.value(&v, nil)
	}
	return "", nil
}

// substitute replaces each loop identifier of scope written ${Identifier} in s by its value.
func substitute(s string, scope map[string]string) string {
	for id, v := range scope {
		s = strings.ReplaceAll(s, "${"+id+"}", v)
	}
	return s
}
