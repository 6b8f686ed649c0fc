package gateway

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/idemlambda/idem/internal/samtemplate"
)

// segment is one path segment of a route: a literal, a {name} parameter, or a greedy
// {name+} parameter (the last segment only).
type segment struct {
	literal string
	param   string
	greedy  bool
}

// compiledRoute is a route ready to match request paths.
type compiledRoute struct {
	samtemplate.Route
	segments  []segment
	catchAll  bool // the $default route
	literals  int  // number of literal segments, for precedence
	hasGreedy bool
}

func compile(r samtemplate.Route) (compiledRoute, error) {
	c := compiledRoute{Route: r}
	if r.Path == "$default" {
		c.catchAll = true
		return c, nil
	}
	parts := strings.Split(strings.TrimPrefix(r.Path, "/"), "/")
	for i, p := range parts {
		switch {
		case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "+}"):
			if i != len(parts)-1 {
				return c, fmt.Errorf("gateway: route %s: a greedy parameter must be the last segment", r.Key())
			}
			c.segments = append(c.segments, segment{param: p[1 : len(p)-2], greedy: true})
			c.hasGreedy = true
		case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}"):
			c.segments = append(c.segments, segment{param: p[1 : len(p)-1]})
		case strings.ContainsAny(p, "{}"):
			return c, fmt.Errorf("gateway: route %s: segment %q mixes text and a parameter", r.Key(), p)
		default:
			c.segments = append(c.segments, segment{literal: p})
			c.literals++
		}
	}
	return c, nil
}

// match reports whether the route serves method on the escaped path, and the values of its
// path parameters (decoded, as the gateway passes them).
func (c compiledRoute) match(method, escapedPath string) (map[string]string, bool) {
	if c.Method != "ANY" && c.Method != method {
		return nil, false
	}
	if c.catchAll {
		return nil, true
	}
	parts := strings.Split(strings.TrimPrefix(escapedPath, "/"), "/")
	var params map[string]string
	set := func(name, escaped string) bool {
		v, err := url.PathUnescape(escaped)
		if err != nil || v == "" {
			return false
		}
		if params == nil {
			params = map[string]string{}
		}
		params[name] = v
		return true
	}
	for i, s := range c.segments {
		if s.greedy {
			return params, i < len(parts) && set(s.param, strings.Join(parts[i:], "/"))
		}
		if i >= len(parts) {
			return nil, false
		}
		if s.param != "" {
			if !set(s.param, parts[i]) {
				return nil, false
			}
			continue
		}
		if v, err := url.PathUnescape(parts[i]); err != nil || v != s.literal {
			return nil, false
		}
	}
	return params, len(parts) == len(c.segments)
}

// PathParameters matches the escaped path against the path of route r and returns the values
// of its parameters (nil when it has none), or false when the path does not match.
func PathParameters(r samtemplate.Route, escapedPath string) (map[string]string, bool) {
	c, err := compile(r)
	if err != nil {
		return nil, false
	}
	c.Method = "ANY"
	return c.match("", escapedPath)
}

// better reports whether c takes precedence over d when both match, as the gateway decides:
// any route before $default, routes without a greedy parameter before greedy ones, more
// literal segments before fewer, and a route's own method before ANY.
func (c compiledRoute) better(d compiledRoute) bool {
	switch {
	case c.catchAll != d.catchAll:
		return !c.catchAll
	case c.hasGreedy != d.hasGreedy:
		return !c.hasGreedy
	case c.literals != d.literals:
		return c.literals > d.literals
	default:
		return c.Method != "ANY" && d.Method == "ANY"
	}
}
