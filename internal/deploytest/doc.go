// Package deploytest holds only tests: it reads template.yaml as CloudFormation would deploy it
// with a given set of parameters (the AWS::LanguageExtensions transform applied, so one webhook
// function per provider of WebhookProviders; conditions evaluated, Fn::If resolved, resources
// whose condition is false left out) and checks what a deployment promises: each chosen
// provider's function, secret, route, log group, alarms and outputs under stable logical IDs, IAM-authorized payments
// routes by default, every function in a VPC, a VPC with its endpoints when none is given, the
// ingress rule to an existing cache, stage throttling and access logs, alarms, and no wildcard
// IAM action in the template's own policies. It also checks what a first deploy meets (the
// consumer queue's visibility timeout, names that fit any stack name, the zones, the dev
// profile, the payload bucket, endpoint policies, narrow egress, an encrypted alarm topic, a
// cache that requires authentication, alarms on the stack's own dimensions, no tracing), that
// every samconfig.toml environment enables language_extensions, and .ci/deploy-check (make
// deploy-check) with fake sam and aws programs.
package deploytest
