package deploytest

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	consumerfn "github.com/idemlambda/idem/internal/functions/consumer/handler"
	"github.com/idemlambda/idem/internal/preset"
)

// parameterSets are the deployments every check of this file holds for: the defaults (Profile
// prod), the dev profile, each other sink, an existing VPC with endpoints, an existing cache, and
// every provider at once.
var parameterSets = []map[string]string{
	nil,
	{"Profile": "dev"},
	{"Profile": "dev", "WebhookSink": "eventbridge"},
	{"WebhookSink": "log"},
	{"WebhookSink": "eventbridge", "AlarmEmail": "ops@example.com"},
	{"VpcId": "vpc-0123456789abcdef0", "SubnetIds": "subnet-0aaa,subnet-0bbb", "CreateVpcEndpoints": "true", "RouteTableIds": "rtb-0aaa"},
	{"VpcId": "vpc-0123456789abcdef0", "SubnetIds": "subnet-0aaa,subnet-0bbb", "CreateVpcEndpoints": "true", "RouteTableIds": "rtb-0aaa", "Profile": "dev"},
	{"VpcId": "vpc-0123456789abcdef0", "SubnetIds": "subnet-0aaa,subnet-0bbb", "ExistingRedisUrl": "rediss://u@cache.example:6380",
		"ExistingRedisPort": "6380", "ExistingRedisSecurityGroupId": "sg-0123456789abcdef0"},
	{"WebhookProviders": allProviders},
}

const allProviders = "Stripe,Github,Shopify,Standard,Slack,Bitbucket,Calendly,CoinbaseCommerce,Discord,Gitlab,Hubspot,Intercom,Linear,Mailgun,Paddle,Razorpay,Sendgrid,Square,Twilio,Twitch,Typeform,Woocommerce,Zoom"

// forEachSet runs check on the stack of every parameter set.
func forEachSet(t *testing.T, check func(t *testing.T, s *stack)) {
	for _, o := range parameterSets {
		name := "defaults"
		if o != nil {
			var kv []string
			for k, v := range o {
				kv = append(kv, k+"="+v)
			}
			slices.Sort(kv)
			name = strings.Join(kv, ",")
		}
		t.Run(name, func(t *testing.T) { check(t, deploy(t, o)) })
	}
}

// Lambda's SQS guide: the queue's visibility timeout at least 6 times the function's timeout,
// or a batch retried after throttling becomes visible again while it still runs.
func TestTheQueueHidesARecordSixTimesTheConsumersTimeout(t *testing.T) {
	s := deploy(t, nil)
	timeout, _ := props(s.Resources[consumer])["Timeout"].(float64)
	if timeout == 0 {
		timeout, _ = get(s.Globals, "Function", "Timeout").(float64)
	}
	visibility, _ := props(s.Resources["WebhookQueue"])["VisibilityTimeout"].(float64)
	if timeout <= 0 || visibility < 6*timeout {
		t.Errorf("visibility timeout %v s for a consumer timeout of %v s, want at least 6 times", visibility, timeout)
	}
}

// Every alarm watches a metric of this stack only: each dimension value is one of the stack's
// own resources (a function's deployed name, the API, the queue, the cache), never a fixed
// name that another stack in the account would emit too.
func TestAlarmsWatchOnlyTheirOwnStack(t *testing.T) {
	fixed := map[string]bool{"outcome": true, "Stage": true}
	forEachSet(t, func(t *testing.T, s *stack) {
		for _, name := range s.ofType("AWS::CloudWatch::Alarm") {
			dims, _ := props(s.Resources[name])["Dimensions"].([]any)
			own := false
			for _, d := range dims {
				dim, v := jsonString(get(d, "Name")), get(d, "Value")
				if fixed[dim] {
					continue
				}
				res := refersTo(v)
				if res == "" {
					res = getAttResource(v)
				}
				if _, ok := s.Resources[res]; !ok {
					t.Errorf("%s: dimension %s=%v is not a resource of the stack", name, dim, v)
					continue
				}
				own = true
			}
			if !own {
				t.Errorf("%s: no dimension names a resource of the stack: %v", name, dims)
			}
		}
	})
}

// The code sends no trace segments, so the stack neither turns tracing on nor pays for an
// X-Ray endpoint.
func TestNothingPromisesTracing(t *testing.T) {
	forEachSet(t, func(t *testing.T, s *stack) {
		if _, ok := s.params["Tracing"]; ok {
			t.Error("a Tracing parameter")
		}
		if get(s.Globals, "Function", "Tracing") != nil {
			t.Errorf("Globals Tracing %v", get(s.Globals, "Function", "Tracing"))
		}
		for _, name := range s.ofType("AWS::EC2::VPCEndpoint") {
			if strings.Contains(jsonString(get(props(s.Resources[name]), "ServiceName")), "xray") {
				t.Errorf("%s is an X-Ray endpoint", name)
			}
		}
		for _, name := range s.ofType("AWS::Serverless::Function") {
			p := props(s.Resources[name])
			if p["Tracing"] != nil || strings.Contains(jsonString(p["Policies"]), "Xray") {
				t.Errorf("%s traces: %v %v", name, p["Tracing"], p["Policies"])
			}
		}
	})
}

// No security group lets anything out on every port: each states its egress (a group without
// any allows everything), and no rule opens all ports to the internet.
func TestNoSecurityGroupEgressOnAllPorts(t *testing.T) {
	forEachSet(t, func(t *testing.T, s *stack) {
		for _, name := range s.ofType("AWS::EC2::SecurityGroup") {
			rules, _ := props(s.Resources[name])["SecurityGroupEgress"].([]any)
			if len(rules) == 0 {
				t.Errorf("%s states no egress, so it allows all", name)
			}
			for _, r := range rules {
				if opensAllPorts(r) {
					t.Errorf("%s: egress %v", name, r)
				}
			}
		}
		for _, name := range s.ofType("AWS::EC2::SecurityGroupEgress") {
			if opensAllPorts(props(s.Resources[name])) {
				t.Errorf("%s: egress %v", name, props(s.Resources[name]))
			}
		}
		checkFunctionsEgress(t, s)
	})
}

// opensAllPorts reports whether the egress rule lets anything out to the internet on every
// port.
func opensAllPorts(rule any) bool {
	cidr := jsonString(get(rule, "CidrIp")) == "0.0.0.0/0" || jsonString(get(rule, "CidrIpv6")) == "::/0"
	proto := jsonString(get(rule, "IpProtocol"))
	from, _ := get(rule, "FromPort").(float64)
	to, _ := get(rule, "ToPort").(float64)
	return cidr && (proto == "-1" || proto == "all" || (from <= 0 && to >= 65535))
}

// checkFunctionsEgress checks that the functions reach the created cache on its port, and
// nothing else but HTTPS.
func checkFunctionsEgress(t *testing.T, s *stack) {
	t.Helper()
	if _, ok := s.Resources["RedisCache"]; ok {
		e := props(s.Resources["FunctionToCacheEgress"])
		if !isRef(e["GroupId"], "FunctionSecurityGroup") || !isRef(e["DestinationSecurityGroupId"], "CacheSecurityGroup") || e["FromPort"] != 6379.0 || e["ToPort"] != 6379.0 {
			t.Errorf("egress to the cache: %v", e)
		}
	}
	for _, r := range props(s.Resources["FunctionSecurityGroup"])["SecurityGroupEgress"].([]any) {
		if get(r, "FromPort") != 443.0 || get(r, "ToPort") != 443.0 {
			t.Errorf("functions' egress %v is not HTTPS", r)
		}
	}
}

// Each endpoint's policy admits only what the functions do, on the stack's own resources.
func TestEndpointsAdmitOnlyTheStacksResources(t *testing.T) {
	forEachSet(t, func(t *testing.T, s *stack) {
		for _, name := range s.ofType("AWS::EC2::VPCEndpoint") {
			st, _ := get(props(s.Resources[name]), "PolicyDocument", "Statement").([]any)
			if len(st) == 0 {
				t.Errorf("%s has no policy", name)
			}
			for _, x := range st {
				checkEndpointStatement(t, name, x)
			}
		}
		// The webhook secrets carry the tag the Secrets Manager endpoint admits.
		for _, name := range s.ofType("AWS::SecretsManager::Secret") {
			if !strings.HasPrefix(name, "Webhook") {
				continue
			}
			tags, _ := props(s.Resources[name])["Tags"].([]any)
			if len(tags) != 1 || get(tags[0], "Key") != "idem:stack" || !isRef(get(tags[0], "Value"), "AWS::StackName") {
				t.Errorf("%s: tags %v", name, tags)
			}
		}
	})
}

// checkEndpointStatement checks that the policy statement x of the endpoint name allows named
// actions only, on a resource of the stack: one it creates, the cache's secret, the payload
// bucket's objects, or the secrets tagged with the stack's name.
func checkEndpointStatement(t *testing.T, name string, x any) {
	t.Helper()
	if strings.Contains(jsonString(get(x, "Action")), "*") || get(x, "Effect") != "Allow" {
		t.Errorf("%s: statement %v", name, x)
	}
	res := get(x, "Resource")
	switch {
	case getAttResource(res) != "" || refersTo(res) == "RedisAuthSecretArn":
	case strings.Contains(jsonString(get(res, "Fn::Sub")), "${WebhookPayloadBucket}/*"):
	case get(x, "Condition", "StringEquals", "secretsmanager:ResourceTag/idem:stack") != nil:
		// Every secret of the account and region, as far as it carries the stack's tag.
		if !isRef(get(x, "Condition", "StringEquals", "secretsmanager:ResourceTag/idem:stack"), "AWS::StackName") {
			t.Errorf("%s: tag condition %v", name, get(x, "Condition"))
		}
	default:
		t.Errorf("%s: statement on %v, not a resource of the stack", name, res)
	}
}

// CloudWatch alarms cannot publish to a topic under alias/aws/sns: the topic has a key of the
// stack's own, whose policy lets CloudWatch (of this account) encrypt for it.
func TestTheAlarmTopicIsEncrypted(t *testing.T) {
	s := deploy(t, nil)
	key := refersTo(props(s.Resources["AlarmTopic"])["KmsMasterKeyId"])
	k := s.Resources[key]
	if k["Type"] != "AWS::KMS::Key" || get(props(k), "EnableKeyRotation") != true {
		t.Fatalf("alarm topic key %s: %v", key, k)
	}
	cloudwatch := false
	for _, st := range get(props(k), "KeyPolicy", "Statement").([]any) {
		if get(st, "Principal", "Service") == "cloudwatch.amazonaws.com" {
			actions := jsonString(get(st, "Action"))
			cloudwatch = strings.Contains(actions, `"kms:GenerateDataKey"`) && strings.Contains(actions, `"kms:Decrypt"`) &&
				isRef(get(st, "Condition", "StringEquals", "aws:SourceAccount"), "AWS::AccountId")
		}
	}
	if !cloudwatch {
		t.Errorf("the key's policy does not let this account's alarms publish: %v", get(props(k), "KeyPolicy"))
	}
}

// The created cache admits only the IAM-authenticated user, limited to the key prefix; the
// functions sign tokens for it.
func TestTheCreatedCacheRequiresAuthentication(t *testing.T) {
	for _, o := range []map[string]string{nil, {"Profile": "dev"}, {"WebhookSink": "log", "CacheName": "my-cache"}} {
		s := deploy(t, o)
		cache := props(s.Resources["RedisCache"])
		group := props(s.Resources[refersTo(cache["UserGroupId"])])
		if group == nil {
			t.Fatalf("%v: the cache has no user group: %v", o, cache["UserGroupId"])
		}
		var modes []string
		for _, id := range group["UserIds"].([]any) {
			u := props(s.Resources[refersTo(id)])
			mode := jsonString(get(u, "AuthenticationMode", "Type"))
			if get(u, "UserName") == "default" {
				if get(u, "AccessString") != "off -@all" {
					t.Errorf("%v: default user %v", o, get(u, "AccessString"))
				}
				continue
			}
			modes = append(modes, mode)
			if sub := jsonString(get(u, "AccessString", "Fn::Sub")); !strings.HasPrefix(sub, "on ~${IdemKeyPrefix}:* ") {
				t.Errorf("%v: user access %v", o, get(u, "AccessString"))
			}
		}
		if !slices.Equal(modes, []string{"iam"}) {
			t.Errorf("%v: users who can log in authenticate with %v, want iam only", o, modes)
		}
		env := get(s.Globals, "Function", "Environment", "Variables")
		if get(env, "REDIS_IAM_AUTH") != "true" || get(env, "REDIS_CACHE_SERVERLESS") != "true" || !isRef(get(env, "REDIS_CACHE_NAME"), "RedisCache") ||
			!strings.HasPrefix(jsonString(get(env, "REDIS_URL", "Fn::Sub")), "rediss://${RedisIamUser}@") {
			t.Errorf("%v: Redis settings %v", o, env)
		}
		if !strings.Contains(jsonString(props(s.Resources["RedisCredentialsPolicy"])), "elasticache:Connect") {
			t.Errorf("%v: the functions cannot connect with IAM", o)
		}
	}
}

// Unless CacheName says otherwise, the cache and its users are named after the stack's ID,
// which is unique and fits ElastiCache's 40 lower-case characters whatever the stack's name.
// The queues, whose names hold the whole UUID, fit SQS's 80 characters.
func TestNamesFitWhateverTheStackName(t *testing.T) {
	s := deploy(t, nil)
	const uuid = "0123abcd-4567-89ef-0123-456789abcdef" // the last segment of a stack ID
	derived := []any{"idem", map[string]any{"Fn::Select": []any{0.0, map[string]any{"Fn::Split": []any{"-", map[string]any{"Fn::Select": []any{2.0, map[string]any{"Fn::Split": []any{"/", map[string]any{"Ref": "AWS::StackId"}}}}}}}}}}
	name := get(props(s.Resources["RedisCache"]), "ServerlessCacheName", "Fn::Join")
	if jsonString(name) != jsonString([]any{"-", derived}) {
		t.Fatalf("cache name %v, want idem-<first part of the stack's UUID>", jsonString(name))
	}
	cacheName := "idem-" + uuid[:8]
	for _, user := range []string{"RedisIamUser", "RedisDefaultUser"} {
		if id := get(props(s.Resources[user]), "UserId", "Fn::Join", "1", "1"); len(cacheName)+1+len(jsonString(id)) > 40 {
			t.Errorf("%s id %s-%v is longer than 40", user, cacheName, id)
		}
	}
	for _, q := range []string{"WebhookQueue", "WebhookDeadLetterQueue"} {
		sub := get(props(s.Resources[q]), "QueueName", "Fn::Sub")
		tmpl := jsonString(get(sub, "0"))
		if get(sub, "1", "Id", "Fn::Select", "0") != 2.0 || !strings.HasSuffix(tmpl, ".fifo") {
			t.Fatalf("%s name %v", q, sub)
		}
		if n := len(strings.ReplaceAll(tmpl, "${Id}", uuid)); n > 80 {
			t.Errorf("%s name takes %d characters, over 80", q, n)
		}
	}
	if c := deploy(t, map[string]string{"CacheName": "mine"}); !isRef(get(props(c.Resources["RedisCache"]), "ServerlessCacheName"), "CacheName") {
		t.Errorf("CacheName given: %v", get(props(c.Resources["RedisCache"]), "ServerlessCacheName"))
	}
}

// A Redis password secret under a customer managed key can be read: kms:Decrypt on that key,
// through Secrets Manager only.
func TestARedisPasswordUnderACustomerKeyCanBeRead(t *testing.T) {
	const key = "arn:aws:kms:eu-west-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
	base := map[string]string{"ExistingRedisUrl": "rediss://u@cache.example:6379", "RedisAuthSecretArn": "arn:aws:secretsmanager:eu-west-1:123456789012:secret:x"}
	with := map[string]string{"RedisAuthSecretKmsKeyArn": key}
	for k, v := range base {
		with[k] = v
	}
	for _, tt := range []struct {
		o    map[string]string
		want bool
	}{{base, false}, {with, true}} {
		s := deploy(t, tt.o)
		found := false
		for _, st := range get(props(s.Resources["RedisCredentialsPolicy"]), "PolicyDocument", "Statement").([]any) {
			if get(st, "Action") != "kms:Decrypt" {
				continue
			}
			found = true
			if !isRef(get(st, "Resource"), "RedisAuthSecretKmsKeyArn") ||
				get(st, "Condition", "StringEquals", "kms:ViaService", "Fn::Sub") != "secretsmanager.${AWS::Region}.amazonaws.com" {
				t.Errorf("kms:Decrypt statement %v", st)
			}
		}
		if found != tt.want {
			t.Errorf("key given %v: kms:Decrypt granted %v", tt.want, found)
		}
	}
}

// The payments ledger's role does what the ledger does: GetItem and (conditional, also inside
// TransactWriteItems) PutItem.
func TestThePaymentsLedgerActions(t *testing.T) {
	s := deploy(t, nil)
	var actions []string
	for _, pol := range props(s.Resources["PaymentsFunction"])["Policies"].([]any) {
		for _, st := range asList(get(pol, "Statement")) {
			for _, a := range asList(get(st, "Action")) {
				actions = append(actions, jsonString(a))
			}
		}
	}
	if want := []string{"dynamodb:GetItem", "dynamodb:PutItem"}; !slices.Equal(actions, want) {
		t.Errorf("payments actions %v, want %v", actions, want)
	}
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

// The claim check for large bodies: an encrypted, private, TLS-only bucket whose objects expire
// with their provider's results; each webhook function writes under its provider's prefix only,
// the consumer reads, and both are told its name.
func TestThePayloadBucket(t *testing.T) {
	mapping := providerMapping(t)
	forEachSet(t, func(t *testing.T, s *stack) {
		b, ok := s.Resources["WebhookPayloadBucket"]
		if s.params["WebhookSink"] == "log" {
			if ok {
				t.Error("a payload bucket with the log sink")
			}
			for _, name := range s.ofType("AWS::Serverless::Function") {
				if get(props(s.Resources[name]), "Environment", "Variables", "WEBHOOK_PAYLOAD_BUCKET") != nil {
					t.Errorf("%s: WEBHOOK_PAYLOAD_BUCKET without a bucket", name)
				}
			}
			return
		}
		if !ok {
			t.Fatal("no payload bucket")
		}
		checkBucketIsPrivate(t, s, props(b))
		// One expiry per provider of the mapping: its prefix, its retention in whole days.
		rules := map[string]float64{}
		for _, r := range get(props(b), "LifecycleConfiguration", "Rules").([]any) {
			if prefix, ok := get(r, "Prefix").(string); ok && get(r, "Status") == "Enabled" {
				rules[prefix], _ = get(r, "ExpirationInDays").(float64)
			}
		}
		for key, row := range mapping {
			if rules[row.name+"/"] != row.days {
				t.Errorf("%s: objects under %s/ expire after %v days, want %v", key, row.name, rules[row.name+"/"], row.days)
			}
		}
		for _, name := range s.ofType("AWS::Serverless::Function") {
			checkPayloadBucketAccess(t, s, name, mapping)
		}
		// In a VPC without NAT the functions reach the bucket through a gateway endpoint.
		if _, created := s.Resources["Vpc"]; created || s.params["CreateVpcEndpoints"] == "true" {
			if !hasEndpointFor(s, "s3") {
				t.Error("no S3 gateway endpoint")
			}
		}
	})
}

// hasEndpointFor reports whether s has a VPC endpoint for the AWS service named service (s3,
// sqs, ...) in the stack's region.
func hasEndpointFor(s *stack, service string) bool {
	return slices.ContainsFunc(s.ofType("AWS::EC2::VPCEndpoint"), func(name string) bool {
		return jsonString(get(props(s.Resources[name]), "ServiceName", "Fn::Sub")) == "com.amazonaws.${AWS::Region}."+service
	})
}

// checkBucketIsPrivate checks that the payload bucket, of properties p, is encrypted, blocks
// public access, and has a policy that denies requests without TLS.
func checkBucketIsPrivate(t *testing.T, s *stack, p map[string]any) {
	t.Helper()
	if get(p, "BucketEncryption", "ServerSideEncryptionConfiguration", "0", "ServerSideEncryptionByDefault", "SSEAlgorithm") == nil {
		t.Error("bucket not encrypted")
	}
	for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
		if get(p, "PublicAccessBlockConfiguration", k) != true {
			t.Errorf("public access: %s not blocked", k)
		}
	}
	pol := props(s.Resources["WebhookPayloadBucketPolicy"])
	tls := false
	for _, st := range get(pol, "PolicyDocument", "Statement").([]any) {
		tls = tls || (get(st, "Effect") == "Deny" && get(st, "Condition", "Bool", "aws:SecureTransport") == "false")
	}
	if !isRef(pol["Bucket"], "WebhookPayloadBucket") || !tls {
		t.Errorf("bucket policy does not enforce TLS: %v", pol)
	}
}

// checkPayloadBucketAccess checks what the function name may do with the payload bucket: a
// webhook function puts objects under its provider's prefix (from mapping), the consumer gets
// them, both are told the bucket's name, and payments has nothing of it.
func checkPayloadBucketAccess(t *testing.T, s *stack, name string, mapping map[string]providerRow) {
	t.Helper()
	fp := props(s.Resources[name])
	env := get(fp, "Environment", "Variables")
	if name == "PaymentsFunction" {
		if get(env, "WEBHOOK_PAYLOAD_BUCKET") != nil || strings.Contains(jsonString(fp["Policies"]), "s3:") {
			t.Errorf("payments has the bucket: %v", fp["Policies"])
		}
		return
	}
	if !isRef(get(env, "WEBHOOK_PAYLOAD_BUCKET"), "WebhookPayloadBucket") {
		t.Errorf("%s: WEBHOOK_PAYLOAD_BUCKET %v", name, get(env, "WEBHOOK_PAYLOAD_BUCKET"))
	}
	var s3 []any
	for _, pol := range fp["Policies"].([]any) {
		for _, st := range asList(get(pol, "Statement")) {
			if strings.HasPrefix(jsonString(get(st, "Action")), "s3:") {
				s3 = append(s3, st)
			}
		}
	}
	if len(s3) != 1 {
		t.Fatalf("%s: S3 statements %v", name, s3)
	}
	key, isWebhook := strings.CutPrefix(strings.TrimSuffix(name, "Function"), "Webhook")
	if !isWebhook {
		if get(s3[0], "Action") != "s3:GetObject" {
			t.Errorf("%s: S3 statement %v", name, s3[0])
		}
		return
	}
	res := get(s3[0], "Resource", "Fn::Sub")
	if get(s3[0], "Action") != "s3:PutObject" || get(res, "0") != "arn:${AWS::Partition}:s3:::${WebhookPayloadBucket}/${Name}/*" ||
		get(res, "1", "Name") != mapping[key].name {
		t.Errorf("%s: S3 statement %v, want s3:PutObject under %s/", name, s3[0], mapping[key].name)
	}
}

type providerRow struct {
	name string
	days float64
}

// providerMapping reads the WebhookProvider mapping and checks each row's RetentionDays against
// the preset's result retention in pkg/webhook, rounded up to whole days.
func providerMapping(t *testing.T) map[string]providerRow {
	t.Helper()
	rows := map[string]providerRow{}
	for key, row := range deploy(t, nil).raw["Mappings"].(map[string]any)["WebhookProvider"].(map[string]any) {
		name := jsonString(get(row, "Name"))
		days, _ := get(row, "RetentionDays").(float64)
		p, ok := preset.Lookup(name)
		if !ok {
			t.Fatalf("mapping row %s: no preset %q", key, name)
		}
		if want := math.Ceil(p.ResultTTL.Hours() / 24); days != want {
			t.Errorf("mapping row %s: RetentionDays %v, the preset keeps results %v (%v days)", key, days, p.ResultTTL, want)
		}
		rows[key] = providerRow{name, days}
	}
	if len(rows) != len(preset.Names()) {
		t.Errorf("%d mapping rows, %d presets", len(rows), len(preset.Names()))
	}
	return rows
}

// Profile=dev trims the fixed cost: no interface endpoints for Secrets Manager and SQS in a
// created VPC (IPv6 out through a free egress-only gateway instead), others in one zone, the
// cache capped, and only the alarms on what users meet. The default is prod.
func TestTheDevProfile(t *testing.T) {
	prod, dev := deploy(t, nil), deploy(t, map[string]string{"Profile": "dev"})
	if prod.params["Profile"] != "prod" {
		t.Fatalf("default Profile %q, want prod", prod.params["Profile"])
	}
	if got, want := endpointServices(t, dev), []string{"dynamodb Gateway", "s3 Gateway"}; !slices.Equal(got, want) {
		t.Errorf("dev endpoints %v, want %v", got, want)
	}
	if got := endpointServices(t, prod); len(got) != 4 {
		t.Errorf("prod endpoints %v", got)
	}
	checkIPv6EgressInDevOnly(t, prod, dev)
	if get(props(dev.Resources["RedisCache"]), "CacheUsageLimits", "DataStorage", "Maximum") == nil ||
		get(props(dev.Resources["RedisCache"]), "CacheUsageLimits", "ECPUPerSecond", "Maximum") == nil ||
		get(props(prod.Resources["RedisCache"]), "CacheUsageLimits") != nil {
		t.Error("the cache is capped in dev only")
	}
	if got, want := dev.ofType("AWS::CloudWatch::Alarm"), []string{"Api5xxAlarm", "CacheEvictionsAlarm", "WebhookDeadLetterAlarm"}; !slices.Equal(got, want) {
		t.Errorf("dev alarms %v, want %v", got, want)
	}
	t.Logf("alarms with default parameters: prod %d, dev %d", len(prod.ofType("AWS::CloudWatch::Alarm")), len(dev.ofType("AWS::CloudWatch::Alarm")))
	// In a given VPC the dev profile keeps the interface endpoints, in one subnet.
	given := deploy(t, map[string]string{"Profile": "dev", "VpcId": "vpc-0123456789abcdef0", "SubnetIds": "subnet-0aaa,subnet-0bbb", "CreateVpcEndpoints": "true", "RouteTableIds": "rtb-0aaa"})
	for _, name := range []string{"SecretsManagerEndpoint", "SqsEndpoint"} {
		if sel := get(props(given.Resources[name]), "SubnetIds", "0", "Fn::Select"); get(sel, "0") != 0.0 || get(sel, "1", "Fn::Split", "1", "Ref") != "SubnetIds" {
			t.Errorf("dev, given VPC: %s in %v, want the first subnet", name, get(props(given.Resources[name]), "SubnetIds"))
		}
	}
}

// endpointServices lists s's VPC endpoints, sorted, as their service and type ("s3 Gateway"),
// failing t for an interface endpoint that is not in both subnets.
func endpointServices(t *testing.T, s *stack) []string {
	t.Helper()
	var out []string
	for _, name := range s.ofType("AWS::EC2::VPCEndpoint") {
		p := props(s.Resources[name])
		svc := strings.TrimPrefix(jsonString(get(p, "ServiceName", "Fn::Sub")), "com.amazonaws.${AWS::Region}.")
		out = append(out, svc+" "+jsonString(p["VpcEndpointType"]))
		if subnets, ok := p["SubnetIds"].([]any); ok && len(subnets) != 2 {
			t.Errorf("%s in %d subnets", name, len(subnets))
		}
	}
	slices.Sort(out)
	return out
}

// checkIPv6EgressInDevOnly checks that the dev stack's functions go out over IPv6 through an
// egress-only gateway, in subnets with IPv6 blocks, and that the prod stack has none of it.
func checkIPv6EgressInDevOnly(t *testing.T, prod, dev *stack) {
	t.Helper()
	if !isRef(get(props(dev.Resources["Ipv6EgressRoute"]), "EgressOnlyInternetGatewayId"), "EgressGateway") ||
		get(props(dev.Resources["Ipv6EgressRoute"]), "DestinationIpv6CidrBlock") != "::/0" ||
		get(dev.Globals, "Function", "VpcConfig", "Ipv6AllowedForDualStack") != true {
		t.Error("dev: no IPv6 egress for the functions")
	}
	for _, sub := range []string{"PrivateSubnetA", "PrivateSubnetB"} {
		if get(props(dev.Resources[sub]), "Ipv6CidrBlock") == nil || get(props(prod.Resources[sub]), "Ipv6CidrBlock") != nil {
			t.Errorf("%s: IPv6 block only in dev", sub)
		}
	}
	if _, ok := prod.Resources["EgressGateway"]; ok || get(prod.Globals, "Function", "VpcConfig", "Ipv6AllowedForDualStack") != nil {
		t.Error("prod has IPv6 egress")
	}
}

// The created subnets take the region's first two zones unless AvailabilityZones names two.
func TestAvailabilityZonesCanBeChosen(t *testing.T) {
	def := deploy(t, nil)
	chosen := deploy(t, map[string]string{"AvailabilityZones": "us-east-1b,us-east-1d"})
	for i, sub := range []string{"PrivateSubnetA", "PrivateSubnetB"} {
		if sel := get(props(def.Resources[sub]), "AvailabilityZone", "Fn::Select"); get(sel, "0") != float64(i) || get(sel, "1", "Fn::GetAZs") == nil {
			t.Errorf("default %s zone %v", sub, get(props(def.Resources[sub]), "AvailabilityZone"))
		}
		if sel := get(props(chosen.Resources[sub]), "AvailabilityZone", "Fn::Select"); get(sel, "0") != float64(i) || get(sel, "1", "Fn::Split", "1", "Ref") != "AvailabilityZones" {
			t.Errorf("chosen %s zone %v", sub, get(props(chosen.Resources[sub]), "AvailabilityZone"))
		}
	}
}

// A claim or result evicted before its TTL lets a retry run again: an alarm on the cache's
// Evictions, when the stack creates the cache.
func TestAnEvictionSetsOffAnAlarm(t *testing.T) {
	for _, o := range []map[string]string{nil, {"Profile": "dev"}} {
		a := props(deploy(t, o).Resources["CacheEvictionsAlarm"])
		if a["Namespace"] != "AWS/ElastiCache" || a["MetricName"] != "Evictions" || get(a, "Dimensions", "0", "Name") != "clusterId" ||
			!isRef(get(a, "Dimensions", "0", "Value"), "RedisCache") || !isRef(get(a, "AlarmActions", "0"), "AlarmTopic") {
			t.Errorf("%v: evictions alarm %v", o, a)
		}
	}
	if _, ok := deploy(t, map[string]string{"ExistingRedisUrl": "rediss://cache.example:6379"}).Resources["CacheEvictionsAlarm"]; ok {
		t.Error("an evictions alarm on a cache the stack does not create")
	}
}

// A guided deploy that saves to a new config environment writes no language_extensions, and
// SAM CLI then cannot read the template's Fn::ForEach: every environment of samconfig.toml sets it.
func TestEverySamconfigEnvironmentEnablesLanguageExtensions(t *testing.T) {
	f, err := os.Open("../../samconfig.toml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	envs, enabled := map[string]bool{}, map[string]bool{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "#"); i >= 0 && !strings.Contains(line[:i], `"`) {
			line = strings.TrimSpace(line[:i])
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			section = strings.Trim(line, "[]")
			env, _, _ := strings.Cut(section, ".")
			envs[env] = true
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == "language_extensions" && strings.TrimSpace(v) == "true" {
			env, rest, _ := strings.Cut(section, ".")
			if rest == "global.parameters" {
				enabled[env] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(envs) < 2 {
		t.Fatalf("environments %v", envs)
	}
	for env := range envs {
		if !enabled[env] {
			t.Errorf("samconfig.toml environment %s has no language_extensions = true under [%s.global.parameters]", env, env)
		}
	}
}

// us-east-1 list prices behind the idle columns of docs/deploy.md's cost table, per 730-hour
// month (AWS PrivateLink Pricing, Amazon ElastiCache Pricing, AWS Secrets Manager Pricing,
// Amazon CloudWatch Pricing, AWS Key Management Service Pricing, Amazon SQS Pricing).
const (
	hoursPerMonth            = 730
	interfaceEndpointPerZone = 0.01 * hoursPerMonth        // per endpoint and zone
	valkeyMinimum            = 0.1 * 0.084 * hoursPerMonth // 100 MB at $0.084 per GB-hour
	secretPerMonth           = 0.40
	alarmPerMonth            = 0.10
	dashboardPerMonth        = 3.0 // beyond the account's first three, which are free
	kmsKeyPerMonth           = 1.0
	// The consumer's event source mapping long-polls the queue: 5 polls of 20 s, continuously,
	// at $0.50 per million FIFO requests.
	queuePollsPerMonth = 5 * 3 * 60 * hoursPerMonth * 0.50 / 1e6
)

// idleCost is what the stack s costs a month with no traffic, from what it creates.
func idleCost(s *stack) float64 {
	cost := 0.0
	for _, name := range s.ofType("AWS::EC2::VPCEndpoint") {
		p := props(s.Resources[name])
		if p["VpcEndpointType"] == "Interface" {
			zones := len(asList(p["SubnetIds"]))
			if _, ok := get(p, "SubnetIds", "Fn::Split").([]any); ok {
				zones = 2 // SubnetIds given: as many as the subnets, two in the examples
			}
			cost += float64(zones) * interfaceEndpointPerZone
		}
	}
	if _, ok := s.Resources["RedisCache"]; ok {
		cost += valkeyMinimum
	}
	cost += float64(len(s.ofType("AWS::SecretsManager::Secret"))) * secretPerMonth
	cost += float64(len(s.ofType("AWS::CloudWatch::Alarm"))) * alarmPerMonth
	cost += float64(len(s.ofType("AWS::CloudWatch::Dashboard"))) * dashboardPerMonth
	cost += float64(len(s.ofType("AWS::KMS::Key"))) * kmsKeyPerMonth
	if len(s.ofType("AWS::Lambda::EventSourceMapping")) > 0 {
		cost += queuePollsPerMonth
	}
	return cost
}

// The idle totals of docs/deploy.md's cost table are those of the resources the template
// creates with the defaults (Profile=prod) and with Profile=dev, and dev stays within $15.
func TestTheCostTableMatchesTheTemplate(t *testing.T) {
	doc, err := os.ReadFile("../../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	var total string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| **total** |") {
			total = line
		}
	}
	if total == "" {
		t.Fatal("docs/deploy.md has no total row in its cost table")
	}
	cells := strings.Split(total, "|")
	prod, dev := idleCost(deploy(t, nil)), idleCost(deploy(t, map[string]string{"Profile": "dev"}))
	for i, profile := range []string{"prod", "dev"} {
		want := "**$" + dollars([]float64{prod, dev}[i]) + "**"
		if got := strings.TrimSpace(cells[3+i]); got != want {
			t.Errorf("idle total of %s in docs/deploy.md is %s, the template's resources cost %s", profile, got, want)
		}
	}
	if dev > 15 {
		t.Errorf("Profile=dev costs $%.2f a month idle, over $15", dev)
	}
	t.Logf("idle: prod $%.2f, dev $%.2f a month", prod, dev)
	checkStorageRow(t, string(doc))
}

// Storage of ElastiCache Serverless: $0.084 per GB-hour, 100 MB minimum, in decimal units
// (the higher estimate).
const (
	cacheGBHour     = 0.084
	cacheMinimumGB  = 0.1
	deliveriesPerMo = 1e6
)

// storageCosts computes, from the measured record sizes, the bytes one million webhook
// deliveries a month keep in the cache in steady state (each record held its TTL: Stripe's
// result retention for the webhook function's, the consumer's own), the monthly delivery rate
// at which they outgrow the cache's minimum, and what each further million costs.
func storageCosts(t *testing.T) (sizes recordSizes, perMillionMB, breakEvenMillions, perMillionAbove float64) {
	t.Helper()
	sizes = readRecordSizes(t)
	byteHours := float64(sizes.Webhook.Bytes)*stripeTTL().Hours() + float64(sizes.Consumer.Bytes)*consumerfn.DefaultResultTTL.Hours()
	resident := deliveriesPerMo / hoursPerMonth * byteHours // bytes held for 1M deliveries a month
	perMillionMB = resident / 1e6
	breakEvenMillions = cacheMinimumGB * 1e9 / resident
	perMillionAbove = resident / 1e9 * cacheGBHour * hoursPerMonth
	return sizes, perMillionMB, breakEvenMillions, perMillionAbove
}

// stripeTTL is how long the webhook function keeps a Stripe delivery's result.
func stripeTTL() time.Duration {
	p, _ := preset.Lookup("stripe")
	return p.ResultTTL
}

// The cost table's storage row cites the measured record sizes and what follows from them.
func checkStorageRow(t *testing.T, doc string) {
	t.Helper()
	sizes, mb, breakEven, above := storageCosts(t)
	var row string
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "| ElastiCache Serverless (Valkey), storage |") {
			row = line
		}
	}
	if row == "" {
		t.Fatal("docs/deploy.md's cost table has no storage row")
	}
	for _, want := range []string{
		fmt.Sprintf("%d bytes (webhook record, held %.0f h)", sizes.Webhook.Bytes, stripeTTL().Hours()),
		fmt.Sprintf("%d bytes (consumer record, held %.0f h)", sizes.Consumer.Bytes, consumerfn.DefaultResultTTL.Hours()),
		fmt.Sprintf("%.0f MB", mb),
		fmt.Sprintf("%.2fM deliveries a month", breakEven),
		fmt.Sprintf("$%s per further 1M", dollars(above)),
		"record-sizes.json",
	} {
		if !strings.Contains(row, want) {
			t.Errorf("the storage row does not say %q (from bench/results/record-sizes.json): %s", want, row)
		}
	}
	if breakEven < 1 {
		t.Errorf("1M deliveries a month outgrow the cache's minimum (%.0f MB); the table says $0", mb)
	}
	t.Logf("storage: %.1f MB for 1M deliveries a month, minimum outgrown at %.2fM, then $%.2f per 1M", mb, breakEven, above)
}

// dollars writes v rounded to the cent.
func dollars(v float64) string { return fmt.Sprintf("%.2f", math.Round(v*100)/100) }
