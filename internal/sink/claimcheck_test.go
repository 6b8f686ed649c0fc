package sink

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/idemlambda/idem/internal/testsupport"
)

// largeEvent is testEvent with a body of about n bytes.
func largeEvent(n int) Event {
	e := testEvent()
	e.Provider, e.ID, e.Type = "github", "sha256:"+strings.Repeat("ab", 32), "push"
	e.Body = []byte(`{"ref":"refs/heads/main","blob":"` + strings.Repeat("x", n) + `"}`)
	return e
}

// sqsSinkWithStore builds the sqs sink as a function does, with store for large payloads.
func sqsSinkWithStore(t *testing.T, f *testsupport.FakeAWS, queueURL string, store PayloadStore) Sink {
	t.Helper()
	testsupport.IsolateAWS(t)
	t.Setenv("AWS_ENDPOINT_URL_SQS", f.URL)
	s, err := FromEnv(context.Background(), envMap(map[string]string{EnvSink: "sqs", EnvQueueURL: queueURL}), nil, store)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// decodeEnvelope decodes a message body, failing t unless it is an envelope.
func decodeEnvelope(t *testing.T, body string) Envelope {
	t.Helper()
	var env Envelope
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatalf("message body is not an envelope: %v", err)
	}
	return env
}

func TestSQSKeepsAPayloadOverTheMessageLimitInTheStoreAndSendsItsReference(t *testing.T) {
	f := newFakeSQS(t, http.StatusOK)
	store := NewMemoryStore("payloads-test")
	s := sqsSinkWithStore(t, f, "https://sqs.us-east-1.amazonaws.com/123456789012/webhooks.fifo", store)
	e := largeEvent(2 << 20)
	// A retried send writes the same object again and sends the same reference.
	reqs := sendAll[sqsInput](t, s, f, e, e)

	if keys := store.Keys(); len(keys) != 1 || keys[0] != PayloadKey(e.Provider, e.ID) {
		t.Fatalf("store holds %q, want the one key %q", keys, PayloadKey(e.Provider, e.ID))
	}
	sum := sha256.Sum256(e.Body)
	for i, r := range reqs {
		if n := len(r.Input.MessageBody); n > DefaultSQSMaxMessageBytes {
			t.Fatalf("message %d is %d bytes", i, n)
		}
		env := decodeEnvelope(t, r.Input.MessageBody)
		want := PayloadRef{Bucket: "payloads-test", Key: PayloadKey(e.Provider, e.ID), Bytes: int64(len(e.Body)), SHA256: hex.EncodeToString(sum[:])}
		if string(env.Payload) != "null" || env.PayloadRef == nil || *env.PayloadRef != want {
			t.Fatalf("message %d: payload %.40q, reference %+v, want %+v", i, env.Payload, env.PayloadRef, want)
		}
		if env.Provider != e.Provider || env.ID != e.ID || env.Type != e.Type || r.Input.MessageDeduplicationId != "github:"+e.ID {
			t.Errorf("message %d: metadata %+v, dedup id %q", i, env.Metadata, r.Input.MessageDeduplicationId)
		}
		if err := env.Resolve(context.Background(), store); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(env.Payload, e.Body) || env.PayloadRef != nil {
			t.Errorf("message %d resolved to %d bytes (reference %v), want the %d sent", i, len(env.Payload), env.PayloadRef, len(e.Body))
		}
	}
}

func TestSQSSendsAPayloadUnderTheLimitInlineAndStoresNothing(t *testing.T) {
	f := newFakeSQS(t, http.StatusOK)
	store := NewMemoryStore("payloads-test")
	s := sqsSinkWithStore(t, f, "https://sqs.us-east-1.amazonaws.com/123456789012/webhooks", store)
	e := largeEvent(200 << 10)
	reqs := sendAll[sqsInput](t, s, f, e)
	env := decodeEnvelope(t, reqs[0].Input.MessageBody)
	if env.PayloadRef != nil || len(env.Payload) == 0 || len(store.Keys()) != 0 {
		t.Errorf("reference %+v, %d payload bytes inline, store %q", env.PayloadRef, len(env.Payload), store.Keys())
	}
}

func TestEventBridgeKeepsAnEntryOverItsLimitInTheStore(t *testing.T) {
	f := newFakeEventBridge(t, `{"FailedEntryCount":0,"Entries":[{"EventId":"11710aed-b79e-4468-a20b-bb3c0c3b4860"}]}`)
	testsupport.IsolateAWS(t)
	t.Setenv("AWS_ENDPOINT_URL_EVENTBRIDGE", f.URL)
	store := NewMemoryStore("payloads-test")
	s, err := FromEnv(context.Background(), envMap(map[string]string{EnvSink: "eventbridge", EnvEventBus: "webhooks-bus"}), nil, store)
	if err != nil {
		t.Fatal(err)
	}
	// Just over the limit once the envelope's metadata is counted: still too large.
	e := largeEvent(EventBridgeMaxEntryBytes - 300)
	reqs := sendAll[putEventsInput](t, s, f, e)
	entry := reqs[0].Input.Entries[0]
	env := decodeEnvelope(t, entry.Detail)
	if env.PayloadRef == nil || len(entry.Detail) > 4096 {
		t.Fatalf("detail of %d bytes, reference %+v", len(entry.Detail), env.PayloadRef)
	}
	if err := env.Resolve(context.Background(), store); err != nil || !bytes.Equal(env.Payload, e.Body) {
		t.Errorf("resolved %d bytes, err %v", len(env.Payload), err)
	}

	// Without a store the same event fails, before any request, as too large.
	f2 := newFakeEventBridge(t, `{"FailedEntryCount":0}`)
	err = eventBridgeSinkFromEnv(t, f2).Send(context.Background(), e)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrNoPayloadStore) || len(f2.Requests()) != 0 {
		t.Errorf("without a store: err %v, %d requests", err, len(f2.Requests()))
	}
}

func TestResolveRefusesAReferenceThatIsNotTheEnvelopes(t *testing.T) {
	store := NewMemoryStore("payloads-test")
	e := largeEvent(1000)
	ref, err := claimCheck{payloads: store}.offload(context.Background(), e, 2000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	envelope := func(edit func(*Envelope)) Envelope {
		r := *ref
		env := Envelope{Metadata: metaOf(e), PayloadRef: &r}
		edit(&env)
		return env
	}
	for name, tc := range map[string]struct {
		env  Envelope
		want error
	}{
		"another bucket":   {envelope(func(v *Envelope) { v.PayloadRef.Bucket = "other" }), ErrPayloadUnavailable},
		"another event":    {envelope(func(v *Envelope) { v.ID = "sha256:" + strings.Repeat("cd", 32) }), ErrPayloadUnavailable},
		"another key":      {envelope(func(v *Envelope) { v.PayloadRef.Key = "stripe/x.json" }), ErrPayloadUnavailable},
		"another digest":   {envelope(func(v *Envelope) { v.PayloadRef.SHA256 = strings.Repeat("0", 64) }), ErrPayloadUnavailable},
		"shorter":          {envelope(func(v *Envelope) { v.PayloadRef.Bytes-- }), ErrPayloadUnavailable},
		"negative length":  {envelope(func(v *Envelope) { v.PayloadRef.Bytes = -1 }), ErrPayloadUnavailable},
		"object not there": {envelope(func(v *Envelope) { v.Provider = "gitlab"; v.PayloadRef.Key = PayloadKey("gitlab", v.ID) }), ErrPayloadUnavailable},
	} {
		t.Run(name, func(t *testing.T) {
			env := tc.env
			if err := env.Resolve(context.Background(), store); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			if env.Payload != nil {
				t.Errorf("payload set to %d bytes", len(env.Payload))
			}
		})
	}
	env := envelope(func(*Envelope) {})
	if err := env.Resolve(context.Background(), nil); !errors.Is(err, ErrNoPayloadStore) {
		t.Errorf("without a store: %v", err)
	}
}

// s3Request is what the recording server saw of one request.
type s3Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// TestS3StoreRequestShape checks the requests S3Store makes through the AWS SDK, built by
// PayloadStoreFromEnv with AWS_ENDPOINT_URL_S3, against a server that records them and answers
// as S3 documents. It is a test of the requests' shape (bucket, key, checksum, content type),
// not of S3: it cannot tell whether S3 would accept them.
func TestS3StoreRequestShape(t *testing.T) {
	stored := []byte(`{"ref":"refs/heads/main"}`)
	seen := recordingS3(t, stored)
	store, err := PayloadStoreFromEnv(context.Background(), envMap(map[string]string{EnvPayloadBucket: "idem-payloads-123"}))
	if err != nil || store == nil {
		t.Fatalf("store %v, err %v", store, err)
	}
	key := PayloadKey("github", "sha256:"+strings.Repeat("ab", 32))
	if err := store.Put(context.Background(), key, stored); err != nil {
		t.Fatal(err)
	}
	got, err := store.Get(context.Background(), key, int64(len(stored)))
	if err != nil || !bytes.Equal(got, stored) {
		t.Fatalf("Get = %q, %v", got, err)
	}
	if _, err := store.Get(context.Background(), key, int64(len(stored)-1)); err == nil {
		t.Error("Get of an object over maxBytes succeeded")
	}

	requests := seen()
	if len(requests) != 3 {
		t.Fatalf("server saw %d requests, want 3", len(requests))
	}
	put, get := requests[0], requests[1]
	wantPath := "/idem-payloads-123/" + key
	checkPutObject(t, put, wantPath, stored)
	if get.Method != http.MethodGet || get.Path != wantPath {
		t.Errorf("GetObject: %s %s", get.Method, get.Path)
	}

	if store, err := PayloadStoreFromEnv(context.Background(), envMap(nil)); store != nil || err != nil {
		t.Errorf("without %s: store %v, err %v", EnvPayloadBucket, store, err)
	}
}

// recordingS3 starts a server that records every request and answers as S3 documents, GET
// with stored, and points AWS_ENDPOINT_URL_S3 at it (with the rest of the AWS environment
// isolated). seen returns the requests so far.
func recordingS3(t *testing.T, stored []byte) (seen func() []s3Request) {
	t.Helper()
	var mu sync.Mutex
	var requests []s3Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		requests = append(requests, s3Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		mu.Unlock()
		w.Header().Set("ETag", `"6805f2cfc46c0f04559748bb039d69ae"`)
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(stored)))
			_, _ = w.Write(stored)
		}
	}))
	t.Cleanup(srv.Close)
	testsupport.IsolateAWS(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.URL)
	return func() []s3Request {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(requests)
	}
}

// checkPutObject fails t unless put is a signed PutObject of body at path, with its content
// type, length and SHA-256 checksum.
func checkPutObject(t *testing.T, put s3Request, path string, body []byte) {
	t.Helper()
	sum := sha256.Sum256(body)
	if put.Method != http.MethodPut || put.Path != path || !bytes.Equal(put.Body, body) ||
		put.Header.Get("Content-Type") != "application/json" ||
		put.Header.Get("X-Amz-Checksum-Sha256") != base64.StdEncoding.EncodeToString(sum[:]) ||
		put.Header.Get("Content-Length") != strconv.Itoa(len(body)) ||
		!strings.HasPrefix(put.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		t.Errorf("PutObject: %s %s, headers %v, body %q", put.Method, put.Path, put.Header, put.Body)
	}
}
