// Package deploytest holds only tests: it reads template.yaml as CloudFormation would deploy it
// with a given set of parameters (the AWS::LanguageExtensions transform applied, so one webhook
// function per provider of WebhookProviders; conditions evaluated, Fn::If resolved, resources
// whose condition is false left out) and checks what a deployment promises: each chosen
// provider's function, secret, route, log group, alarms and outputs under stable logical IDs, IAM-authorized payments
// routes by default, every function in a VPC, a VPC with its endpoints when none is given, the
// ingress rule to an existing cache, stage throttling and access logs, alarms, and no wildcard
// IAM action in the template's own policies.
package deploytest
