# Every target sets itself up: Go modules come from the module proxy, tools run pinned with `go run`.
SHELL := /bin/bash
GO ?= go
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
BENCHSTAT := golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
HOST_BIN := bin

.PHONY: all build test lint bench run
all: build

build:
	$(GO) build ./...

test:
	$(GO) test ./...

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# Lambda bootstraps for provided.al2023 on arm64. SAM calls build-<LogicalId> with ARTIFACTS_DIR set
# (BuildMethod: makefile), because its go1.x builder sets neither -tags lambda.norpc nor CGO_ENABLED=0.
LAMBDA_ENV := GOOS=linux GOARCH=arm64 CGO_ENABLED=0
LAMBDA_FLAGS := -tags lambda.norpc -trimpath -ldflags='-s -w'
WEBHOOK_FUNCTIONS := WebhookStripeFunction WebhookGithubFunction WebhookShopifyFunction WebhookStandardFunction WebhookSlackFunction

$(addprefix build-,$(WEBHOOK_FUNCTIONS)):
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/webhook

build-PaymentsFunction:
	$(LAMBDA_ENV) $(GO) build $(LAMBDA_FLAGS) -o $(ARTIFACTS_DIR)/bootstrap ./functions/payments
