package faults

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/pkg/idem"
)

// The paused owner: a child process (this test binary, run again with pausedChildEnv set) that
// claims keys and is stopped with SIGSTOP inside their work, past their claims, while the test
// takes the keys over; after SIGCONT its works try their side effects. Its protocol, one line
// each way:
//
//	test -> child   round <r> <n>     claim keys paused_<r>_<i>, i < n, each in its own goroutine
//	child -> test   claimed <i> <t>   key i is claimed with token t; its work waits for "go"
//	child -> test   unclaimed <i> <k> key i's work did not run (outcome k: a claim answered too
//	                                  late on a busy host); the trial does not count
//	test -> child   go                (sent while the child is stopped, read once it resumes)
//	child -> test   result <i> sent=<n> plain=<ok|done> store=<status> ledger=<status> kind=<k>
//	child -> test   done <r>
//
// After "go" each work first reads a plain context.WithDeadline made at the same deadline
// (plain=ok: its timer had not fired yet, the check the work's context had before), then sends
// the event through the real log sink with its work context (sent counts lines the sink wrote),
// then writes to the test's fenced store and ledger with its token and no check of its own: a
// write already in flight when the process stopped, which only the token can refuse.
const (
	pausedChildEnv = "IDEM_FAULTS_PAUSED_CHILD"
	// pausedLockTTL is the child's claim TTL: its works' contexts end 500 ms before, 100 ms in.
	pausedLockTTL = 600 * time.Millisecond
)

// countingWriter counts the lines written to it: the events the log sink sent.
type countingWriter struct{ n atomic.Int64 }

func (w *countingWriter) Write(b []byte) (int, error) {
	w.n.Add(int64(strings.Count(string(b), "\n")))
	return len(b), nil
}

// runPausedChild is the child's main: the guard on the Redis named by its environment
// (PAUSED_REDIS_ADDRS, comma-separated; PAUSED_REDIS_CLUSTER=true for a cluster), the store
// at PAUSED_STORE_URL, the protocol on standard input and output.
func runPausedChild() int {
	addrs := strings.Split(os.Getenv("PAUSED_REDIS_ADDRS"), ",")
	var client idem.Client
	if os.Getenv("PAUSED_REDIS_CLUSTER") == "true" {
		client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	} else {
		client = redis.NewClient(&redis.Options{Addr: addrs[0]})
	}
	opts := []idem.Option{idem.WithPrefix(os.Getenv("PAUSED_PREFIX")), idem.WithLockTTL(pausedLockTTL)}
	if os.Getenv("PAUSED_FENCING") == "true" {
		opts = append(opts, idem.WithFencing())
	}
	g, err := idem.New(client, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	store := os.Getenv("PAUSED_STORE_URL")
	var dyn *ledger.DynamoDB
	if endpoint := os.Getenv("PAUSED_DYNAMO_ENDPOINT"); endpoint != "" {
		dyn = ledger.NewDynamoDB(dynamoClient(endpoint), os.Getenv("PAUSED_DYNAMO_TABLE"))
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var r, n int
		if _, err := fmt.Sscanf(in.Text(), "round %d %d", &r, &n); err != nil {
			fmt.Fprintln(os.Stderr, "child: bad line:", in.Text())
			return 2
		}
		resume := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { pausedWork(g, store, dyn, r, i, resume, say) })
		}
		if !in.Scan() || in.Text() != "go" {
			fmt.Fprintln(os.Stderr, "child: want go")
			return 2
		}
		close(resume)
		wg.Wait()
		say("done %d", r)
	}
	return 0
}

// pausedWork is one key's claim and work in the child.
func pausedWork(g *idem.Guard, store string, dyn *ledger.DynamoDB, r, i int, resume <-chan struct{}, say func(string, ...any)) {
	key := pausedKey(r, i)
	var res string
	ran := false
	out, _ := g.Do(context.Background(), idem.Key{Scope: "paused", ID: key}, idem.Fingerprint{}, func(ctx context.Context) (idem.Result, error) {
		fence, _ := idem.FenceFrom(ctx)
		deadline, _ := ctx.Deadline()
		plain, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		ran = true
		say("claimed %d %d", i, fence)
		<-resume
		plainState := "ok"
		if plain.Err() != nil {
			plainState = "done"
		}
		var w countingWriter
		_ = sink.NewLog(&w).Send(ctx, sink.Event{Provider: "stripe", ID: key, Body: []byte(`{}`)})
		storeStatus := post(store+"/store", key, fence)
		ledgerStatus := post(store+"/ledger", key, fence)
		// The DynamoDB ledger, twice: with the work's context (the ledger's own check of the
		// deadline), then with only the token, as a write already in flight.
		dynLive, dynFlight := "none", "none"
		if dyn != nil {
			dynLive = paymentStatus(dyn.Create(ctx, key, dynamoPayment("pay_child_live_"+key)))
			dynFlight = paymentStatus(dyn.Create(idem.ContextWithFence(context.Background(), fence), key, dynamoPayment("pay_child_"+key)))
		}
		res = fmt.Sprintf("sent=%d plain=%s store=%s ledger=%s dynamolive=%s dynamo=%s", w.n.Load(), plainState, storeStatus, ledgerStatus, dynLive, dynFlight)
		return idem.Result{Status: 200}, nil
	})
	if !ran {
		say("unclaimed %d %s", i, out.Kind)
		return
	}
	say("result %d %s kind=%s", i, res, out.Kind)
}

func pausedKey(r, i int) string { return fmt.Sprintf("paused_%d_%d", r, i) }

// dynamoClient returns a DynamoDB client for the dynalite server at endpoint.
func dynamoClient(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{BaseEndpoint: aws.String(endpoint), Region: "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}

func dynamoPayment(id string) ledger.Payment {
	return ledger.Payment{ID: id, Principal: "p", Amount: 100, Currency: "EUR", Status: "succeeded"}
}

// paymentStatus names the answer of a ledger's Create.
func paymentStatus(_ ledger.Payment, err error) string {
	switch {
	case err == nil:
		return "created"
	case errors.Is(err, ledger.ErrFenced):
		return "fenced"
	case errors.Is(err, ledger.ErrExists):
		return "exists"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	return "error"
}

// post writes key with fence to the test's store endpoint, and returns its answer.
func post(endpoint, key string, fence uint64) string {
	resp, err := http.PostForm(endpoint, url.Values{"key": {key}, "fence": {strconv.FormatUint(fence, 10)}})
	if err != nil {
		return "error"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b))
}
