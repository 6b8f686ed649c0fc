package deploytest

// The AWS::LanguageExtensions transform as far as these checks of the deployed template need it:
// every loop of every section, Fn::FindInMap resolved. The local tools read the functions with
// less (internal/samtemplate).

import (
	"errors"
	"fmt"
	stdmaps "maps"
	"slices"
	"strings"
)

// errTemplate is wrapped by every error about what the template holds.
var errTemplate = errors.New("unsupported template")

// forEachPrefix starts the key of every loop: Fn::ForEach::<LoopLogicalName>.
const forEachPrefix = "Fn::ForEach::"

// applyLanguageExtensions does to doc (a template as JSON values, intrinsic functions in their
// long form) what the AWS::LanguageExtensions transform does before SAM reads it, as far as
// template.yaml needs: it expands every Fn::ForEach of the Conditions, Resources and Outputs
// sections, and resolves every Fn::FindInMap whose arguments are then literal strings.
//
// A loop is [Identifier, Collection, {OutputKey: OutputValue}]; the collection is a list of
// strings or a Ref to a CommaDelimitedList parameter, whose value comes from params, else its
// Default, each member trimmed of spaces. ${Identifier} in keys and strings becomes the value,
// and a Ref to the identifier the value itself. Loops may nest. A key written twice, a malformed
// loop and a Fn::FindInMap of a key its mapping lacks are errors wrapping errTemplate.
func applyLanguageExtensions(doc map[string]any, params map[string]string) error {
	x := expander{params: params, parameters: asMap(doc["Parameters"]), mappings: asMap(doc["Mappings"])}
	for _, section := range []string{"Conditions", "Resources", "Outputs"} {
		if m, ok := doc[section].(map[string]any); ok {
			out, err := x.expand(m, nil)
			if err != nil {
				return fmt.Errorf("%s: %w", section, err)
			}
			doc[section] = out
		}
	}
	return nil
}

type expander struct {
	params               map[string]string
	parameters, mappings map[string]any // the template's sections
}

// expand returns v with the loops it holds written out, the loop variables of scope substituted,
// and its Fn::FindInMap of literal keys resolved.
func (x expander) expand(v any, scope map[string]string) (any, error) {
	switch v := v.(type) {
	case string:
		for id, value := range scope {
			v = strings.ReplaceAll(v, "${"+id+"}", value)
		}
		return v, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			var err error
			if out[i], err = x.expand(e, scope); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		if value, ok := scope[asString(v["Ref"])]; ok && len(v) == 1 {
			return value, nil
		}
		out := map[string]any{}
		// Sorted, so that the error for a template with several faults is always the same.
		for _, k := range slices.Sorted(stdmaps.Keys(v)) {
			if err := x.entry(out, k, v[k], scope); err != nil {
				return nil, err
			}
		}
		return x.findInMap(out)
	}
	return v, nil
}

// entry writes to out what the entry k: v of a map expands to: a loop's output, or one entry.
func (x expander) entry(out map[string]any, k string, v any, scope map[string]string) error {
	put := func(k string, v any) error {
		if _, dup := out[k]; dup {
			return fmt.Errorf("%w: key %s is written twice (by two loops, or a loop and another entry)", errTemplate, k)
		}
		out[k] = v
		return nil
	}
	if !strings.HasPrefix(k, forEachPrefix) {
		e, err := x.expand(v, scope)
		if err != nil {
			return err
		}
		k, _ := x.expand(k, scope)
		return put(k.(string), e)
	}
	args, _ := v.([]any)
	if len(args) != 3 || asString(args[0]) == "" || asMap(args[2]) == nil {
		return fmt.Errorf("%w: %s must be [Identifier, Collection, {OutputKey: OutputValue}]", errTemplate, k)
	}
	values, err := x.collection(k, args[1], scope)
	if err != nil {
		return err
	}
	for _, value := range values {
		inner := stdmaps.Clone(scope)
		if inner == nil {
			inner = map[string]string{}
		}
		inner[args[0].(string)] = value
		got, err := x.expand(args[2], inner)
		if err != nil {
			return fmt.Errorf("%s (%s=%s): %w", k, args[0], value, err)
		}
		for _, gk := range slices.Sorted(stdmaps.Keys(asMap(got))) {
			if err := put(gk, asMap(got)[gk]); err != nil {
				return err
			}
		}
	}
	return nil
}

// collection returns the values the loop called name iterates over.
func (x expander) collection(name string, c any, scope map[string]string) ([]string, error) {
	var raw []any
	if list, ok := c.([]any); ok {
		raw = list
	} else if p := asMap(x.parameters[asString(asMap(c)["Ref"])]); p["Type"] == "CommaDelimitedList" {
		value, given := x.params[asString(asMap(c)["Ref"])]
		if !given {
			value = asString(p["Default"])
		}
		for v := range strings.SplitSeq(value, ",") {
			raw = append(raw, strings.TrimSpace(v))
		}
	} else {
		return nil, fmt.Errorf("%w: %s: the collection must be a list of strings or a Ref to a CommaDelimitedList parameter", errTemplate, name)
	}
	values := make([]string, len(raw))
	for i, e := range raw {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("%w: %s: collection member %v is not a string", errTemplate, name, e)
		}
		v, _ := x.expand(s, scope)
		values[i] = v.(string)
	}
	return values, nil
}

// findInMap returns the value a Fn::FindInMap of three literal strings names, or m as it is.
func (x expander) findInMap(m map[string]any) (any, error) {
	args, _ := m["Fn::FindInMap"].([]any)
	if len(m) != 1 || len(args) != 3 || slices.ContainsFunc(args, func(a any) bool { _, ok := a.(string); return !ok }) {
		return m, nil
	}
	v, ok := asMap(asMap(x.mappings[args[0].(string)])[args[1].(string)])[args[2].(string)]
	if !ok {
		return nil, fmt.Errorf("%w: Fn::FindInMap %v: no such key in the template's Mappings", errTemplate, args)
	}
	return v, nil
}

func asString(v any) string { s, _ := v.(string); return s }

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }
