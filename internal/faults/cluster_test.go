//go:build unix

package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	payments "github.com/idemlambda/idem/internal/functions/payments/handler"
	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/internal/testsupport/webhookfleet"
)

// countingLedger is the payments ledger shared by every environment (as one DynamoDB table is),
// counting per scoped key the payments it created and the retries it answered with an existing one.
type countingLedger struct {
	ledger.Ledger
	mu      sync.Mutex
	created map[string]int
	existed map[string]int
}

func newCountingLedger() *countingLedger {
	return &countingLedger{Ledger: ledger.NewMemory(), created: map[string]int{}, existed: map[string]int{}}
}

// Create implements ledger.Ledger, counting its results.
func (l *countingLedger) Create(ctx context.Context, scopedKey string, p ledger.Payment) (ledger.Payment, error) {
	stored, err := l.Ledger.Create(ctx, scopedKey, p)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.created[scopedKey]++
	case errors.Is(err, ledger.ErrExists):
		l.existed[scopedKey]++
	}
	return stored, err
}

// payAttempt is one POST /payments and what it answered.
type payAttempt struct {
	key        string
	start, end time.Time
	status     int
	paymentID  string
	replayed   bool
}

// cutReplicationLink closes the master's connections to its replicas.
func cutReplicationLink(master string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m := redis.NewClient(&redis.Options{Addr: master})
	defer m.Close()
	return m.ClientKillByFilter(ctx, "TYPE", "replica").Err()
}

// replicaOf returns the process id of the replica of the master at addr.
func replicaOf(addr string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m := redis.NewClient(&redis.Options{Addr: addr})
	defer m.Close()
	info, err := m.Info(ctx, "replication").Result()
	if err != nil {
		return 0, err
	}
	var replica string
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "slave0:"); ok {
			var ip, port string
			for _, f := range strings.Split(v, ",") {
				if k, val, ok := strings.Cut(f, "="); ok {
					switch k {
					case "ip":
						ip = val
					case "port":
						port = val
					}
				}
			}
			replica = net.JoinHostPort(ip, port)
		}
	}
	if replica == "" {
		return 0, fmt.Errorf("no replica in INFO replication of %s", addr)
	}
	r := redis.NewClient(&redis.Options{Addr: replica})
	defer r.Close()
	server, err := r.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(server, "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("no process_id in INFO server of %s", replica)
}

// TestClusterMasterKilledUnderLoad runs a Redis Cluster of 3 masters with 1 replica each,
// sends webhook deliveries and payment requests (each 3 times at once, every copy retried until
// acknowledged) and kills one master under that load, its replica cut off for the half second
// before so that it misses the master's last writes. Redis replicates asynchronously, so a
// claim or result written to the killed master and not yet copied to its replica is lost when the
// replica takes over, and a retry of that webhook event executes it again: the test measures how
// often, and how long the failover window lasts. Payments stay exactly once whatever Redis
// loses: the ledger's conditional write holds one payment per key, and every response for a key
// carries that payment.
func TestClusterMasterKilledUnderLoad(t *testing.T) {
	const (
		environments = 4
		copies       = 3
		invocation   = 3 * time.Second        // claims live 5s
		retryEvery   = 200 * time.Millisecond // the providers' first retry; they back off from there
		maxRetry     = 3 * time.Second
		warm         = 2 * time.Second // load before the kill
		after        = 2 * time.Second // load after the cluster is ready again
		eventEvery   = 20 * time.Millisecond
		paymentEvery = 40 * time.Millisecond
		replicaLag   = 500 * time.Millisecond // writes the promoted replica never receives
	)
	cl := testsupport.StartCluster(t, 3, 1)
	redisURL := clusterURL(cl)
	vars := map[string]string{"REDIS_URL": redisURL, "REDIS_CLUSTER": "true"}
	reloadEvery := clusterStateReloadInterval(t, redisURL)
	giveUp := 30*time.Second + reloadEvery // failover, then at most one reload interval

	rec := &recorder{}
	hooks := newFleet(t, rec, invocation)
	hooks.MaxRetryEvery = maxRetry
	for range environments {
		hooks.add(vars)
	}
	led := newCountingLedger()
	pays := newPaymentsFleet(t, environments, vars, led, invocation)

	// The load: new webhook events and payment keys at a steady rate until stopped, every copy
	// retried by its "provider" until acknowledged.
	stop := make(chan struct{})
	var chains sync.WaitGroup
	var unacked atomic.Int32
	var numEvents, numPayments atomic.Int32
	var generators sync.WaitGroup
	// generate makes, every period until stop, a new item i: it counts it in n, and runs the
	// delivery that newItem returns for it once per copy c, the copies at once.
	generate := func(every time.Duration, n *atomic.Int32, newItem func(i int) (deliver func(c int))) {
		generators.Go(func() {
			i := 0
			everyUntil(stop, every, func() {
				n.Add(1)
				deliver := newItem(i)
				for c := range copies {
					chains.Go(func() { deliver(c) })
				}
				i++
			})
		})
	}
	generate(eventEvery, &numEvents, func(i int) func(c int) {
		ev := newEvent(fmt.Sprintf("evt_cluster_%d", i))
		return func(c int) {
			if !hooks.Deliver(context.Background(), (i+c)%environments, ev, retryEvery, giveUp) {
				unacked.Add(1)
			}
		}
	})
	generate(paymentEvery, &numPayments, func(i int) func(c int) {
		key := fmt.Sprintf("order-%d", i)
		return func(c int) {
			if !pays.payUntilCreated(i+c, key, retryEvery, maxRetry, giveUp) {
				unacked.Add(1)
			}
		}
	})

	time.Sleep(warm)
	killed, killedAt, err := killMasterBehindItsReplica(t, cl, replicaLag)
	if err != nil {
		close(stop)
		t.Fatal(err)
	}
	readyErr := cl.WaitReady(30 * time.Second)
	readyAt := time.Now()
	time.Sleep(after)
	close(stop)
	generators.Wait()
	chains.Wait()
	if readyErr != nil {
		t.Fatalf("cluster did not recover after killing %s: %v", killed, readyErr)
	}
	if n := unacked.Load(); n > 0 {
		t.Errorf("%d deliveries or payment requests were never acknowledged: no full recovery", n)
	}

	// Payments: one payment per key in the ledger, and every 201 for a key carries it.
	payAttempts := pays.snapshot()
	paymentsCreated, existed := checkOnePaymentPerKey(t, led, payAttempts)
	if paymentsCreated != int(numPayments.Load()) {
		t.Errorf("%d payments in the ledger for %d keys", paymentsCreated, numPayments.Load())
	}

	// Webhooks: measured. Every execution ran under a claim the guard had taken; a duplicate
	// means Redis lost the record (or the result could not be stored).
	attempts, executions := rec.snapshot()
	perEvent := byEvent(executions)
	twice, twiceNotStored := countExecutedTwice(perEvent, hooks.NotStored())
	if len(perEvent) != int(numEvents.Load()) {
		t.Errorf("%d of %d webhook events executed", len(perEvent), numEvents.Load())
	}

	// The failover window: from the kill to the last failed answer.
	w := failoverWindow{killedAt: killedAt}
	for _, a := range attempts {
		if w.note(a.Status, a.End) {
			w.hookErrs++
		}
	}
	for _, a := range payAttempts {
		if w.note(a.status, a.end) {
			w.payErrs++
		}
	}
	t.Logf("killed master %s under load, its replica cut off for the last %s before (writes it never got); cluster ready again (every slot on a running master) %s after the kill",
		killed, replicaLag, readyAt.Sub(killedAt).Round(time.Millisecond))
	t.Logf("failover window seen by clients: errors from %s to %s after the kill (%d webhook and %d payment answers 5xx); besides reloading on errors without a reply, the clients reload the cluster layout every %s",
		w.firstErr.Sub(killedAt).Round(time.Millisecond), w.length().Round(time.Millisecond), w.hookErrs, w.payErrs, reloadEvery)
	t.Logf("webhooks: %d events x %d copies: %s; events executed twice: %d of %d (%d with a result not stored, %d because the failover lost the record)",
		numEvents.Load(), copies, webhookfleet.FormatCounts(webhookfleet.Tally(attempts)), twice, len(perEvent), twiceNotStored, twice-twiceNotStored)
	t.Logf("payments: %d keys x %d copies: %s; ledger: %d payments, 1 per key; %d retries found their payment already in the ledger",
		numPayments.Load(), copies, webhookfleet.FormatCounts(tallyPayments(payAttempts)), paymentsCreated, existed)
}

// clusterURL is the REDIS_URL of the cluster cl: its first node, and the others as addr
// parameters.
func clusterURL(cl *testsupport.Cluster) string {
	addrs := cl.Addrs()
	q := url.Values{}
	for _, a := range addrs[1:] {
		q.Add("addr", a)
	}
	return "redis://" + addrs[0] + "?" + q.Encode()
}

// clusterStateReloadInterval asks a client with the production options how often it reloads
// the cluster's layout unprompted: a client that keeps sending to a dead master's address, which
// answers no MOVED, learns of the promotion no later than that.
func clusterStateReloadInterval(t *testing.T, redisURL string) time.Duration {
	t.Helper()
	probe, err := redisconn.Open(context.Background(), redisconn.Settings{URL: redisURL, Cluster: true})
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	return probe.Client.(*redis.ClusterClient).Options().ClusterStateReloadInterval
}

// killMasterBehindItsReplica kills the cluster's first master after its replica has missed
// lag's worth of its writes, and returns the master killed and when.
//
// Replication is asynchronous, and on loopback a replica trails its master by microseconds.
// To make the promoted replica miss the master's last writes, as one in another AZ can, it
// is paused (SIGSTOP) and its replication link cut on the master, which keeps accepting
// writes; lag later the master dies, and the replica resumes.
func killMasterBehindItsReplica(t *testing.T, cl *testsupport.Cluster, lag time.Duration) (string, time.Time, error) {
	masters, err := cl.Masters()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("masters: %w", err)
	}
	replicaPID, err := replicaOf(masters[0])
	if err != nil {
		return "", time.Time{}, fmt.Errorf("replica of %s: %w", masters[0], err)
	}
	if err := syscall.Kill(replicaPID, syscall.SIGSTOP); err != nil {
		return "", time.Time{}, fmt.Errorf("pause replica: %w", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(replicaPID, syscall.SIGCONT) })
	if err := cutReplicationLink(masters[0]); err != nil {
		return "", time.Time{}, fmt.Errorf("cut the replication link of %s: %w", masters[0], err)
	}
	time.Sleep(lag)
	killedAt := time.Now()
	killed, err := cl.KillMaster(0)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("kill master: %w", err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := syscall.Kill(replicaPID, syscall.SIGCONT); err != nil {
		return "", time.Time{}, fmt.Errorf("resume replica: %w", err)
	}
	return killed, killedAt, nil
}

// paymentsFleet is a set of execution environments of the payments function on one ledger,
// recording every POST /payments they answer.
type paymentsFleet struct {
	handlers   []*payments.Handler
	invocation time.Duration // each request's deadline
	mu         sync.Mutex
	attempts   []payAttempt
}

// newPaymentsFleet builds n environments from vars (REDIS_URL, REDIS_CLUSTER) on the ledger
// led, closed at cleanup.
func newPaymentsFleet(t *testing.T, n int, vars map[string]string, led ledger.Ledger, invocation time.Duration) *paymentsFleet {
	t.Helper()
	f := &paymentsFleet{invocation: invocation}
	for range n {
		env := map[string]string{"IDEM_KEY_PREFIX": prefix, "LOG_LEVEL": "warn"}
		maps.Copy(env, vars)
		h, err := payments.New(context.Background(), func(k string) string { return env[k] },
			payments.WithLedger(led), payments.WithLogOutput(&syncBuffer{}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		f.handlers = append(f.handlers, h)
	}
	return f
}

// pay sends one POST /payments under key to environment env (modulo their number), records
// the attempt and returns it.
func (f *paymentsFleet) pay(env int, key string) payAttempt {
	body := `{"amount":1000,"currency":"EUR"}`
	req := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: payments.RouteCreate, RawPath: "/payments", Body: body,
		Headers: map[string]string{"content-type": "application/json", payments.HeaderIdempotencyKey: key},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: payments.RouteCreate,
			HTTP:     events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/payments"},
		},
	}
	a := payAttempt{key: key, start: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), f.invocation)
	resp, _ := f.handlers[env%len(f.handlers)].Handle(ctx, req)
	cancel()
	a.end, a.status, a.replayed = time.Now(), resp.StatusCode, resp.Headers[payments.HeaderReplayed] == "true"
	var p struct {
		ID string `json:"id"`
	}
	if json.Unmarshal([]byte(resp.Body), &p) == nil {
		a.paymentID = p.ID
	}
	f.mu.Lock()
	f.attempts = append(f.attempts, a)
	f.mu.Unlock()
	return a
}

// payUntilCreated sends POST /payments under key, first to environment env and then to the
// next ones, until it is answered 201, waiting between tries from retryEvery doubling up to
// maxRetry; it reports false if giveUp passed first.
func (f *paymentsFleet) payUntilCreated(env int, key string, retryEvery, maxRetry, giveUp time.Duration) bool {
	deadline := time.Now().Add(giveUp)
	wait := retryEvery
	for k := 0; time.Now().Before(deadline); k++ {
		if f.pay(env+k, key).status == 201 {
			return true
		}
		time.Sleep(wait)
		wait = min(2*wait, maxRetry)
	}
	return false
}

// snapshot returns a copy of the attempts recorded so far.
func (f *paymentsFleet) snapshot() []payAttempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.attempts)
}

// checkOnePaymentPerKey checks that the ledger holds one payment per key and that every 201
// of attempts for a key carries the same payment; it returns the payments created and the
// retries the ledger answered with an existing one.
func checkOnePaymentPerKey(t *testing.T, led *countingLedger, attempts []payAttempt) (created, existed int) {
	t.Helper()
	ids := map[string]map[string]bool{}
	for _, a := range attempts {
		if a.status != 201 {
			continue
		}
		if ids[a.key] == nil {
			ids[a.key] = map[string]bool{}
		}
		ids[a.key][a.paymentID] = true
	}
	for key, set := range ids {
		if len(set) != 1 {
			t.Errorf("payment key %s answered with %d different payments", key, len(set))
		}
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	for key, n := range led.created {
		if n != 1 {
			t.Errorf("payment key %s: %d payments in the ledger; want 1", key, n)
		}
	}
	for _, n := range led.existed {
		existed += n
	}
	return len(led.created), existed
}

// countExecutedTwice counts the events of perEvent executed more than once, and of those the
// events with a result not stored (notStored, per event).
func countExecutedTwice(perEvent map[string][]execution, notStored map[string]int) (twice, twiceNotStored int) {
	for id, xs := range perEvent {
		if len(xs) > 1 {
			twice++
			if notStored[id] > 0 {
				twiceNotStored++
			}
		}
	}
	return twice, twiceNotStored
}

// failoverWindow is when clients saw failed answers after a master was killed.
type failoverWindow struct {
	killedAt          time.Time
	firstErr, lastErr time.Time
	hookErrs, payErrs int
}

// note widens the window to an answer with status that came at end, when it is a failure
// after the kill (not 200, 201 or 409), and reports whether it was.
func (w *failoverWindow) note(status int, end time.Time) bool {
	if status == 200 || status == 201 || status == 409 || end.Before(w.killedAt) {
		return false
	}
	if w.firstErr.IsZero() || end.Before(w.firstErr) {
		w.firstErr = end
	}
	if end.After(w.lastErr) {
		w.lastErr = end
	}
	return true
}

// length is the time from the kill to the last failed answer, or 0 without one.
func (w *failoverWindow) length() time.Duration {
	if w.lastErr.IsZero() {
		return 0
	}
	return w.lastErr.Sub(w.killedAt)
}

// tallyPayments counts attempts by what they were answered: created, replayed, or status_<n>.
func tallyPayments(attempts []payAttempt) map[string]int {
	counts := map[string]int{}
	for _, a := range attempts {
		switch {
		case a.status == 201 && a.replayed:
			counts["replayed"]++
		case a.status == 201:
			counts["created"]++
		default:
			counts[fmt.Sprintf("status_%d", a.status)]++
		}
	}
	return counts
}
