package handler_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemlambda/idem/internal/functions/payments/handler"
	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/internal/testsupport"
)

// race sends the same request from every handler, perHandler copies each, all released at
// once. A request answered 409 is retried, as a client would, until it gets its final answer.
// It returns every final answer and how many 409s were seen on the way.
func race(t *testing.T, handlers []*handler.Handler, perHandler int, req func() events.APIGatewayV2HTTPRequest) ([]events.APIGatewayV2HTTPResponse, int) {
	t.Helper()
	var (
		mu        sync.Mutex
		finals    []events.APIGatewayV2HTTPResponse
		conflicts int
		failures  []string
		wg        sync.WaitGroup
	)
	start := make(chan struct{})
	for _, h := range handlers {
		for range perHandler {
			wg.Go(func() {
				<-start
				deadline := time.Now().Add(20 * time.Second)
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					resp, err := h.Handle(ctx, req())
					cancel()
					mu.Lock()
					switch {
					case err != nil:
						failures = append(failures, err.Error())
					case resp.StatusCode == 409 && time.Now().Before(deadline):
						conflicts++
						if resp.Headers["retry-after"] == "" || !strings.Contains(resp.Body, "idempotency_key_in_use") {
							failures = append(failures, "409 without retry-after or code: "+resp.Body)
						}
						mu.Unlock()
						time.Sleep(5 * time.Millisecond)
						continue
					default:
						finals = append(finals, resp)
					}
					mu.Unlock()
					return
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed, first: %s", len(failures), failures[0])
	}
	return finals, conflicts
}

// wantOnePayment checks that every final answer is a 201 carrying the same payment, exactly one
// of them not marked as a replay, and returns the payment's id.
func wantOnePayment(t *testing.T, finals []events.APIGatewayV2HTTPResponse) string {
	t.Helper()
	var id string
	fresh := 0
	for _, resp := range finals {
		if resp.StatusCode != 201 {
			t.Fatalf("final answer %d %s, want 201", resp.StatusCode, resp.Body)
		}
		p := decodePayment(t, resp)
		if id == "" {
			id = p.ID
		}
		if p.ID != id {
			t.Fatalf("two payments for one key: %s and %s", id, p.ID)
		}
		if resp.Headers[handler.HeaderReplayed] != "true" {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d answers not marked as replays, want exactly 1", fresh)
	}
	return id
}

func TestConcurrentRequestsFromSeparateEnvironmentsCreateOnePayment(t *testing.T) {
	t.Parallel()
	e := sharedEnv(t)
	spy := newSpyLedger(ledger.NewMemory())
	spy.delay = 30 * time.Millisecond // keeps the first claim in progress while the others arrive
	var handlers []*handler.Handler
	for range 6 { // each New opens its own Redis client, as each execution environment does
		handlers = append(handlers, newHandler(t, e, handler.WithLedger(spy)))
	}
	finals, conflicts := race(t, handlers, 4, func() events.APIGatewayV2HTTPRequest {
		return as("carol", post(t, "concurrent-1", body1999EUR))
	})
	if len(finals) != 24 {
		t.Fatalf("%d final answers, want 24", len(finals))
	}
	wantOnePayment(t, finals)
	spy.wantWritten(t, 1)
	t.Logf("%d answers were 409 before their replay", conflicts)
}

func TestRetryAfterRedisLostTheRecordAnswersWithTheOriginalPayment(t *testing.T) {
	t.Parallel()
	srv := testsupport.StartRedis(t)
	admin := srv.NewClient()
	flush := func() {
		t.Helper()
		if err := admin.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	spy := newSpyLedger(ledger.NewMemory())
	h := newHandler(t, env{"REDIS_URL": srv.URL()}, handler.WithLedger(spy))

	first := do(t, h, post(t, "lost-1", body1999EUR))
	original := wantCreated(t, first, false)
	flush()
	again := do(t, h, post(t, "lost-1", body1999EUR))
	if wantCreated(t, again, true); again.Body != first.Body {
		t.Fatalf("retry after the flush answered %s, want %s", again.Body, first.Body)
	}
	// The record is back in Redis: the next retry is an ordinary replay that skips the ledger.
	calls := spy.calls.Load()
	wantCreated(t, do(t, h, post(t, "lost-1", body1999EUR)), true)
	if spy.calls.Load() != calls {
		t.Fatal("a replay from Redis reached the ledger")
	}

	// The ledger also remembers what the key was used for: another body is still a mismatch,
	// and it leaves nothing behind that would stop the original request from replaying.
	flush()
	wantError(t, do(t, h, post(t, "lost-1", `{"amount":1,"currency":"EUR"}`)), 422, "idempotency_key_reused")
	if p := wantCreated(t, do(t, h, post(t, "lost-1", body1999EUR)), true); p.ID != original.ID {
		t.Fatalf("payment %s, want %s", p.ID, original.ID)
	}
	spy.wantWritten(t, 1)
}

func TestRedisLosingAClaimWhileTheWorkRunsStillCreatesOnePayment(t *testing.T) {
	t.Parallel()
	srv := testsupport.StartRedis(t)
	spy := newSpyLedger(ledger.NewMemory())
	spy.entered, spy.release = make(chan struct{}, 2), make(chan struct{})
	e := env{"REDIS_URL": srv.URL()}
	a := newHandler(t, e, handler.WithLedger(spy))
	b := newHandler(t, e, handler.WithLedger(spy))

	results := make(chan events.APIGatewayV2HTTPResponse, 2)
	send := func(h *handler.Handler) {
		req := post(t, "failover-1", body1999EUR)
		go func() {
			resp, _ := h.Handle(context.Background(), req) // Handle never returns an error
			results <- resp
		}()
	}
	send(a)
	<-spy.entered // a holds the claim
	if err := srv.NewClient().FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err) // as a failover to a replica that never saw the claim would
	}
	send(b)
	<-spy.entered // b claimed the key anew: both are about to write the payment
	close(spy.release)
	wantOnePayment(t, []events.APIGatewayV2HTTPResponse{<-results, <-results})
	spy.wantWritten(t, 1)
}

func TestRedisUnreachableGets503AndWritesNothing(t *testing.T) {
	t.Parallel()
	srv := testsupport.StartRedis(t)
	spy := newSpyLedger(ledger.NewMemory())
	logs := &logBuffer{}
	h := newHandler(t, env{"REDIS_URL": srv.URL()}, handler.WithLedger(spy), handler.WithLogOutput(logs))
	wantCreated(t, do(t, h, post(t, "down-0", body1999EUR)), false) // a warm connection
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	resp := do(t, h, post(t, "down-1", body1999EUR))
	wantError(t, resp, 503, "store_unavailable")
	if ra := resp.Headers["retry-after"]; ra != "1" {
		t.Errorf("retry-after %q, want 1", ra)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the 503 took %v", d)
	}
	if n := spy.calls.Load(); n != 1 {
		t.Fatalf("the ledger was called %d times, want only for the request before the outage", n)
	}
	if l := logs.lines(t)[1]; l["outcome"] != "error" || l["reason"] != "store_unavailable" {
		t.Fatalf("log line %v", l)
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	wantCreated(t, do(t, h, post(t, "down-1", body1999EUR)), false)
}

func TestDynamoDBLedger(t *testing.T) {
	t.Parallel()
	redisEnv := sharedEnv(t)
	endpoint := testsupport.StartDynalite(t)
	client := dynamodb.New(dynamodb.Options{
		Region: "eu-west-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
	newTable := func(t *testing.T) string {
		t.Helper()
		name := "payments-" + strings.ToLower(rand.Text())
		if err := ledger.CreateTable(context.Background(), client, name); err != nil {
			t.Fatal(err)
		}
		return name
	}
	dynamoEnv := func(table string) env {
		return redisEnv.with(
			"PAYMENTS_LEDGER", "dynamodb",
			"PAYMENTS_AUTH", "jwt",
			"PAYMENTS_TABLE", table,
			"AWS_ENDPOINT_URL_DYNAMODB", endpoint,
			"AWS_REGION", "eu-west-1",
			"AWS_ACCESS_KEY_ID", "test",
			"AWS_SECRET_ACCESS_KEY", "test",
		)
	}
	countPayments := func(t *testing.T, table string) int {
		t.Helper()
		// Each payment has one item whose pk is "pay#" + id (see ledger.DynamoDB).
		out, err := client.Scan(context.Background(), &dynamodb.ScanInput{
			TableName:                 aws.String(table),
			FilterExpression:          aws.String("begins_with(pk, :p)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "pay#"}},
			ConsistentRead:            aws.Bool(true),
		})
		if err != nil {
			t.Fatal(err)
		}
		return int(out.Count)
	}

	t.Run("settings from the environment", func(t *testing.T) {
		table := newTable(t)
		e := dynamoEnv(table)
		h := newHandler(t, e)
		first := do(t, h, as("dave", post(t, "dynamo-1", body1999EUR)))
		p := wantCreated(t, first, false)
		if got := do(t, h, as("dave", get(t, p.ID))); got.StatusCode != 200 || got.Body != first.Body {
			t.Fatalf("GET: %d %s, want 200 %s", got.StatusCode, got.Body, first.Body)
		}
		wantError(t, do(t, h, as("erin", get(t, p.ID))), 404, "not_found")

		// Another environment, and one that lost every Redis record: the same payment.
		other := newHandler(t, e)
		if again := do(t, other, as("dave", post(t, "dynamo-1", body1999EUR))); again.Body != first.Body {
			t.Fatalf("replay %s, want %s", again.Body, first.Body)
		}
		fresh := newHandler(t, e.with("IDEM_KEY_PREFIX", testsupport.UniquePrefix(t)))
		again := do(t, fresh, as("dave", post(t, "dynamo-1", body1999EUR)))
		if wantCreated(t, again, true); again.Body != first.Body {
			t.Fatalf("answer without the Redis record %s, want %s", again.Body, first.Body)
		}
		wantError(t, do(t, fresh, as("dave", post(t, "dynamo-1", `{"amount":7,"currency":"EUR"}`))), 422, "idempotency_key_reused")
		if n := countPayments(t, table); n != 1 {
			t.Fatalf("%d payments in the table, want 1", n)
		}
	})

	t.Run("the default inside Lambda", func(t *testing.T) {
		table := newTable(t)
		e := dynamoEnv(table).with("PAYMENTS_LEDGER", "", "AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001", "PAYMENTS_AUTH", "none")
		first := do(t, newHandler(t, e), post(t, "lambda-default-1", body1999EUR))
		p := wantCreated(t, first, false)
		// A memory ledger would be private to the first environment.
		if got := do(t, newHandler(t, e), get(t, p.ID)); got.Body != first.Body {
			t.Fatalf("another environment reads %d %s", got.StatusCode, got.Body)
		}
		if n := countPayments(t, table); n != 1 {
			t.Fatalf("%d payments in the table, want 1", n)
		}
	})

	t.Run("concurrent environments", func(t *testing.T) {
		table := newTable(t)
		e := dynamoEnv(table)
		var handlers []*handler.Handler
		for range 5 { // each with its own Redis and DynamoDB clients
			handlers = append(handlers, newHandler(t, e))
		}
		finals, conflicts := race(t, handlers, 4, func() events.APIGatewayV2HTTPRequest {
			return as("frank", post(t, "dynamo-concurrent-1", body1999EUR))
		})
		if len(finals) != 20 {
			t.Fatalf("%d final answers, want 20", len(finals))
		}
		id := wantOnePayment(t, finals)
		if n := countPayments(t, table); n != 1 {
			t.Fatalf("%d payments in the table, want 1 (%s)", n, id)
		}
		t.Logf("%d answers were 409 before their replay", conflicts)
	})
}

func TestSettingsErrorsNameTheVariable(t *testing.T) {
	// Not parallel: it points the AWS SDK's own configuration files at nothing.
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	const runtimeAPI = "AWS_LAMBDA_RUNTIME_API"
	lambda := env{runtimeAPI: "127.0.0.1:9001", "REDIS_URL": "redis://127.0.0.1:6379", "PAYMENTS_AUTH": "iam"}
	dynamo := env{"PAYMENTS_LEDGER": "dynamodb", "PAYMENTS_TABLE": "payments", "AWS_REGION": "eu-west-1"}
	for _, tt := range []struct {
		name string
		env  env
		want string
	}{
		{"inside Lambda without a table", lambda, "PAYMENTS_TABLE"},
		{"dynamodb chosen without a table", env{"PAYMENTS_LEDGER": "dynamodb"}, "PAYMENTS_TABLE"},
		{"unknown ledger", env{"PAYMENTS_LEDGER": "postgres"}, "PAYMENTS_LEDGER"},
		{"max amount not a number", env{"PAYMENTS_MAX_AMOUNT": "lots"}, "PAYMENTS_MAX_AMOUNT"},
		{"max amount zero", env{"PAYMENTS_MAX_AMOUNT": "0"}, "PAYMENTS_MAX_AMOUNT"},
		{"max amount beyond 2^53", env{"PAYMENTS_MAX_AMOUNT": "9007199254740992"}, "PAYMENTS_MAX_AMOUNT"},
		{"log level", env{"LOG_LEVEL": "loud"}, "LOG_LEVEL"},
		{"result TTL", env{"IDEM_RESULT_TTL": "forever"}, "IDEM_RESULT_TTL"},
		{"lock TTL", env{"IDEM_LOCK_TTL": "-1s"}, "IDEM_LOCK_TTL"},
		{"key prefix", env{"IDEM_KEY_PREFIX": "a {b}"}, "IDEM_KEY_PREFIX"},
		{"inside Lambda without Redis", env{runtimeAPI: "127.0.0.1:9001", "PAYMENTS_LEDGER": "memory", "PAYMENTS_AUTH": "iam"}, "REDIS_URL"},
		{"outside Lambda without Redis", env{}, "REDIS_URL"},
		{"inside Lambda without PAYMENTS_AUTH", env{runtimeAPI: "127.0.0.1:9001", "PAYMENTS_LEDGER": "memory", "REDIS_URL": "redis://127.0.0.1:6379"}, "PAYMENTS_AUTH"},
		{"unknown authorization", env{"PAYMENTS_AUTH": "basic"}, "PAYMENTS_AUTH"},
		{"Redis URL", env{"REDIS_URL": "http://cache:6379"}, "REDIS_URL"},
		{"DynamoDB endpoint", dynamo.with("AWS_ENDPOINT_URL_DYNAMODB", "localhost:8000"), "AWS_ENDPOINT_URL_DYNAMODB"},
		{"DynamoDB without a region", dynamo.with("AWS_REGION", ""), "AWS_REGION"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := handler.New(context.Background(), tt.env.get, handler.WithLogOutput(&logBuffer{}))
			if err == nil {
				h.Close()
				t.Fatal("New accepted the settings")
			}
			var se *setting.Error
			if !errors.As(err, &se) || se.Var != tt.want || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v (%T), want a *setting.Error naming %s", err, err, tt.want)
			}
		})
	}
}

func TestMemoryLedgerInsideLambdaOnlyWhenSetExplicitly(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	e := sharedEnv(t).with("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001", "PAYMENTS_LEDGER", "memory", "PAYMENTS_AUTH", "none")
	h := newHandler(t, e, handler.WithLogOutput(logs))
	wantCreated(t, do(t, h, post(t, "memory-1", body1999EUR)), false)
	if l := logs.lines(t)[0]; l["level"] != "WARN" || l["variable"] != "PAYMENTS_LEDGER" {
		t.Fatalf("no warning about the memory ledger at init: %v", l)
	}
}

func TestOutsideLambdaWithOnlyRedisURLRunsOnTheMemoryLedger(t *testing.T) {
	t.Parallel()
	h := newHandler(t, sharedEnv(t))
	first := do(t, h, post(t, "memory-only-1", body1999EUR))
	p := wantCreated(t, first, false)
	if again := do(t, h, post(t, "memory-only-1", body1999EUR)); again.Body != first.Body {
		t.Fatalf("replay %s", again.Body)
	}
	if got := do(t, h, get(t, p.ID)); got.StatusCode != 200 {
		t.Fatalf("GET %d", got.StatusCode)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(fmt.Errorf("second Close: %w", err))
	}
}
