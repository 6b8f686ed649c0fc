package samtemplate

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// LanguageExtensions is the transform that gives a template Fn::ForEach. CloudFormation applies
// the template's transforms in the order listed, so it comes before AWS::Serverless-2016-10-31
// and SAM only ever sees the expanded template.
const LanguageExtensions = "AWS::LanguageExtensions"

// forEachPrefix starts the key of every loop: Fn::ForEach::<LoopLogicalName>.
const forEachPrefix = "Fn::ForEach::"

// ApplyLanguageExtensions does to doc (a template as JSON values, intrinsic functions in their
// long form) what the AWS::LanguageExtensions transform does before SAM reads it, as far as the
// local tools need: it expands every Fn::ForEach of the Conditions, Resources and Outputs
// sections, in resource properties too, and then resolves every Fn::FindInMap whose three
// arguments are literal strings. Loops over a Ref take the parameter's value from params, else
// its Default; a CommaDelimitedList's members are trimmed of spaces, as CloudFormation does.
//
// The rules followed are those of
// https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/intrinsic-function-reference-foreach.html:
// a loop is [Identifier, Collection, {OutputKey: OutputValue}]; the collection is a list of
// strings or a Ref to a CommaDelimitedList parameter; ${Identifier} in keys and strings becomes
// the value, &{Identifier} the value without its non-alphanumeric characters, and a Ref to the
// identifier the value itself. Loops may nest. Two loops that write the same key, or a loop
// that writes a key the section already has, are an error wrapping ErrTemplate, as are a loop
// in a template without the transform and a Fn::FindInMap whose key is not in its mapping.
func ApplyLanguageExtensions(doc map[string]any, params map[string]string) error {
	if !hasTransform(doc["Transform"], LanguageExtensions) {
		if containsForEach(doc) {
			return fmt.Errorf("%w: Fn::ForEach needs the %s transform", ErrTemplate, LanguageExtensions)
		}
		return nil
	}
	x := expander{params: params, parameters: asMap(doc["Parameters"])}
	for _, section := range []string{"Conditions", "Resources", "Outputs"} {
		m, ok := doc[section].(map[string]any)
		if !ok {
			continue
		}
		out, err := x.expandMap(m, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", section, err)
		}
		doc[section] = out
	}
	mappings := asMap(doc["Mappings"])
	for _, section := range []string{"Conditions", "Resources", "Outputs"} {
		if m, ok := doc[section]; ok {
			v, err := findInMaps(m, mappings)
			if err != nil {
				return fmt.Errorf("%s: %w", section, err)
			}
			doc[section] = v
		}
	}
	return nil
}

func hasTransform(t any, name string) bool {
	switch t := t.(type) {
	case string:
		return t == name
	case []any:
		for _, e := range t {
			if e == name {
				return true
			}
		}
	}
	return false
}

func containsForEach(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if strings.HasPrefix(k, forEachPrefix) || containsForEach(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if containsForEach(e) {
				return true
			}
		}
	}
	return false
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

// binding is one loop variable in scope: its identifier and its current value.
type binding struct{ id, value string }

type expander struct {
	params     map[string]string
	parameters map[string]any // the template's Parameters section
}

// expandMap returns m with the bindings substituted in its keys and values, and each of its
// loops replaced by what it writes.
func (x expander) expandMap(m map[string]any, scope []binding) (map[string]any, error) {
	out := map[string]any{}
	put := func(k string, v any) error {
		if _, dup := out[k]; dup {
			return fmt.Errorf("%w: key %s is written twice (by a Fn::ForEach and another entry, or by two loops)", ErrTemplate, k)
		}
		out[k] = v
		return nil
	}
	// Sorted, so that the error for a template with several faults is always the same.
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !strings.HasPrefix(k, forEachPrefix) {
			v, err := x.expand(m[k], scope)
			if err != nil {
				return nil, err
			}
			if err := put(substitute(k, scope), v); err != nil {
				return nil, err
			}
			continue
		}
		loop, err := x.loop(k, m[k], scope)
		if err != nil {
			return nil, err
		}
		for _, lk := range slices.Sorted(maps.Keys(loop)) {
			if err := put(lk, loop[lk]); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// loop expands the loop called name, whose declaration is decl.
func (x expander) loop(name string, decl any, scope []binding) (map[string]any, error) {
	args, ok := decl.([]any)
	if !ok || len(args) != 3 {
		return nil, fmt.Errorf("%w: %s must be [Identifier, Collection, {OutputKey: OutputValue}]", ErrTemplate, name)
	}
	id, _ := args[0].(string)
	fragment, _ := args[2].(map[string]any)
	if id == "" || fragment == nil {
		return nil, fmt.Errorf("%w: %s must be [Identifier, Collection, {OutputKey: OutputValue}]", ErrTemplate, name)
	}
	values, err := x.collection(name, args[1], scope)
	if err != nil {
		return nil, err
	}
	for k := range fragment {
		if !strings.HasPrefix(k, forEachPrefix) && !strings.Contains(k, "${"+id+"}") && !strings.Contains(k, "&{"+id+"}") {
			return nil, fmt.Errorf("%w: %s: output key %s does not use ${%s} or &{%s}", ErrTemplate, name, k, id, id)
		}
	}
	out := map[string]any{}
	for _, v := range values {
		got, err := x.expandMap(fragment, append(slices.Clone(scope), binding{id, v}))
		if err != nil {
			return nil, fmt.Errorf("%s (%s=%s): %w", name, id, v, err)
		}
		for k, e := range got {
			if _, dup := out[k]; dup {
				return nil, fmt.Errorf("%w: %s writes %s twice (is a value repeated in its collection?)", ErrTemplate, name, k)
			}
			out[k] = e
		}
	}
	return out, nil
}

// collection returns the values a loop iterates over.
func (x expander) collection(name string, c any, scope []binding) ([]string, error) {
	switch c := c.(type) {
	case []any:
		var values []string
		for _, e := range c {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("%w: %s: collection member %v is not a string", ErrTemplate, name, e)
			}
			values = append(values, substitute(s, scope))
		}
		return values, nil
	case map[string]any:
		ref, ok := c["Ref"].(string)
		if !ok || len(c) != 1 {
			break
		}
		p, ok := x.parameters[ref].(map[string]any)
		if !ok || p["Type"] != "CommaDelimitedList" {
			return nil, fmt.Errorf("%w: %s: collection Ref %s is not a CommaDelimitedList parameter", ErrTemplate, name, ref)
		}
		raw, given := x.params[ref]
		if !given {
			raw, _ = p["Default"].(string)
		}
		var values []string
		for _, v := range strings.Split(raw, ",") {
			values = append(values, strings.TrimSpace(v))
		}
		return values, nil
	}
	return nil, fmt.Errorf("%w: %s: the collection must be a list of strings or a Ref to a CommaDelimitedList parameter", ErrTemplate, name)
}

// expand substitutes the bindings in v and expands the loops it holds.
func (x expander) expand(v any, scope []binding) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["Ref"].(string); ok && len(v) == 1 {
			for i := len(scope) - 1; i >= 0; i-- {
				if scope[i].id == ref {
					return scope[i].value, nil
				}
			}
		}
		return x.expandMap(v, scope)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			var err error
			if out[i], err = x.expand(e, scope); err != nil {
				return nil, err
			}
		}
		return out, nil
	case string:
		return substitute(v, scope), nil
	}
	return v, nil
}

// substitute replaces ${id} by the value and &{id} by the value without its non-alphanumeric
// characters, innermost binding first.
func substitute(s string, scope []binding) string {
	for i := len(scope) - 1; i >= 0; i-- {
		b := scope[i]
		s = strings.ReplaceAll(s, "${"+b.id+"}", b.value)
		s = strings.ReplaceAll(s, "&{"+b.id+"}", alphanumeric(b.value))
	}
	return s
}

func alphanumeric(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

// findInMaps resolves every Fn::FindInMap of v whose arguments are literal strings.
func findInMaps(v any, mappings map[string]any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		if args, ok := v["Fn::FindInMap"].([]any); ok && len(v) == 1 && len(args) == 3 {
			name, ok1 := args[0].(string)
			top, ok2 := args[1].(string)
			second, ok3 := args[2].(string)
			if ok1 && ok2 && ok3 {
				val, ok := asMap(asMap(mappings[name])[top])[second]
				if !ok {
					return nil, fmt.Errorf("%w: Fn::FindInMap [%s, %s, %s]: no such key in the template's Mappings", ErrTemplate, name, top, second)
				}
				return val, nil
			}
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			r, err := findInMaps(e, mappings)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			var err error
			if out[i], err = findInMaps(e, mappings); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}
