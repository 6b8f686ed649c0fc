package deploytest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"

	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	consumerfn "github.com/idemlambda/idem/internal/functions/consumer/handler"
	webhookfn "github.com/idemlambda/idem/internal/functions/webhook/handler"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/internal/testsupport"
)

var update = flag.Bool("update", false, "rewrite bench/results/record-sizes.json from a measurement")

const recordSizesPath = "../../bench/results/record-sizes.json"

// Bounds on the bytes one delivery keeps in the cache, and the drift between the committed
// measurement and a new one that is still the same (allocator rounding across server versions).
const (
	maxWebhookBytes  = 300
	maxConsumerBytes = 250
	sizeTolerance    = 16
)

// recordSizes is bench/results/record-sizes.json: what one Stripe delivery leaves in the cache,
// key by key, as MEMORY USAGE reports it on a real redis-server.
type recordSizes struct {
	Note     string       `json:"note"`
	Server   string       `json:"server"`
	Webhook  storedRecord `json:"webhook"`
	Consumer storedRecord `json:"consumer"`
}

type storedRecord struct {
	Keys  map[string]int64 `json:"keys"` // key (its scope and the hash shortened) -> MEMORY USAGE bytes
	Bytes int64            `json:"bytes"`
}

// The recorded Stripe delivery of the webhook function's tests, and how it was signed.
const (
	stripeDelivery = "../functions/webhook/handler/testdata/deliveries/stripe.json"
	stripeSecret   = "test-stripe-secret"
	queueURL       = "https://sqs.eu-west-1.amazonaws.com/123456789012/idem-events.fifo"
)

var stripeSignedAt = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// measureKeys returns MEMORY USAGE of every key of the server not in before, by key.
func measureKeys(t *testing.T, c *redis.Client, before map[string]int64) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	out := map[string]int64{}
	iter := c.Scan(ctx, 0, "*", 100).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if _, ok := before[k]; ok {
			continue
		}
		n, err := c.MemoryUsage(ctx, k, 0).Result()
		if err != nil {
			t.Fatalf("MEMORY USAGE %s: %v", k, err)
		}
		out[k] = n
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func record(keys map[string]int64) storedRecord {
	r := storedRecord{Keys: map[string]int64{}}
	for k, n := range keys {
		if i := strings.Index(k, ":{"); i >= 0 && len(k) > i+24 {
			k = k[:i+24] + "...}" // the scope and the start of the id's hash
		}
		r.Keys[k] = n
		r.Bytes += n
	}
	return r
}

// measureRecords stores one recorded Stripe delivery as the functions do, through the webhook
// function's handler (claim, forward to the queue, result) and then the consumer's (its record
// of the forwarded event), on a redis-server of its own with the template's key prefix, and
// measures every key each one leaves.
func measureRecords(t *testing.T) recordSizes {
	t.Helper()
	srv := testsupport.StartRedis(t)
	c := srv.NewClient()
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()

	raw, err := os.ReadFile(stripeDelivery)
	if err != nil {
		t.Fatal(err)
	}
	var req events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	sent := &testsupport.SentMessages{}
	env := testsupport.Env(map[string]string{
		"WEBHOOK_PROVIDER": "stripe", "WEBHOOK_SECRET": stripeSecret, "WEBHOOK_SINK": "sqs",
		"WEBHOOK_QUEUE_URL": queueURL, "IDEM_KEY_PREFIX": "idem", "REDIS_URL": srv.URL(),
	})
	var logs bytes.Buffer
	wh, err := webhookfn.New(ctx, env, webhookfn.WithRedis(c), webhookfn.WithSink(sink.NewSQS(sent, queueURL)),
		webhookfn.WithClock(func() time.Time { return stripeSignedAt }), webhookfn.WithLogOutput(&logs))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := wh.Handle(ctx, req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the recorded Stripe delivery: %d %v\n%s", resp.StatusCode, err, logs.Bytes())
	}
	webhookKeys := measureKeys(t, c, nil)

	cons, err := consumerfn.New(ctx, testsupport.Env(map[string]string{"IDEM_KEY_PREFIX": "idem", "REDIS_URL": srv.URL()}),
		consumerfn.WithRedis(c), consumerfn.WithLogOutput(&logs))
	if err != nil {
		t.Fatal(err)
	}
	ins := sent.Inputs()
	if len(ins) != 1 {
		t.Fatalf("%d messages forwarded, want 1", len(ins))
	}
	out, err := cons.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{consumerfn.Delivered(ins[0], "msg-1", 1)}})
	if err != nil || len(out.BatchItemFailures) != 0 {
		t.Fatalf("consumer: %v %v\n%s", out, err, logs.Bytes())
	}
	consumerKeys := measureKeys(t, c, webhookKeys)
	if len(webhookKeys) == 0 || len(consumerKeys) == 0 {
		t.Fatalf("keys: webhook %v, consumer %v", webhookKeys, consumerKeys)
	}
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	version := "redis-server"
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
			version = "redis-server " + v
		}
	}
	return recordSizes{
		Note:     "Generated by go test ./internal/deploytest -run TestWhatADeliveryStores -update: MEMORY USAGE of each key one recorded Stripe delivery leaves (webhook function, then consumer), key prefix idem.",
		Server:   version,
		Webhook:  record(webhookKeys),
		Consumer: record(consumerKeys),
	}
}

// One Stripe delivery keeps at most 300 bytes in the cache for the webhook function and 250 for
// the consumer, and bench/results/record-sizes.json, which the cost table reads, is what a
// measurement gives.
func TestWhatADeliveryStores(t *testing.T) {
	got := measureRecords(t)
	t.Logf("%s: webhook %d bytes %v, consumer %d bytes %v", got.Server, got.Webhook.Bytes, got.Webhook.Keys, got.Consumer.Bytes, got.Consumer.Keys)
	if got.Webhook.Bytes > maxWebhookBytes {
		t.Errorf("a Stripe delivery keeps %d bytes for the webhook function, over %d", got.Webhook.Bytes, maxWebhookBytes)
	}
	if got.Consumer.Bytes > maxConsumerBytes {
		t.Errorf("a Stripe delivery keeps %d bytes for the consumer, over %d", got.Consumer.Bytes, maxConsumerBytes)
	}
	if *update {
		b, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(recordSizesPath, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := readRecordSizes(t)
	for _, c := range []struct {
		name      string
		want, got storedRecord
	}{{"webhook", want.Webhook, got.Webhook}, {"consumer", want.Consumer, got.Consumer}} {
		if d := c.got.Bytes - c.want.Bytes; d > sizeTolerance || d < -sizeTolerance {
			t.Errorf("%s: %d bytes measured, %s says %d: run with -update", c.name, c.got.Bytes, recordSizesPath, c.want.Bytes)
		}
		if g, w := sortedKeys(c.got.Keys), sortedKeys(c.want.Keys); !slices.Equal(g, w) {
			t.Errorf("%s: keys %v, %s lists %v", c.name, g, recordSizesPath, w)
		}
	}
}

func readRecordSizes(t *testing.T) recordSizes {
	t.Helper()
	b, err := os.ReadFile(recordSizesPath)
	if err != nil {
		t.Fatalf("%v (go test ./internal/deploytest -run TestWhatADeliveryStores -update writes it)", err)
	}
	var r recordSizes
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: %v", recordSizesPath, err)
	}
	if r.Webhook.Bytes <= 0 || r.Consumer.Bytes <= 0 {
		t.Fatalf("%s holds no sizes", recordSizesPath)
	}
	return r
}

func sortedKeys(m map[string]int64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
