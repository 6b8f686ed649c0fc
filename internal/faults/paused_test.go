package faults

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
)

// fencedStore is the downstream store of the paused-owner test, served to the child over HTTP:
// a key-value store that refuses a write whose token is lower than the highest it accepted for
// the key (unless built unfenced, the baseline, which accepts every write), and the payments
// ledger (ledger.Memory, which reads the token from the context).
type fencedStore struct {
	fenced bool
	ledger *ledger.Memory
	mu     sync.Mutex
	fences map[string]uint64
}

func newFencedStore(fenced bool) *fencedStore {
	return &fencedStore{fenced: fenced, ledger: ledger.NewMemory(), fences: map[string]uint64{}}
}

// write stores key under fence, unless a larger token wrote it already.
func (s *fencedStore) write(key string, fence uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fenced && fence < s.fences[key] {
		return false
	}
	s.fences[key] = max(s.fences[key], fence)
	return true
}

// pay creates the payment of key in the ledger; ctx carries the writer's token, if any.
func (s *fencedStore) pay(ctx context.Context, key, id string) string {
	_, err := s.ledger.Create(ctx, key, ledger.Payment{ID: id, Principal: "p", Amount: 100, Currency: "EUR", Status: "succeeded"})
	switch {
	case err == nil:
		return "created"
	case errors.Is(err, ledger.ErrFenced):
		return "fenced"
	case errors.Is(err, ledger.ErrExists):
		return "exists"
	}
	return "error"
}

func (s *fencedStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.FormValue("key")
	fence, _ := strconv.ParseUint(r.FormValue("fence"), 10, 64)
	ctx := r.Context() // no deadline: the write is already in flight
	if fence != 0 {
		ctx = idem.ContextWithFence(ctx, fence)
	}
	switch r.URL.Path {
	case "/store":
		if s.write(key, fence) {
			fmt.Fprintln(w, "accepted")
		} else {
			fmt.Fprintln(w, "refused")
		}
	case "/ledger":
		fmt.Fprintln(w, s.pay(ctx, key, "pay_child_"+key))
	default:
		http.NotFound(w, r)
	}
}

// pausedChild is the running child process and its protocol's two ends.
type pausedChild struct {
	cmd   *exec.Cmd
	in    io.Writer
	lines chan string
}

func startPausedChild(t *testing.T, env ...string) *pausedChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{pausedChildEnv + "=1"}, env...)...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &pausedChild{cmd: cmd, in: in, lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = in.Close()
		_ = cmd.Wait()
	})
	return c
}

// next returns the child's next line, failing the test after 10 s without one.
func (c *pausedChild) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatal("the child exited")
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no line from the child within 10s")
	}
	return ""
}

func (c *pausedChild) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// pausedTally is what the rounds of one run measured.
type pausedTally struct {
	trials, sent, plainOpen, storeAccepted, lockLost int
	// unclaimed counts the trials whose claim the child's guard refused as answered too late.
	unclaimed                                  int
	ledgerCreated, ledgerFenced, ledgerExists  int
	notHigher                                  int
	dynamoTrials, dynamoDeadline, dynamoFenced int
	dynamoCreated                              int
	pause                                      []time.Duration
}

// runPausedOwner runs rounds of n paused-owner trials against the Redis at addrs: the child
// claims n keys and is stopped inside their works; once the claims have expired the test takes
// every key over with its own guard (whose work writes the store and the ledger with its token);
// then the child resumes and its works try their side effects.
func runPausedOwner(t *testing.T, addrs []string, cluster, fencing bool, rounds, n int, dynamo string) pausedTally {
	t.Helper()
	run := startPausedRun(t, addrs, cluster, fencing, dynamo)
	for r := range rounds {
		run.round(r, n)
	}
	// A busy host may answer a few claims too late to run on; most trials must still count.
	if run.tally.trials < rounds*n/2 {
		t.Fatalf("%d of %d trials claimed (%d answered too late); want at least half", run.tally.trials, rounds*n, run.tally.unclaimed)
	}
	return run.tally
}

// pausedRun is the state of runPausedOwner: the downstream store, the child process, the
// guard the test takes keys over with, and what the rounds measured.
type pausedRun struct {
	t       *testing.T
	fencing bool
	store   *fencedStore
	dyn     *ledger.DynamoDB // the DynamoDB ledger, or nil
	child   *pausedChild
	guard   *idem.Guard
	tally   pausedTally
}

// startPausedRun serves a fenced (or, without fencing, unfenced) store, creates the DynamoDB
// ledger's table on the dynalite at dynamo unless it is "", starts the child on the Redis at
// addrs, and builds the test's guard on the same Redis.
func startPausedRun(t *testing.T, addrs []string, cluster, fencing bool, dynamo string) *pausedRun {
	t.Helper()
	run := &pausedRun{t: t, fencing: fencing, store: newFencedStore(fencing)}
	srv := httptest.NewServer(run.store)
	t.Cleanup(srv.Close)
	prefix := testsupport.UniquePrefix(t) + "paused"
	env := []string{"PAUSED_REDIS_ADDRS=" + strings.Join(addrs, ","),
		"PAUSED_REDIS_CLUSTER=" + strconv.FormatBool(cluster), "PAUSED_FENCING=" + strconv.FormatBool(fencing),
		"PAUSED_PREFIX=" + prefix, "PAUSED_STORE_URL=" + srv.URL}
	if dynamo != "" {
		table := "paused-payments"
		if err := ledger.CreateTable(context.Background(), dynamoClient(dynamo), table); err != nil {
			t.Fatal(err)
		}
		run.dyn = ledger.NewDynamoDB(dynamoClient(dynamo), table)
		env = append(env, "PAUSED_DYNAMO_ENDPOINT="+dynamo, "PAUSED_DYNAMO_TABLE="+table)
	}
	run.child = startPausedChild(t, env...)
	opts := []idem.Option{idem.WithPrefix(prefix), idem.WithLockTTL(5 * time.Second)}
	if fencing {
		opts = append(opts, idem.WithFencing())
	}
	g, err := idem.New(redisClient(t, addrs, cluster), opts...)
	if err != nil {
		t.Fatal(err)
	}
	run.guard = g
	return run
}

// redisClient is a client of the Redis at addrs, a cluster or one server, closed at cleanup.
func redisClient(t *testing.T, addrs []string, cluster bool) idem.Client {
	if cluster {
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		t.Cleanup(func() { cc.Close() })
		return cc
	}
	rc := redis.NewClient(&redis.Options{Addr: addrs[0]})
	t.Cleanup(func() { rc.Close() })
	return rc
}

// round runs round r of n trials: the child claims n keys and is stopped inside their works,
// the test takes each key over, the child resumes and reports what its works did; then the
// ledger must hold the takeover's payment only.
func (run *pausedRun) round(r, n int) {
	t := run.t
	t.Helper()
	fmt.Fprintf(run.child.in, "round %d %d\n", r, n)
	childFence := make([]uint64, n)
	claimed := 0
	for range n {
		var i int
		var f uint64
		var kind string
		line := run.child.next(t)
		if _, err := fmt.Sscanf(line, "unclaimed %d %s", &i, &kind); err == nil {
			// The child's claim was answered too late to run on (a busy host): its work did
			// not start, which is the guard keeping its promise; the trial does not count.
			if kind != "unavailable" {
				t.Fatalf("child: %q; want a claim, or a claim refused as unavailable", line)
			}
			run.tally.unclaimed++
			continue
		}
		if _, err := fmt.Sscanf(line, "claimed %d %d", &i, &f); err != nil {
			t.Fatalf("child: %q: %v", line, err)
		}
		childFence[i] = f
		claimed++
	}
	run.child.signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	// Take every key over once the child's claims have expired.
	for i := range n {
		run.takeOver(pausedKey(r, i), childFence[i], stopped)
	}
	fmt.Fprintln(run.child.in, "go") // read by the child once it runs again
	run.tally.pause = append(run.tally.pause, time.Since(stopped))
	run.child.signal(t, syscall.SIGCONT)
	for range claimed {
		run.tally.addResult(t, run.child.next(t), run.dyn != nil)
	}
	if l := run.child.next(t); l != fmt.Sprintf("done %d", r) {
		t.Fatalf("child: %q", l)
	}
	// The ledger holds the takeover's payment, only.
	for i := range n {
		key := pausedKey(r, i)
		if _, err := run.store.ledger.Get(context.Background(), "p", "pay_child_"+key); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("%s: the paused owner's payment is in the ledger", key)
		}
	}
}

// takeOver runs key on the test's guard, retrying while the paused child's claim (whose token
// was childFence) has not expired, for up to 5s after the child was stopped; its work writes
// the store and the ledgers with its own token, which must be above the child's.
func (run *pausedRun) takeOver(key string, childFence uint64, stopped time.Time) {
	t := run.t
	t.Helper()
	for {
		out, err := run.guard.Do(context.Background(), idem.Key{Scope: "paused", ID: key}, idem.Fingerprint{}, func(ctx context.Context) (idem.Result, error) {
			f, _ := idem.FenceFrom(ctx)
			if run.fencing && f <= childFence {
				run.tally.notHigher++
			}
			run.store.write(key, f)
			if got := run.store.pay(ctx, key, "pay_takeover_"+key); got != "created" {
				t.Errorf("%s: the takeover's payment: %s", key, got)
			}
			if run.dyn != nil {
				if got := paymentStatus(run.dyn.Create(ctx, key, dynamoPayment("pay_takeover_"+key))); got != "created" {
					t.Errorf("%s: the takeover's DynamoDB payment: %s", key, got)
				}
			}
			return idem.Result{Status: 200}, nil
		})
		if out.Kind == idem.Executed {
			return
		}
		if out.Kind != idem.InProgress || time.Since(stopped) > 5*time.Second {
			t.Fatalf("%s: takeover %v, %v", key, out.Kind, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addResult counts the child's result line of one trial; withDynamo says whether the child
// also wrote the DynamoDB ledger.
func (p *pausedTally) addResult(t *testing.T, line string, withDynamo bool) {
	t.Helper()
	var i, sent int
	var plain, st, led, dynLive, dynFlight, kind string
	if _, err := fmt.Sscanf(line, "result %d sent=%d plain=%s store=%s ledger=%s dynamolive=%s dynamo=%s kind=%s", &i, &sent, &plain, &st, &led, &dynLive, &dynFlight, &kind); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	if withDynamo {
		p.addDynamoResult(dynLive, dynFlight)
	}
	p.trials++
	p.sent += sent
	if plain == "ok" {
		p.plainOpen++
	}
	if st == "accepted" {
		p.storeAccepted++
	}
	switch led {
	case "created":
		p.ledgerCreated++
	case "fenced":
		p.ledgerFenced++
	case "exists":
		p.ledgerExists++
	default:
		t.Errorf("key %d: ledger answered %s", i, led)
	}
	if kind == idem.LockLost.String() {
		p.lockLost++
	}
}

// addDynamoResult counts what the DynamoDB ledger answered the child's two writes: the one
// with its work's context (live) and the one already in flight.
func (p *pausedTally) addDynamoResult(live, inFlight string) {
	p.dynamoTrials++
	if live == "deadline" {
		p.dynamoDeadline++
	}
	if inFlight == "fenced" {
		p.dynamoFenced++
	}
	if live == "created" || inFlight == "created" {
		p.dynamoCreated++
	}
}

func (p pausedTally) String() string {
	return fmt.Sprintf("%d trials (%d more claims answered too late to run): sends after the deadline %d; timer-only check still open on resume %d; store writes accepted %d; "+
		"ledger created %d, refused fenced %d, exists %d; completions refused (lock_lost) %d; pause p50 %s",
		p.trials, p.unclaimed, p.sent, p.plainOpen, p.storeAccepted, p.ledgerCreated, p.ledgerFenced, p.ledgerExists, p.lockLost,
		ms(median(p.pause))) + fmt.Sprintf("; DynamoDB ledger (%d trials): refused past the deadline %d, in flight refused fenced %d, created %d",
		p.dynamoTrials, p.dynamoDeadline, p.dynamoFenced, p.dynamoCreated)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}

// checkFenced fails the test for any stale effect of a paused owner under fencing.
func checkFenced(t *testing.T, p pausedTally) {
	t.Helper()
	if p.sent != 0 {
		t.Errorf("%d events sent by a paused owner past its deadline; want 0", p.sent)
	}
	if p.storeAccepted != 0 || p.ledgerCreated != 0 || p.ledgerExists != 0 {
		t.Errorf("stale writes accepted: store %d, ledger %d (exists %d); want 0", p.storeAccepted, p.ledgerCreated, p.ledgerExists)
	}
	if p.dynamoCreated != 0 || p.dynamoFenced != p.dynamoTrials || p.dynamoDeadline != p.dynamoTrials {
		t.Errorf("DynamoDB ledger: %d stale payments created, %d of %d refused past the deadline, %d of %d in flight refused fenced; want 0 and all",
			p.dynamoCreated, p.dynamoDeadline, p.dynamoTrials, p.dynamoFenced, p.dynamoTrials)
	}
	if p.notHigher != 0 {
		t.Errorf("%d takeovers carried a token not above the paused owner's", p.notHigher)
	}
	if p.lockLost != p.trials {
		t.Errorf("%d of %d paused owners' completions refused; want all", p.lockLost, p.trials)
	}
}

// TestPausedOwner stops a real process (SIGSTOP) inside the works of its claims, past their
// TTL, takes the keys over, and resumes it (SIGCONT): 200 trials on redis-server and 200 on a
// cluster with fencing, and 50 on redis-server without it for the baseline. With fencing, no
// event is sent past the deadline and no stale write is accepted by the fenced store or the
// ledger.
func TestPausedOwner(t *testing.T) {
	const rounds, n = 8, 25
	t.Run("RedisServer", func(t *testing.T) {
		srv := testsupport.StartRedis(t)
		p := runPausedOwner(t, []string{srv.Addr()}, false, true, rounds, n, "")
		checkFenced(t, p)
		t.Logf("redis-server, fencing: %s", p)
	})
	t.Run("Cluster", func(t *testing.T) {
		cl := testsupport.StartCluster(t, 3, 0)
		p := runPausedOwner(t, cl.Addrs(), true, true, rounds, n, "")
		checkFenced(t, p)
		t.Logf("cluster, fencing: %s", p)
	})
	// The payments ledger on DynamoDB (dynalite): the child's Create with its work's context is
	// refused by the ledger's own deadline check, and its Create already in flight by the token.
	t.Run("RedisServerDynamoDBLedger", func(t *testing.T) {
		srv := testsupport.StartRedis(t)
		p := runPausedOwner(t, []string{srv.Addr()}, false, true, rounds, n, testsupport.StartDynalite(t))
		checkFenced(t, p)
		t.Logf("redis-server, fencing, DynamoDB ledger: %s", p)
	})
	t.Run("WithoutFencing", func(t *testing.T) {
		srv := testsupport.StartRedis(t)
		p := runPausedOwner(t, []string{srv.Addr()}, false, false, 2, n, "")
		if p.sent != 0 {
			t.Errorf("%d events sent past the deadline; want 0 (the sinks check the clock)", p.sent)
		}
		t.Logf("redis-server, no fencing: %s", p)
	})
}
