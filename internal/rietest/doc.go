// Package rietest runs the functions as Lambda runs them, and holds only tests.
//
// Each function's bootstrap is built for the host (GOOS=linux, the host's GOARCH,
// CGO_ENABLED=0, -tags lambda.norpc: the build of the Makefile's build-lambda for another
// architecture) and started under the AWS Lambda Runtime Interface Emulator
// (github.com/aws/aws-lambda-runtime-interface-emulator, cmd/aws-lambda-rie), which gives it
// the real Lambda runtime API: AWS_LAMBDA_RUNTIME_API is set, so the functions see themselves
// "inside Lambda" and take nothing from local defaults. Each runs with the environment
// events/env.json gives it for sam local (samples.LambdaEnv), pointed at the shared test Redis
// (127.0.0.1:6379, or REDIS_TEST_ADDR) under a key prefix of its own, with the template's
// timeout as AWS_LAMBDA_FUNCTION_TIMEOUT.
//
// The tests invoke every file of events/ through the emulator's invoke endpoint
// (POST /2015-03-31/functions/function/invocations), after re-signing the webhook samples
// with a fresh timestamp, and check the answers the samples document: the first delivery
// executed, the second replayed, 401 for a bad signature, the Slack challenge, a payment
// created, replayed and read back. Another test checks that a webhook function without a
// secret fails its init inside Lambda, and one that both functions cross-compile for arm64,
// logging the bootstraps' sizes. The payments function is also run without PAYMENTS_AUTH (init
// fails, naming it) and with iam (401 without an IAM identity, 201 with one), and against a
// private redis-server serving TLS with a password: the server's counters show the connection
// made during init and used by the first request, whose duration is logged next to a warm
// first delivery's (a measurement, not an assertion).
//
// The emulator is built by the tests themselves, once, into the user cache directory: go
// install of cmd/aws-lambda-rie pinned to RIEVersion, or, when the module proxy cannot be
// reached, go build in the module's directory of the module cache. When it cannot be built or started, or
// the shared Redis does not answer, the tests are skipped, or fail when CI is set.
package rietest
