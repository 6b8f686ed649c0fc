package deploytest

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7/intrinsics"
)

const templatePath = "../../template.yaml"

// stack is template.yaml as deployed with some parameters: the AWS::LanguageExtensions transform
// applied (Fn::ForEach expanded, Fn::FindInMap resolved), resources whose condition holds, with
// every Fn::If resolved and every AWS::NoValue removed. Other intrinsics (Ref of a resource,
// Fn::GetAtt, Fn::Sub) are kept as written.
type stack struct {
	params    map[string]string
	raw       map[string]any
	conds     map[string]bool
	Resources map[string]map[string]any
	Outputs   map[string]map[string]any
	Globals   map[string]any
}

// noValue marks a value resolved to AWS::NoValue.
type noValue struct{}

// deploy reads the template with goformation (YAML tags to long-form intrinsics, nothing
// resolved) and resolves it for the parameters' defaults overridden by overrides.
func deploy(t *testing.T, overrides map[string]string) *stack {
	t.Helper()
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	js, err := intrinsics.ProcessYAML(data, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{params: map[string]string{}, conds: map[string]bool{}, Resources: map[string]map[string]any{}, Outputs: map[string]map[string]any{}}
	if err := json.Unmarshal(js, &s.raw); err != nil {
		t.Fatal(err)
	}
	for name, p := range s.raw["Parameters"].(map[string]any) {
		if d, ok := p.(map[string]any)["Default"]; ok {
			s.params[name] = jsonString(d)
		} else {
			s.params[name] = ""
		}
	}
	for k, v := range overrides {
		if _, ok := s.params[k]; !ok {
			t.Fatalf("no parameter %s", k)
		}
		s.params[k] = v
	}
	if err := applyLanguageExtensions(s.raw, overrides); err != nil {
		t.Fatal(err)
	}
	for name, r := range s.raw["Resources"].(map[string]any) {
		r := r.(map[string]any)
		if c, ok := r["Condition"].(string); ok && !s.cond(t, c) {
			continue
		}
		s.Resources[name] = s.resolve(t, r).(map[string]any)
	}
	for name, o := range s.raw["Outputs"].(map[string]any) {
		o := o.(map[string]any)
		if c, ok := o["Condition"].(string); ok && !s.cond(t, c) {
			continue
		}
		s.Outputs[name] = s.resolve(t, o).(map[string]any)
	}
	s.Globals = s.resolve(t, s.raw["Globals"]).(map[string]any)
	return s
}

func jsonString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		b, _ := json.Marshal(v)
		return string(b)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// cond evaluates the template's condition name.
func (s *stack) cond(t *testing.T, name string) bool {
	t.Helper()
	if v, ok := s.conds[name]; ok {
		return v
	}
	expr, ok := s.raw["Conditions"].(map[string]any)[name]
	if !ok {
		t.Fatalf("no condition %s", name)
	}
	v := s.truth(t, expr)
	s.conds[name] = v
	return v
}

// truth evaluates a boolean operand. goformation writes !Condition X as the bare string X.
func (s *stack) truth(t *testing.T, x any) bool {
	t.Helper()
	if name, ok := x.(string); ok {
		return s.cond(t, name)
	}
	v, ok := s.eval(t, x).(bool)
	if !ok {
		t.Fatalf("condition operand %v is not boolean", x)
	}
	return v
}

// eval evaluates a condition expression (or a value inside one).
func (s *stack) eval(t *testing.T, x any) any {
	t.Helper()
	m, ok := x.(map[string]any)
	if !ok || len(m) != 1 {
		return x
	}
	for fn, arg := range m {
		switch fn {
		case "Ref":
			if v, ok := s.params[arg.(string)]; ok {
				return v
			}
			return x
		case "Condition":
			return s.cond(t, arg.(string))
		case "Fn::Equals":
			a := arg.([]any)
			return jsonString(s.eval(t, a[0])) == jsonString(s.eval(t, a[1]))
		case "Fn::Not":
			return !s.truth(t, arg.([]any)[0])
		case "Fn::And", "Fn::Or":
			and := fn == "Fn::And"
			for _, e := range arg.([]any) {
				if s.truth(t, e) != and {
					return !and
				}
			}
			return and
		}
	}
	return x
}

// resolve returns x with every Fn::If resolved and AWS::NoValue removed.
func (s *stack) resolve(t *testing.T, x any) any {
	switch v := x.(type) {
	case map[string]any:
		if args, ok := v["Fn::If"].([]any); ok && len(v) == 1 {
			if s.cond(t, args[0].(string)) {
				return s.resolve(t, args[1])
			}
			return s.resolve(t, args[2])
		}
		if ref, ok := v["Ref"]; ok && len(v) == 1 && ref == "AWS::NoValue" {
			return noValue{}
		}
		out := map[string]any{}
		for k, e := range v {
			if r := s.resolve(t, e); r != (noValue{}) {
				out[k] = r
			}
		}
		return out
	case []any:
		out := []any{}
		for _, e := range v {
			if r := s.resolve(t, e); r != (noValue{}) {
				out = append(out, r)
			}
		}
		return out
	}
	return x
}

// ofType returns the names of the resources of type typ, sorted.
func (s *stack) ofType(typ string) []string {
	var out []string
	for name, r := range s.Resources {
		if r["Type"] == typ {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// get walks a path of map keys and list indexes (as strings) from v.
func get(v any, path ...string) any {
	for _, p := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[p]
		case []any:
			i := 0
			for _, r := range p {
				i = i*10 + int(r-'0')
			}
			if i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

// getAttResource returns the resource a Fn::GetAtt names, in either of its forms.
func getAttResource(v any) string {
	switch a := get(v, "Fn::GetAtt").(type) {
	case []any:
		name, _ := a[0].(string)
		return name
	case string:
		name, _, _ := strings.Cut(a, ".")
		return name
	}
	return ""
}

func props(r map[string]any) map[string]any { m, _ := r["Properties"].(map[string]any); return m }

func isRef(v any, name string) bool { return get(v, "Ref") == name }

// refersTo returns the resource or parameter v stands for: X for {"Ref": X} and for
// {"Fn::Sub": "${X}"}, which CloudFormation resolves alike; else "".
func refersTo(v any) string {
	if r, ok := get(v, "Ref").(string); ok {
		return r
	}
	if s, ok := get(v, "Fn::Sub").(string); ok && strings.HasPrefix(s, "${") && strings.HasSuffix(s, "}") && strings.Count(s, "${") == 1 {
		return s[2 : len(s)-1]
	}
	return ""
}

var functions = []string{"PaymentsFunction", "WebhookGithubFunction", "WebhookShopifyFunction",
	"WebhookSlackFunction", "WebhookStandardFunction", "WebhookStripeFunction"}

// consumer is the function that consumes the queue, deployed with WebhookSink=sqs (the default).
const consumer = "ConsumerFunction"

// withConsumer is every function of a stack with the sqs sink.
var withConsumer = append([]string{consumer}, functions...)

func TestTheTemplateHasEveryFunction(t *testing.T) {
	if got := deploy(t, nil).ofType("AWS::Serverless::Function"); !slices.Equal(got, withConsumer) {
		t.Fatalf("functions %v, want %v", got, withConsumer)
	}
	for _, sink := range []string{"log", "eventbridge"} {
		if got := deploy(t, map[string]string{"WebhookSink": sink}).ofType("AWS::Serverless::Function"); !slices.Equal(got, functions) {
			t.Errorf("WebhookSink=%s: functions %v, want %v", sink, got, functions)
		}
	}
}

// The consumer polls the FIFO queue through an event source mapping that reports partial batch
// failures, with the SQS actions it needs on that queue only, its own log group and alarms.
func TestTheConsumerConsumesTheQueueWithLeastPrivilege(t *testing.T) {
	s := deploy(t, nil)
	checkConsumerEventSource(t, s)
	if props(s.Resources[consumer])["Events"] != nil {
		t.Error("the consumer has SAM events: SAM's SQS event would attach a policy on every queue")
	}
	actions, want := consumerQueueActions(t, s), []string{"sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:ReceiveMessage"}
	if !slices.Equal(actions, want) {
		t.Errorf("consumer actions %v, want %v", actions, want)
	}
	if sub := get(props(s.Resources["ConsumerLogGroup"]), "LogGroupName", "Fn::Sub"); sub != "/aws/lambda/${AWS::StackName}/ConsumerFunction" {
		t.Errorf("consumer log group %v", sub)
	}
	if !isRef(get(props(s.Resources[consumer]), "LoggingConfig", "LogGroup"), "ConsumerLogGroup") {
		t.Errorf("consumer LoggingConfig %v", get(props(s.Resources[consumer]), "LoggingConfig"))
	}
	outcome := props(s.Resources["ConsumerOutcomeErrorAlarm"])
	if outcome["Namespace"] != "Idem" || !isRef(get(outcome, "Dimensions", "0", "Value"), consumer) || get(outcome, "Dimensions", "1", "Value") != "error" {
		t.Errorf("consumer outcome alarm %v", outcome)
	}
	for name, r := range deploy(t, map[string]string{"WebhookSink": "eventbridge"}).Resources {
		if strings.HasPrefix(name, "Consumer") || r["Type"] == "AWS::Lambda::EventSourceMapping" {
			t.Errorf("%s deployed without the queue", name)
		}
	}
}

// checkConsumerEventSource checks that the consumer has one event source mapping: on the
// webhook queue, reporting partial batch failures, in batches a FIFO queue can deliver.
func checkConsumerEventSource(t *testing.T, s *stack) {
	t.Helper()
	var mappings []string
	for _, name := range s.ofType("AWS::Lambda::EventSourceMapping") {
		p := props(s.Resources[name])
		if !isRef(p["FunctionName"], consumer) {
			continue
		}
		mappings = append(mappings, name)
		if getAttResource(p["EventSourceArn"]) != "WebhookQueue" || jsonString(get(p, "FunctionResponseTypes", "0")) != "ReportBatchItemFailures" {
			t.Errorf("%s: source %v, response types %v", name, p["EventSourceArn"], p["FunctionResponseTypes"])
		}
		if n, _ := p["BatchSize"].(float64); n < 1 || n > 10 {
			t.Errorf("%s: BatchSize %v, a FIFO queue delivers at most 10", name, p["BatchSize"])
		}
	}
	if len(mappings) != 1 {
		t.Fatalf("event source mappings of the consumer: %v", mappings)
	}
}

// consumerQueueActions returns, sorted, the actions the consumer's policies allow on the
// webhook queue, failing t for any other statement but reading the payload bucket.
func consumerQueueActions(t *testing.T, s *stack) []string {
	t.Helper()
	var actions []string
	for _, pol := range props(s.Resources[consumer])["Policies"].([]any) {
		st, _ := get(pol, "Statement").([]any)
		for _, x := range st {
			if getAttResource(get(x, "Resource")) == "WebhookQueue" {
				for _, a := range get(x, "Action").([]any) {
					actions = append(actions, jsonString(a))
				}
				continue
			}
			// The payload bucket's large bodies, read only (TestThePayloadBucket).
			if get(x, "Resource", "Fn::Sub") != "arn:${AWS::Partition}:s3:::${WebhookPayloadBucket}/*" || get(x, "Action") != "s3:GetObject" {
				t.Errorf("consumer statement %v", x)
			}
		}
	}
	slices.Sort(actions)
	return actions
}

func TestPaymentsRoutesUseIAMAuthorizationByDefault(t *testing.T) {
	for _, tt := range []struct {
		auth          string
		overrides     map[string]string
		iam, jwt, env string
	}{
		{"default", nil, "AWS_IAM", "", "iam"},
		{"jwt", map[string]string{"PaymentsAuth": "jwt", "JwtIssuer": "https://issuer.example", "JwtAudience": "client"}, "", "PaymentsJwt", "jwt"},
		{"none", map[string]string{"PaymentsAuth": "none"}, "", "", "none"},
	} {
		t.Run(tt.auth, func(t *testing.T) {
			s := deploy(t, tt.overrides)
			paths := get(props(s.Resources["HttpApi"]), "DefinitionBody", "paths")
			fn := props(s.Resources["PaymentsFunction"])
			schemes := get(props(s.Resources["HttpApi"]), "DefinitionBody", "components", "securitySchemes")
			// The IAM scheme as SAM declares its own AWS_IAM authorizer for an HTTP API.
			if iam := get(schemes, "AWS_IAM"); (iam != nil) != (tt.iam != "") ||
				(iam != nil && get(iam, "x-amazon-apigateway-authtype") != "awsSigv4") {
				t.Errorf("security scheme AWS_IAM: %v", iam)
			}
			if jwt := get(schemes, "PaymentsJwt"); (jwt != nil) != (tt.jwt != "") ||
				(jwt != nil && get(jwt, "x-amazon-apigateway-authorizer", "type") != "jwt") {
				t.Errorf("security scheme PaymentsJwt: %v", jwt)
			}
			for _, ev := range get(fn, "Events").(map[string]any) {
				checkRouteSecurity(t, paths, ev, tt.iam+tt.jwt)
			}
			if got := get(fn, "Environment", "Variables", "PAYMENTS_AUTH"); !isRef(got, "PaymentsAuth") || s.params["PaymentsAuth"] != tt.env {
				t.Errorf("PAYMENTS_AUTH is %v (PaymentsAuth=%s), want %s", got, s.params["PaymentsAuth"], tt.env)
			}
			checkWebhookRoutesHaveNoAuthorizer(t, paths)
		})
	}
}

// checkRouteSecurity checks that the function event ev is a route on HttpApi that the API's
// definition body (its paths) declares with the security scheme want, or none when want is "".
func checkRouteSecurity(t *testing.T, paths, ev any, want string) {
	t.Helper()
	method := strings.ToLower(get(ev, "Properties", "Method").(string))
	path := get(ev, "Properties", "Path").(string)
	if !isRef(get(ev, "Properties", "ApiId"), "HttpApi") {
		t.Errorf("%s %s is not on HttpApi", method, path)
	}
	op := get(paths, path, method)
	if op == nil {
		t.Fatalf("%s %s is not in the API's definition body", method, path)
	}
	scheme := ""
	if sec, ok := get(op, "security", "0").(map[string]any); ok {
		for k := range sec {
			scheme = k
		}
	}
	if scheme != want {
		t.Errorf("%s %s: security %q, want %q", method, path, scheme, want)
	}
}

// checkWebhookRoutesHaveNoAuthorizer checks that no webhook route of the API's paths has a
// security scheme: webhook routes are verified by signature, never by an authorizer.
func checkWebhookRoutesHaveNoAuthorizer(t *testing.T, paths any) {
	t.Helper()
	for p, ops := range paths.(map[string]any) {
		if !strings.HasPrefix(p, "/webhooks") {
			continue
		}
		for m, op := range ops.(map[string]any) {
			if get(op, "security") != nil {
				t.Errorf("%s %s has an authorizer", m, p)
			}
		}
	}
}

func TestEveryFunctionRunsInTheVPC(t *testing.T) {
	for _, o := range []map[string]string{nil, existingVPC} {
		s := deploy(t, o)
		global := get(s.Globals, "Function", "VpcConfig")
		for _, name := range withConsumer {
			vpc := get(props(s.Resources[name]), "VpcConfig")
			if vpc == nil {
				vpc = global
			}
			subnets, _ := get(vpc, "SubnetIds").([]any)
			groups, _ := get(vpc, "SecurityGroupIds").([]any)
			if len(groups) == 0 || !isRef(groups[0], "FunctionSecurityGroup") {
				t.Errorf("%s (%v): security groups %v", name, o, groups)
			}
			if o == nil && (len(subnets) != 2 || !isRef(subnets[0], "PrivateSubnetA") || !isRef(subnets[1], "PrivateSubnetB")) {
				t.Errorf("%s: subnets %v, want the created private subnets", name, subnets)
			}
			if o != nil && get(vpc, "SubnetIds", "Fn::Split", "1", "Ref") != "SubnetIds" {
				t.Errorf("%s: subnets %v, want SubnetIds", name, get(vpc, "SubnetIds"))
			}
		}
	}
}

var existingVPC = map[string]string{"VpcId": "vpc-0123456789abcdef0", "SubnetIds": "subnet-0aaa,subnet-0bbb"}

func TestWithoutAVPCTheStackCreatesOneWithItsEndpoints(t *testing.T) {
	s := deploy(t, nil)
	vpc := props(s.Resources["Vpc"])
	if vpc == nil || vpc["EnableDnsSupport"] != true || vpc["EnableDnsHostnames"] != true {
		t.Fatalf("created VPC: %v, want one with DNS support and hostnames", vpc)
	}
	if n := len(s.ofType("AWS::EC2::NatGateway")) + len(s.ofType("AWS::EC2::InternetGateway")); n != 0 {
		t.Errorf("%d NAT or internet gateways, want none", n)
	}
	checkPrivateSubnetsInTwoZones(t, s)
	want := map[string]string{"secretsmanager": "Interface", "sqs": "Interface", "dynamodb": "Gateway", "s3": "Gateway"}
	got := createdVPCEndpoints(t, s)
	if !maps(got, want) {
		t.Errorf("endpoints %v, want %v (sink sqs)", got, want)
	}
	// The sink chooses the other interface endpoint; no X-Ray, since nothing sends traces.
	ev := deploy(t, map[string]string{"WebhookSink": "eventbridge"})
	var services []string
	for _, name := range ev.ofType("AWS::EC2::VPCEndpoint") {
		services = append(services, jsonString(get(props(ev.Resources[name]), "ServiceName", "Fn::Sub")))
	}
	slices.Sort(services)
	if want := []string{"com.amazonaws.${AWS::Region}.dynamodb", "com.amazonaws.${AWS::Region}.events",
		"com.amazonaws.${AWS::Region}.s3", "com.amazonaws.${AWS::Region}.secretsmanager"}; !slices.Equal(services, want) {
		t.Errorf("eventbridge sink: endpoints %v, want %v", services, want)
	}

	given := deploy(t, existingVPC)
	if len(given.ofType("AWS::EC2::VPC"))+len(given.ofType("AWS::EC2::Subnet"))+len(given.ofType("AWS::EC2::VPCEndpoint")) != 0 {
		t.Errorf("with VpcId given, the stack still creates network resources")
	}
	if !isRef(get(props(given.Resources["FunctionSecurityGroup"]), "VpcId"), "VpcId") {
		t.Errorf("with VpcId given, the functions' group is not in it")
	}
}

// checkPrivateSubnetsInTwoZones checks that the created subnets are private, in the created
// VPC, and in two different zones.
func checkPrivateSubnetsInTwoZones(t *testing.T, s *stack) {
	t.Helper()
	zones := map[string]bool{}
	for _, name := range []string{"PrivateSubnetA", "PrivateSubnetB"} {
		p := props(s.Resources[name])
		if p == nil || !isRef(p["VpcId"], "Vpc") || p["MapPublicIpOnLaunch"] != false {
			t.Fatalf("%s: %v", name, p)
		}
		zones[jsonString(get(p, "AvailabilityZone", "Fn::Select", "0"))] = true
	}
	if len(zones) != 2 {
		t.Errorf("subnets in zones %v, want two different ones", zones)
	}
}

// createdVPCEndpoints returns the type of s's VPC endpoint per service ("sqs": "Interface"),
// failing t for one outside the created VPC or an interface endpoint without private DNS.
func createdVPCEndpoints(t *testing.T, s *stack) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, name := range s.ofType("AWS::EC2::VPCEndpoint") {
		p := props(s.Resources[name])
		svc := strings.TrimPrefix(jsonString(get(p, "ServiceName", "Fn::Sub")), "com.amazonaws.${AWS::Region}.")
		got[svc] = jsonString(p["VpcEndpointType"])
		if !isRef(p["VpcId"], "Vpc") {
			t.Errorf("%s is not in the created VPC", name)
		}
		if p["VpcEndpointType"] == "Interface" && p["PrivateDnsEnabled"] != true {
			t.Errorf("%s: private DNS off", name)
		}
	}
	return got
}

func maps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestAnExistingCacheIsReachable(t *testing.T) {
	if _, ok := deploy(t, nil).Resources["ExistingRedisIngress"]; ok {
		t.Fatal("an ingress rule without ExistingRedisSecurityGroupId")
	}
	s := deploy(t, map[string]string{"ExistingRedisUrl": "rediss://cache.example:6380", "ExistingRedisSecurityGroupId": "sg-0123456789abcdef0", "ExistingRedisPort": "6380"})
	r, ok := s.Resources["ExistingRedisIngress"]
	if !ok || r["Type"] != "AWS::EC2::SecurityGroupIngress" {
		t.Fatal("no ingress rule with ExistingRedisSecurityGroupId")
	}
	p := props(r)
	if !isRef(p["GroupId"], "ExistingRedisSecurityGroupId") || !isRef(p["SourceSecurityGroupId"], "FunctionSecurityGroup") ||
		!isRef(p["FromPort"], "ExistingRedisPort") || !isRef(p["ToPort"], "ExistingRedisPort") || p["IpProtocol"] != "tcp" {
		t.Errorf("ingress rule %v", p)
	}
	if _, ok := s.Resources["RedisCache"]; ok {
		t.Error("a cache is created besides the existing one")
	}
	for _, st := range []*stack{s, deploy(t, nil)} {
		if !isRef(get(st.Outputs["FunctionSecurityGroupId"], "Value"), "FunctionSecurityGroup") {
			t.Error("no output FunctionSecurityGroupId")
		}
	}
}

func TestValkeyIAMUsersAreAcceptedByElastiCache(t *testing.T) {
	s := deploy(t, map[string]string{"RedisIamAuth": "true"})
	group := props(s.Resources["RedisUserGroup"])
	if group == nil || group["Engine"] != "valkey" {
		t.Fatalf("user group %v", group)
	}
	names := map[string]bool{}
	for _, id := range group["UserIds"].([]any) {
		user := s.Resources[get(id, "Ref").(string)]
		names[jsonString(get(props(user), "UserName"))] = true
		if get(props(user), "UserName") == "default" && get(props(user), "AccessString") != "off -@all" {
			t.Errorf("the default user is not switched off: %v", get(props(user), "AccessString"))
		}
		mode := get(props(user), "AuthenticationMode", "Type")
		// A valkey user group holds only users that authenticate, with a password or IAM.
		if mode != "iam" && mode != "password" {
			t.Errorf("user %v in the valkey group authenticates with %v", id, mode)
		}
	}
	// A user group must include a user named default.
	if !names["default"] {
		t.Errorf("the user group has no user named default: %v", names)
	}
	if !isRef(get(props(s.Resources["RedisCache"]), "UserGroupId"), "RedisUserGroup") {
		t.Error("the cache does not use the user group")
	}
}

func TestTheStageIsThrottledAndLogged(t *testing.T) {
	s := deploy(t, nil)
	api := props(s.Resources["HttpApi"])
	rs := get(api, "DefaultRouteSettings")
	if !isRef(get(rs, "ThrottlingRateLimit"), "ApiThrottlingRateLimit") || !isRef(get(rs, "ThrottlingBurstLimit"), "ApiThrottlingBurstLimit") {
		t.Errorf("default route settings %v", rs)
	}
	for _, p := range []string{"ApiThrottlingRateLimit", "ApiThrottlingBurstLimit"} {
		if s.params[p] == "" || s.params[p] == "0" {
			t.Errorf("%s has no default", p)
		}
	}
	logs := get(api, "AccessLogSettings")
	group := getAttResource(get(logs, "DestinationArn"))
	if lg := props(s.Resources[group]); lg == nil || !isRef(lg["RetentionInDays"], "LogRetentionDays") {
		t.Errorf("access log group %s: %v", group, lg)
	}
	var format map[string]string
	if err := json.Unmarshal([]byte(get(logs, "Format").(string)), &format); err != nil {
		t.Fatalf("access log format is not JSON: %v", err)
	}
	have := map[string]bool{}
	for _, v := range format {
		have[v] = true
	}
	for _, v := range []string{"$context.requestId", "$context.identity.sourceIp", "$context.routeKey", "$context.status",
		"$context.integrationStatus", "$context.integrationLatency", "$context.responseLatency"} {
		if !have[v] {
			t.Errorf("access log format lacks %s", v)
		}
	}
}

func TestAlarmsWatchFunctionsAPIAndQueue(t *testing.T) {
	s := deploy(t, map[string]string{"AlarmEmail": "ops@example.com"})
	watched := map[string]bool{}
	for _, name := range s.ofType("AWS::CloudWatch::Alarm") {
		p := props(s.Resources[name])
		if actions, _ := p["AlarmActions"].([]any); len(actions) == 0 || !isRef(actions[0], "AlarmTopic") {
			t.Errorf("%s notifies %v", name, p["AlarmActions"])
		}
		switch ns := p["Namespace"]; ns {
		case "AWS/Lambda":
			watched[jsonString(p["MetricName"])+" "+refersTo(get(p, "Dimensions", "0", "Value"))] = true
		case "AWS/ApiGateway", "AWS/SQS", "AWS/ElastiCache":
			watched[jsonString(ns)+" "+jsonString(p["MetricName"])] = true
		case "Idem":
			// The EMF metric's function dimension: the function's deployed name.
			fn := refersTo(get(p, "Dimensions", "0", "Value"))
			if get(p, "MetricName") == "requests" && get(p, "Dimensions", "1", "Name") == "outcome" && get(p, "Dimensions", "1", "Value") == "error" {
				watched["outcome=error "+fn] = true
			}
		}
	}
	var want []string
	for _, f := range withConsumer {
		want = append(want, "Errors "+f, "Throttles "+f, "outcome=error "+f)
	}
	want = append(want, "AWS/ApiGateway 5xx", "AWS/SQS ApproximateNumberOfMessagesVisible", "AWS/ElastiCache Evictions")
	for _, w := range want {
		if !watched[w] {
			t.Errorf("no alarm on %s", w)
		}
	}
	if get(props(s.Resources["AlarmEmailSubscription"]), "Protocol") != "email" {
		t.Error("AlarmEmail creates no e-mail subscription")
	}
	if _, ok := deploy(t, map[string]string{"WebhookSink": "log"}).Resources["WebhookDeadLetterAlarm"]; ok {
		t.Error("a dead-letter alarm without a queue")
	}
}

func TestOperationsSettings(t *testing.T) {
	s := deploy(t, map[string]string{"WebhookSink": "eventbridge", "WebhookReservedConcurrency": "5", "PaymentsReservedConcurrency": "3"})
	for _, f := range functions {
		want := "WebhookReservedConcurrency"
		if f == "PaymentsFunction" {
			want = "PaymentsReservedConcurrency"
		}
		if !isRef(props(s.Resources[f])["ReservedConcurrentExecutions"], want) {
			t.Errorf("%s: reserved concurrency not from %s", f, want)
		}
		if _, ok := props(deploy(t, nil).Resources[f])["ReservedConcurrentExecutions"]; ok {
			t.Errorf("%s: reserved concurrency by default", f)
		}
	}
	archive := props(s.Resources["WebhookEventArchive"])
	if getAttResource(get(archive, "SourceArn")) != "WebhookEventBus" || !isRef(archive["RetentionDays"], "EventArchiveRetentionDays") {
		t.Errorf("event bus archive %v", archive)
	}
	// Stateful resources say what happens to them on deletion and replacement.
	for name, r := range s.Resources {
		switch r["Type"] {
		case "AWS::DynamoDB::Table", "AWS::Logs::LogGroup", "AWS::SQS::Queue", "AWS::SecretsManager::Secret",
			"AWS::ElastiCache::ServerlessCache", "AWS::Events::Archive", "AWS::S3::Bucket", "AWS::KMS::Key":
			if r["DeletionPolicy"] == nil || r["UpdateReplacePolicy"] == nil {
				t.Errorf("%s (%s) has no explicit DeletionPolicy and UpdateReplacePolicy", name, r["Type"])
			}
		}
	}
}

// The template's own policies name their actions; the only wildcards left are those of the
// AWS managed policies SAM attaches (logs, VPC network interfaces).
func TestNoWildcardIAMActions(t *testing.T) {
	for _, o := range []map[string]string{nil, {"WebhookSink": "eventbridge"}, {"RedisIamAuth": "true"},
		{"ExistingRedisUrl": "rediss://u@cache.example:6379", "RedisAuthSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:x",
			"RedisAuthSecretKmsKeyArn": "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"}} {
		statements := policyStatements(t, deploy(t, o))
		if len(statements) == 0 {
			t.Fatalf("%v: no policy statement found", o)
		}
		for _, st := range statements {
			actions := get(st, "Action")
			list, ok := actions.([]any)
			if !ok {
				list = []any{actions}
			}
			for _, a := range list {
				if strings.Contains(jsonString(a), "*") {
					t.Errorf("%v: wildcard action %v", o, a)
				}
			}
		}
	}
}

// policyStatements returns the statements of the template's own policies in s: the functions'
// inline statements and the IAM policies' and roles'. A function policy that is neither an
// inline statement, the stack's Redis credentials policy nor a SAM policy template allowed here
// fails t.
func policyStatements(t *testing.T, s *stack) []any {
	t.Helper()
	allowedTemplates := map[string]bool{"AWSSecretsManagerGetSecretValuePolicy": true, "EventBridgePutEventsPolicy": true}
	var statements []any
	for name, r := range s.Resources {
		p := props(r)
		switch r["Type"] {
		case "AWS::Serverless::Function":
			for _, pol := range p["Policies"].([]any) {
				m, ok := pol.(map[string]any)
				if !ok {
					continue
				}
				if st, ok := m["Statement"].([]any); ok {
					statements = append(statements, st...)
					continue
				}
				if isRef(m, "RedisCredentialsPolicy") {
					continue
				}
				for k := range m {
					if !allowedTemplates[k] {
						t.Errorf("%s uses policy %s", name, k)
					}
				}
			}
		case "AWS::IAM::ManagedPolicy", "AWS::IAM::Policy", "AWS::IAM::Role":
			if st, ok := get(p, "PolicyDocument", "Statement").([]any); ok {
				statements = append(statements, st...)
			}
		}
	}
	return statements
}
