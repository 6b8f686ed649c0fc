package deploytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/obs"
	"github.com/idemlambda/idem/pkg/idem"
)

// emitted is what the functions' request lines make CloudWatch record: the EMF namespace, its
// metrics and its one dimension set, read from a line obs.LogRequest writes, and every member a
// request line or the guard's warn line (obs.GuardObserver) can hold.
type emitted struct {
	namespace  string
	metrics    []string
	dimensions []string
	fields     []string // members of the functions' log lines
}

func functionsEmit(t *testing.T) emitted {
	t.Helper()
	var buf bytes.Buffer
	l := obs.NewLogger(&buf, slog.LevelDebug, "fn")
	obs.LogRequest(context.Background(), l, obs.Request{Provider: "stripe", Outcome: obs.OutcomeError, ID: "evt_1",
		DeliveryID: "d1", Status: 503, Duration: time.Millisecond, RoundTrips: 1, Reason: "store_unavailable", Err: errors.New("x")})
	obs.GuardObserver(l)(idem.Observation{Key: idem.Key{Scope: "stripe", ID: "evt_1"}, Fence: 7, Err: errors.New("x"),
		Outcome: idem.Outcome{Kind: idem.NotStored, Ran: true}})
	var e emitted
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		for k := range m {
			if !slices.Contains(e.fields, k) {
				e.fields = append(e.fields, k)
			}
		}
		if raw, ok := m["_aws"]; ok {
			var doc struct {
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name string }
				}
			}
			if err := json.Unmarshal(raw, &doc); err != nil || len(doc.CloudWatchMetrics) != 1 || len(doc.CloudWatchMetrics[0].Dimensions) != 1 {
				t.Fatalf("request line's EMF member %s: %v", raw, err)
			}
			d := doc.CloudWatchMetrics[0]
			e.namespace, e.dimensions = d.Namespace, d.Dimensions[0]
			for _, m := range d.Metrics {
				e.metrics = append(e.metrics, m.Name)
			}
		}
	}
	if e.namespace == "" || !slices.Contains(e.fields, "scope") {
		t.Fatalf("the request line and the guard's line were not both written: %s", buf.Bytes())
	}
	return e
}

// awsMetrics are the metrics of AWS services the alarms of s watch, by namespace and name, with
// their dimensions: the only ones the dashboard may name besides the functions' own.
func awsMetrics(s *stack) map[string][]string {
	out := map[string][]string{}
	for _, name := range s.ofType("AWS::CloudWatch::Alarm") {
		p := props(s.Resources[name])
		ns, _ := p["Namespace"].(string)
		metric, _ := p["MetricName"].(string)
		if !strings.HasPrefix(ns, "AWS/") {
			continue
		}
		key := ns + " " + metric
		for _, d := range asList(p["Dimensions"]) {
			out[key] = append(out[key], jsonString(get(d, "Name")))
		}
		if _, ok := out[key]; !ok {
			out[key] = nil
		}
	}
	return out
}

// dashboardBody is the dashboard's JSON with every ${...} of its Fn::Sub replaced by a
// placeholder naming it, decoded.
func dashboardBody(t *testing.T, s *stack) map[string]any {
	t.Helper()
	r, ok := s.Resources["Dashboard"]
	if !ok {
		t.Fatal("no Dashboard resource")
	}
	sub, ok := get(props(r), "DashboardBody", "Fn::Sub").([]any)
	if !ok {
		t.Fatalf("DashboardBody is not a Fn::Sub [body, variables]: %v", props(r)["DashboardBody"])
	}
	body := regexp.MustCompile(`\$\{([^}]+)\}`).ReplaceAllString(sub[0].(string), "VAR_$1")
	var out map[string]any
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("the dashboard body is not JSON: %v\n%s", err, body)
	}
	return out
}

// searchRe takes a SEARCH expression apart: its schema's namespace and dimensions, then its terms.
var searchRe = regexp.MustCompile(`SEARCH\('\{([^}]*)\}([^']*)',\s*'([^']+)'`)

// The dashboard names only metrics that are emitted: the functions' EMF metrics in their
// namespace, under their dimension set, for outcomes that exist, and found by the stack's name
// (so each webhook function of Fn::ForEach is on it); and the AWS metrics the alarms watch.
func TestTheDashboardShowsOnlyMetricsTheFunctionsEmit(t *testing.T) {
	e := functionsEmit(t)
	outcomes := []string{obs.OutcomeExecuted, obs.OutcomeHandshake, obs.OutcomeReplayed, obs.OutcomeInProgress,
		obs.OutcomeMismatch, obs.OutcomeRejected, obs.OutcomeError}
	// The default stack has every alarm on an AWS service (the queue's, the created cache's).
	aws := awsMetrics(deploy(t, nil))
	forEachSet(t, func(t *testing.T, s *stack) {
		var shown []string
		for _, w := range asList(dashboardBody(t, s)["widgets"]) {
			for _, m := range asList(get(w, "properties", "metrics")) {
				row := asList(m)
				if len(row) == 0 {
					t.Fatalf("empty metric row in %v", w)
				}
				if expr, ok := get(row[0], "expression").(string); ok {
					shown = append(shown, checkExpression(t, e, outcomes, expr)...)
					continue
				}
				ns, metric := jsonString(row[0]), jsonString(row[1])
				dims, ok := aws[ns+" "+metric]
				if !ok {
					t.Errorf("the dashboard shows %s %s, which no alarm of the stack watches", ns, metric)
				}
				for i := 2; i+1 < len(row); i += 2 {
					if name, ok := row[i].(string); ok && !slices.Contains(dims, name) {
						t.Errorf("%s %s by dimension %s, which its alarm does not use (%v)", ns, metric, name, dims)
					}
				}
				shown = append(shown, ns+" "+metric)
			}
		}
		for _, want := range []string{"Idem requests", "Idem duration_ms", "Idem redis_round_trips", "AWS/ApiGateway 5xx",
			"AWS/SQS ApproximateNumberOfMessagesVisible", "AWS/ElastiCache Evictions"} {
			if !slices.Contains(shown, want) {
				t.Errorf("the dashboard does not show %s", want)
			}
		}
	})
	if _, ok := deploy(t, map[string]string{"CreateDashboard": "false"}).Resources["Dashboard"]; ok {
		t.Error("CreateDashboard=false still creates the dashboard")
	}
}

// checkExpression checks a metric-math expression; a SEARCH must be for an emitted metric.
// It returns the metrics it searches for.
func checkExpression(t *testing.T, e emitted, outcomes []string, expr string) []string {
	t.Helper()
	var shown []string
	for _, m := range searchRe.FindAllStringSubmatch(expr, -1) {
		schema := strings.Split(m[1], ",")
		if schema[0] != e.namespace || !slices.Equal(schema[1:], e.dimensions) {
			t.Errorf("%s: schema {%s}, the functions emit {%s,%s}", expr, m[1], e.namespace, strings.Join(e.dimensions, ","))
		}
		metric := regexp.MustCompile(`MetricName="([^"]+)"`).FindStringSubmatch(m[2])
		if metric == nil || !slices.Contains(e.metrics, metric[1]) {
			t.Errorf("%s: searches for metric %v, the functions emit %v", expr, metric, e.metrics)
			continue
		}
		if !strings.Contains(m[2], "function=VAR_AWS::StackName") {
			t.Errorf("%s: does not find the stack's functions by its name", expr)
		}
		for _, o := range regexp.MustCompile(`outcome="([^"]+)"`).FindAllStringSubmatch(m[2], -1) {
			if !slices.Contains(outcomes, o[1]) {
				t.Errorf("%s: outcome %q is not one the functions log", expr, o[1])
			}
		}
		shown = append(shown, e.namespace+" "+metric[1])
	}
	if strings.Contains(expr, "SEARCH(") && shown == nil {
		t.Errorf("%s: a SEARCH this test cannot read", expr)
	}
	return shown
}

// insightsWords are the Logs Insights commands, operators and functions the queries use.
var insightsWords = []string{"fields", "filter", "sort", "asc", "desc", "limit", "stats", "by", "as", "and", "or",
	"not", "in", "like", "count", "bin", "SOURCE"}

// queryFields returns the log fields a Logs Insights query reads: its words, less string and
// regex literals, commands, functions, the names that "as" gives, and numbers.
func queryFields(q string) []string {
	q = regexp.MustCompile(`"[^"]*"|'[^']*'|/[^/\s]*/`).ReplaceAllString(q, " ")
	var aliases []string
	for _, m := range regexp.MustCompile(`\bas\s+(\w+)`).FindAllStringSubmatch(q, -1) {
		aliases = append(aliases, m[1])
	}
	q = regexp.MustCompile(`\bas\s+\w+`).ReplaceAllString(q, " ")
	q = regexp.MustCompile(`\w+\(`).ReplaceAllString(q, " (")
	var out []string
	for _, m := range regexp.MustCompile(`(?:^|[^\w@])(@?[A-Za-z_]\w*)`).FindAllStringSubmatch(q, -1) {
		w := m[1]
		if !slices.Contains(insightsWords, w) && !slices.Contains(aliases, w) && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// accessLogFields are the members of the API's access log lines (its Format).
func accessLogFields(t *testing.T, s *stack) []string {
	t.Helper()
	format, _ := get(props(s.Resources["HttpApi"]), "AccessLogSettings", "Format").(string)
	var m map[string]any
	if err := json.Unmarshal([]byte(format), &m); err != nil {
		t.Fatalf("access log format: %v", err)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Every saved query, and the dashboard's log widget, reads only fields its log groups' lines
// hold: the functions' request and guard lines, or the API's access log.
func TestTheSavedQueriesReadLoggedFields(t *testing.T) {
	functions := append(functionsEmit(t).fields, insightsBuiltins...)
	forEachSet(t, func(t *testing.T, s *stack) {
		access := append(accessLogFields(t, s), insightsBuiltins...)
		queries := s.ofType("AWS::Logs::QueryDefinition")
		if len(queries) < 4 {
			t.Errorf("%d saved queries, want at least 4", len(queries))
		}
		for _, name := range queries {
			p := props(s.Resources[name])
			groups := asList(p["LogGroupNames"])
			if len(groups) == 0 {
				t.Errorf("%s names no log group", name)
			}
			fields := functions
			if slices.ContainsFunc(groups, func(g any) bool { return isRef(g, "ApiAccessLogGroup") }) {
				if len(groups) > 1 {
					t.Errorf("%s mixes the access log with other groups", name)
				}
				fields = access
			}
			checkQueryFields(t, name, jsonString(p["QueryString"]), fields)
		}
		for _, w := range asList(dashboardBody(t, s)["widgets"]) {
			if q, ok := get(w, "properties", "query").(string); ok {
				if !strings.HasPrefix(q, "SOURCE 'VAR_AccessLogGroup' |") {
					t.Errorf("log widget %q does not read the access log", q)
				}
				checkQueryFields(t, "the dashboard's log widget", q, access)
			}
		}
		checkEveryProviderHasItsQueries(t, s)
	})
}

// insightsBuiltins are the fields Logs Insights adds to every line.
var insightsBuiltins = []string{"@timestamp", "@message", "@logStream", "@log"}

// checkQueryFields checks that query q reads some fields, and only fields among fields.
func checkQueryFields(t *testing.T, name, q string, fields []string) {
	t.Helper()
	got := queryFields(q)
	if len(got) == 0 {
		t.Errorf("%s: no field found in %q", name, q)
	}
	for _, f := range got {
		if !slices.Contains(fields, f) {
			t.Errorf("%s reads %s, which its log lines do not hold (%v)", name, f, fields)
		}
	}
}

// checkEveryProviderHasItsQueries checks that each webhook function of Fn::ForEach has its
// saved queries.
func checkEveryProviderHasItsQueries(t *testing.T, s *stack) {
	t.Helper()
	for key := range s.Resources {
		fn, ok := strings.CutSuffix(key, "Function")
		if !ok || !strings.HasPrefix(fn, "Webhook") {
			continue
		}
		for _, q := range []string{"EventQuery", "FailedQuery", "NotStoredQuery"} {
			if _, ok := s.Resources[fn+q]; !ok {
				t.Errorf("%s has no %s", key, fn+q)
			}
		}
	}
}

// The query parser finds what a query reads, and only that.
func TestQueryFieldsFindsWhatAQueryReads(t *testing.T) {
	got := queryFields(`fields @timestamp, id | filter status = "409" or status like /^5/ and x >= 500 | stats count(*) as n by bin(5m), routeKey | sort n desc`)
	want := []string{"@timestamp", "id", "status", "x", "routeKey"}
	if !slices.Equal(got, want) {
		t.Errorf("queryFields = %v, want %v", got, want)
	}
}

// cwTokens splits s into the tokens CloudWatch's metric search matches, as its documentation
// describes them (search-expression-syntax, "Tokenization"): non-alphanumeric characters
// delimit, and a capital after a lower-case letter, a capital followed by a lower-case letter
// after capitals (SDBFailure: sdb, failure) and a digit after a letter start a new token. All
// tokens are lower case.
func cwTokens(s string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = nil
		}
	}
	rs := []rune(s)
	for i, r := range rs {
		if !isAlnum(r) {
			flush()
			continue
		}
		next := rune(0)
		if i+1 < len(rs) {
			next = rs[i+1]
		}
		if len(cur) > 0 && startsToken(cur[len(cur)-1], r, next) {
			flush()
		}
		cur = append(cur, r)
	}
	flush()
	return out
}

func isAlnum(r rune) bool { return isLower(r) || isUpper(r) || isDigit(r) }
func isLower(r rune) bool { return r >= 'a' && r <= 'z' }
func isUpper(r rune) bool { return r >= 'A' && r <= 'Z' }
func isDigit(r rune) bool { return r >= '0' && r <= '9' }

// startsToken reports whether r, after prev and before next, begins a new token.
func startsToken(prev, r, next rune) bool {
	if isDigit(r) {
		return !isDigit(prev)
	}
	return isUpper(r) && (isLower(prev) || isDigit(prev) || isUpper(prev) && isLower(next))
}

// searchFinds reports whether a partial-match search term finds value: the term's tokens
// appear in value's tokens, consecutively (a composite token).
func searchFinds(term, value string) bool {
	want, have := cwTokens(term), cwTokens(value)
	for i := 0; i+len(want) <= len(have); i++ {
		if slices.Equal(have[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// The tokenizer splits as CloudWatch's documentation shows.
func TestCloudWatchTokens(t *testing.T) {
	for s, want := range map[string][]string{
		"CustomCount1":      {"custom", "count", "1"},
		"SDBFailure":        {"sdb", "failure"},
		"Project2-trial333": {"project", "2", "trial", "333"},
	} {
		if got := cwTokens(s); !slices.Equal(got, want) {
			t.Errorf("cwTokens(%q) = %v, want %v", s, got, want)
		}
	}
}

// The dashboard's searches (function=<stack name>) find every function of the stack under the
// name CloudFormation gives it, <stack>-<logical ID>-<suffix>, each webhook function of
// Fn::ForEach included, and none of a stack whose name only starts alike.
func TestTheDashboardFindsEveryFunctionOfItsStack(t *testing.T) {
	s := deploy(t, map[string]string{"WebhookProviders": allProviders})
	var functions []string
	for name, r := range s.Resources {
		if r["Type"] == "AWS::Serverless::Function" {
			functions = append(functions, name)
		}
	}
	if len(functions) < 25 {
		t.Fatalf("%d functions with every provider", len(functions))
	}
	for _, stackName := range []string{"idem-dev", "idem-prod", "shop", "Payments2"} {
		for _, fn := range functions {
			deployed := stackName + "-" + fn + "-1A2B3C4D5E6F"
			if !searchFinds(stackName, deployed) {
				t.Errorf("function=%s does not find %s", stackName, deployed)
			}
			if other := stackName + "x-" + fn + "-1A2B3C4D5E6F"; searchFinds(stackName, other) {
				t.Errorf("function=%s finds %s, another stack's", stackName, other)
			}
		}
	}
}
