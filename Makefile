# Every target sets itself up: Go modules come from the module proxy, Go tools run pinned with
# `go run`, and the test targets start the Redis they need (.ci/ensure-redis). The benchmark
# tools (the comparison with the Node.js peers, the benchmark report) are their own Go module in
# bench/, so that their dependencies stay out of the product's go.mod and `./...` never builds
# them; bench-test runs their tests.
SHELL := /bin/bash
GO ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT := golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
GOCYCLO := github.com/fzipp/gocyclo/cmd/gocyclo@v0.6.0
BENCH_COUNT ?= 6
FUZZTIME ?= 5s
PROVIDER ?= stripe
URL ?= http://127.0.0.1:3000
N ?= 1
TEST_FLAGS ?= -race -timeout 20m

.PHONY: all deps build build-lambda deploy-check run send events test test-busy test-faults test-rie fuzz lint bench bench-test load compare api-count cyclo clean
all: build

deps:
	$(GO) mod download

build: deps
	$(GO) build ./...

# Local API on 127.0.0.1:3000 (ADDR=127.0.0.1:3001 another address) serving every route of
# template.yaml, on embedded Redis unless REDIS_URL is set. It serves every webhook provider the
# template can deploy; PROVIDERS=Stripe,Twilio a choice, PROVIDERS= (empty) the template's default
# WebhookProviders.
PROVIDERS ?= all
ADDR ?=
run: deps
	$(GO) run ./cmd/localapi $(if $(PROVIDERS),-providers '$(PROVIDERS)') $(if $(ADDR),-addr '$(ADDR)')

# Sign and post sample events: make send PROVIDER=stripe URL=http://127.0.0.1:3000 N=10; PROVIDER=all
# sends to every provider route the local API at URL serves (it lists them), or against a deployed
# API to those of the template's default WebhookProviders.
send: deps
	$(GO) run ./cmd/send -provider $(PROVIDER) -url $(URL) -n $(N)

# Regenerate the signed sample events in events/ with a fresh timestamp and the development secrets.
events: deps
	$(GO) run ./cmd/events -dir events

test: deps
	bash .ci/ensure-redis
	$(GO) test $(TEST_FLAGS) ./...

test-faults: deps
	bash .ci/ensure-redis
	$(GO) test $(TEST_FLAGS) -count=1 -v ./internal/faults/...

# The fault tests on a busy host: BUSY CPU-bound loops (default 6) beside them, under -race.
BUSY ?= 6
test-busy: deps
	bash .ci/ensure-redis
	@set -e; pids=; for i in $$(seq $(BUSY)); do (while :; do :; done) & pids="$$pids $$!"; done; \
	  trap 'kill $$pids 2>/dev/null' EXIT; \
	  $(GO) test $(TEST_FLAGS) -count=1 ./internal/faults/... ./pkg/idem/...

test-rie: deps
	$(GO) test -count=1 -v ./internal/rietest/...

# Runs every fuzz target for FUZZTIME each (.ci/fuzz-target). The targets are found in the sources
# (a func FuzzXxx in a _test.go file), which costs no build, rather than with go test -list, which
# would build every package's tests once more.
fuzz: deps
	@set -e; for file in $$(git ls-files '*_test.go' | grep -v '^bench/' | xargs grep -l '^func Fuzz'); do \
	  for f in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
	    echo "== ./$$(dirname $$file) $$f"; GO=$(GO) bash .ci/fuzz-target ./$$(dirname $$file) $$f $(FUZZTIME); \
	  done; \
	done

lint: deps
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# The public API's shape (internal/cmd/apicount): at most 220 exported identifiers across the
# public packages and 60 in pkg/webhook; outside internal/ only those packages and main packages;
# no environment reads in them; pkg/webhook without aws-lambda-go. API_COUNT_FLAGS=-report prints
# the counts and findings without failing.
API_COUNT_FLAGS ?=
api-count:
	$(GO) run ./internal/cmd/apicount $(API_COUNT_FLAGS)

# Every function gocyclo (pinned) lists over cyclomatic 15 needs a one-line reason in the comment
# lines directly above it, marked //cyclo: (internal/cmd/cyclo). CYCLO_FLAGS=-report lists the
# functions without one and does not fail.
CYCLO_FLAGS ?=
cyclo:
	$(GO) run ./internal/cmd/cyclo -tool $(GOCYCLO) -over 15 $(CYCLO_FLAGS)

# Core benchmarks (pkg/idem, and the SQS batch handler pkg/idem/idemsqs) against a private
# redis-server on loopback, next to a bare SET NX and GET; the VPC benchmarks run the batches and
# a bare SET NX again through a proxy adding 100 µs to each direction of a round trip. The three
# functions' handlers (a 2 KB Stripe delivery, a payment, an SQS batch of 10 through the
# consumer) run in their own binaries, each beside the core's Do or DoBatch doing the same.
# The rounds are interleaved (every benchmark once per round) so that a noisy phase of a shared
# machine hits the paths and their floors alike.
bench: deps
	$(GO) test -c -o bin/idem.test ./pkg/idem
	$(GO) test -c -o bin/idemsqs.test ./pkg/idem/idemsqs
	$(GO) test -c -o bin/webhookhandler.test ./internal/functions/webhook/handler
	$(GO) test -c -o bin/paymentshandler.test ./internal/functions/payments/handler
	$(GO) test -c -o bin/consumerhandler.test ./internal/functions/consumer/handler
	rm -f bench.txt; for i in $$(seq $(BENCH_COUNT)); do \
	  (cd pkg/idem && ../../bin/idem.test -test.run '^$$' -test.bench . -test.benchmem) | grep -v '^redis:' | tee -a bench.txt; \
	  (cd pkg/idem/idemsqs && ../../../bin/idemsqs.test -test.run '^$$' -test.bench . -test.benchmem) | grep -v '^redis:' | tee -a bench.txt; \
	  (cd internal/functions/webhook/handler && ../../../../bin/webhookhandler.test -test.run '^$$' -test.bench Webhook -test.benchmem) | grep -v '^redis:' | tee -a bench.txt; \
	  (cd internal/functions/payments/handler && ../../../../bin/paymentshandler.test -test.run '^$$' -test.bench Payments -test.benchmem) | grep -v '^redis:' | tee -a bench.txt; \
	  (cd internal/functions/consumer/handler && ../../../../bin/consumerhandler.test -test.run '^$$' -test.bench Consumer -test.benchmem) | grep -v '^redis:' | tee -a bench.txt; \
	done
	$(GO) run $(BENCHSTAT) bench.txt
	cd bench && $(GO) run ./benchreport ../bench.txt

# The bench module's own tests (the comparison's measurements against a private redis-server,
# its report and plot). Not part of make test: they build the comparison tool and its
# dependencies, which the product does not need.
bench-test:
	bash .ci/ensure-redis
	cd bench && $(GO) vet ./... && $(GO) test $(TEST_FLAGS) ./...

# 8 environments, 10,000 deliveries of 1,000 events against real Redis.
load: deps
	bash .ci/ensure-redis
	$(GO) run ./cmd/load

# Our guard against Powertools (TypeScript) and express+ioredis on the same redis-server (Redis 7).
# The peers' drivers are bench/peers/*, their npm dependencies installed with npm ci from their
# lockfiles; the report goes to docs/comparison.{md,svg}, every number of every run to
# bench/results/comparison.json. COMPARE_FLAGS passes more flags (cd bench && go run ./compare -h),
# e.g. COMPARE_FLAGS='-runs 1 -n 200' for a short run.
COMPARE_FLAGS ?=
compare:
	bash .ci/ensure-redis
	cd bench && $(GO) run ./compare -peers peers -out ../docs -json results $(COMPARE_FLAGS)

clean:
	rm -rf bin .aws-sam bench.txt

# Before sam build and sam deploy: SAM CLI 1.161 or later (Fn::ForEach with language_extensions),
# the AWS CLI, and credentials (aws sts get-caller-identity). Each problem is one line.
deploy-check:
	bash .ci/deploy-check

# Lambda bootstraps for provided.al2023 on arm64. SAM calls build-<LogicalId> with ARTIFACTS_DIR set
# (BuildMethod: makefile), because its go1.x builder sets neither -tags lambda.norpc nor CGO_ENABLED=0.
# samconfig.toml sets build_in_source: SAM runs these targets in the repository instead of copying it
# (with .tools/ and bin/) once per function; each writes only its bootstrap into ARTIFACTS_DIR, and the
# webhook builds after the first come from Go's build cache. The webhook functions are those of the
# template's WebhookProviders parameter (Fn::ForEach), one per provider, all named Webhook<Key>Function:
# one pattern rule builds each of them.
LAMBDA_ENV := GOOS=linux GOARCH=arm64 CGO_ENABLED=0
LAMBDA_FLAGS := -tags lambda.norpc -trimpath -ldflags='-s -w'

build-Webhook%Function:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/webhook

build-PaymentsFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/payments

build-ConsumerFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/consumer

# Every bootstrap for arm64 (what Lambda runs) into bin/, with their sizes.
build-lambda: deps
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o bin/arm64/webhook/bootstrap ./functions/webhook
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o bin/arm64/payments/bootstrap ./functions/payments
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o bin/arm64/consumer/bootstrap ./functions/consumer
	@ls -l bin/arm64/*/bootstrap
