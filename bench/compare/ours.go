package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/functions/webhook/handler"
	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/sink"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/internal/testsupport/webhookfleet"
	"github.com/idemlambda/idem/pkg/idem"
)

// settings are the knobs the peers' drivers read from their environment, with their defaults.
type settings struct {
	N      int // sequential requests per path
	Warmup int // requests per path before measuring
	Conc   int // in-flight requests for throughput; containers per key for the concurrency test
	Rounds int // keys in the concurrency test
	ThrN   int // requests per throughput path
}

// lambdaTimeout is the function timeout the peers' fake Lambda context reports (30 s); ours
// gets it as the context deadline, from which the core derives its claim TTL.
const lambdaTimeout = 30 * time.Second

// measurer runs paths against the server and counts the Redis commands each one costs.
type measurer struct {
	srv *redisServer
	s   settings
	run string // makes every key of this run new
	// sent counts the commands every client this measurer opened sends: its round trips,
	// since nothing here pipelines. INFO commandstats counts more for a Lua script: the
	// EVALSHA and each command the script calls.
	sent testsupport.CommandCounter
}

// sequential calls call(0..n-1) one after the other and summarises latencies, throughput and
// Redis commands per request.
func (m *measurer) sequential(ctx context.Context, n int, call func(i int) error) (Phase, error) {
	return m.concurrent(ctx, n, 1, call)
}

// concurrent calls call(0..n-1) from workers goroutines, each taking the next index.
func (m *measurer) concurrent(ctx context.Context, n, workers int, call func(i int) error) (Phase, error) {
	before, err := m.srv.commandStats(ctx)
	if err != nil {
		return Phase{}, err
	}
	sentBefore := m.sent.Commands.Load()
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t := time.Now()
				if err := call(i); err != nil {
					errs <- err
					return
				}
				lat[i] = time.Since(t)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return Phase{}, err
	}
	after, err := m.srv.commandStats(ctx)
	if err != nil {
		return Phase{}, err
	}
	p := latencies(lat)
	p.RPS = float64(n) / wall.Seconds()
	p.Workers = workers
	p.perRequest(commandDelta(before, after), n)
	p.SentPerReq = float64(m.sent.Commands.Load()-sentBefore) / float64(n)
	return p, nil
}

// apiEvent is an API Gateway HTTP API v2 event shaped like the peers' makeEvent: a POST whose
// JSON body carries the idempotency key as id.
func apiEvent(id string) events.APIGatewayV2HTTPRequest {
	body := fmt.Sprintf(`{"id":%q,"amount":1000,"currency":"EUR"}`, id)
	return events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: "POST /payments",
		RawPath:  "/payments",
		Headers:  map[string]string{"content-type": "application/json", "content-length": strconv.Itoa(len(body))},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			AccountID: "123456789012", APIID: "api", DomainName: "example.invalid", RequestID: "req-" + id,
			RouteKey: "POST /payments", Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/payments", Protocol: "HTTP/1.1", SourceIP: "127.0.0.1", UserAgent: "bench"},
		},
		Body: body,
	}
}

// businessLogic is the peers' business logic: parse the body, answer 200 with a small JSON.
func businessLogic(req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	var in struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	}
	if err := json.Unmarshal([]byte(req.Body), &in); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	b, err := json.Marshal(struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Amount int64  `json:"amount"`
	}{in.ID, "accepted", in.Amount})
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: map[string]string{"content-type": "application/json"}, Body: string(b)}, nil
}

// coreApp is the core wrapped around the business logic the way Powertools' makeIdempotent
// wraps it: the key is the body's id, the fingerprint the canonical JSON of the body, and a
// duplicate in progress is answered 409.
type coreApp struct {
	guard      *idem.Guard
	client     idem.Client
	work       time.Duration
	executions atomic.Int64
	// When hold is non-nil, the work closes started and waits for hold to close.
	hold, started chan struct{}
}

func (a *coreApp) handle(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	var in struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(req.Body), &in); err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	fp, err := idem.FingerprintJSON([]byte(req.Body))
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	out, err := a.guard.Do(ctx, idem.Key{Scope: "compare", ID: in.ID}, fp, func(ctx context.Context) (idem.Result, error) {
		a.executions.Add(1)
		if a.hold != nil {
			close(a.started)
			<-a.hold
		}
		if a.work > 0 {
			time.Sleep(a.work)
		}
		resp, err := businessLogic(req)
		return idem.Result{Status: resp.StatusCode, Headers: resp.Headers, Body: []byte(resp.Body)}, err
	})
	switch out.Kind {
	case idem.Executed, idem.Replayed:
		if err != nil {
			return events.APIGatewayV2HTTPResponse{}, err
		}
		resp := events.APIGatewayV2HTTPResponse{StatusCode: out.Result.Status, Headers: out.Result.Headers, Body: string(out.Result.Body)}
		if out.Kind == idem.Replayed {
			resp.Headers = maps.Clone(resp.Headers)
			resp.Headers["idempotent-replayed"] = "true"
		}
		return resp, nil
	case idem.InProgress:
		return events.APIGatewayV2HTTPResponse{StatusCode: 409}, nil
	}
	return events.APIGatewayV2HTTPResponse{}, fmt.Errorf("unexpected outcome %s: %w", out.Kind, err)
}

// call invokes h with a fresh Lambda-like deadline, as the peers' makeContext does.
func call(h handleFunc, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lambdaTimeout)
	defer cancel()
	return h(ctx, req)
}

// want checks a response's status and replay marker.
func want(resp events.APIGatewayV2HTTPResponse, err error, status int, replayed bool) error {
	if err != nil {
		return err
	}
	if resp.StatusCode != status || (resp.Headers["idempotent-replayed"] == "true") != replayed {
		return fmt.Errorf("got status %d (replayed %q), want %d (replayed %v): %s",
			resp.StatusCode, resp.Headers["idempotent-replayed"], status, replayed, resp.Body)
	}
	return nil
}

// Checks of a call's result: a first execution, a replay, an in-progress duplicate.
func executed(resp events.APIGatewayV2HTTPResponse, err error) error {
	return want(resp, err, 200, false)
}
func replayed(resp events.APIGatewayV2HTTPResponse, err error) error {
	return want(resp, err, 200, true)
}
func conflict(resp events.APIGatewayV2HTTPResponse, err error) error {
	return want(resp, err, 409, false)
}

// openClient builds a client as a function does at init, with room for inFlight commands,
// and counts the commands it sends. Its pool is filled before it is returned, so connection
// handshakes are not counted as requests' commands.
func (m *measurer) openClient(ctx context.Context, inFlight int) (*redisconn.Conn, error) {
	s := redisconn.Settings{URL: m.srv.url()}
	if inFlight > 1 {
		s.MaxConcurrency = inFlight
	}
	conn, err := redisconn.Open(ctx, s)
	if err != nil {
		return nil, err
	}
	// Hold inFlight connections at once, so the pool keeps that many open: a request measured
	// later never dials (a dial's HELLO would count as one of its commands).
	c, ok := conn.Client.(*redis.Client)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("compare: want a standalone client, got %T", conn.Client)
	}
	var held []*redis.Conn
	for range max(inFlight, 1) {
		h := c.Conn()
		held = append(held, h)
		if err := h.Ping(ctx).Err(); err != nil {
			for _, h := range held {
				h.Close()
			}
			conn.Close()
			return nil, err
		}
	}
	for _, h := range held {
		h.Close()
	}
	conn.Client.AddHook(&m.sent)
	return conn, nil
}

// newCoreApp builds a guard on its own client: one execution environment.
func (m *measurer) newCoreApp(ctx context.Context, inFlight int, opts ...idem.Option) (*coreApp, func(), error) {
	conn, err := m.openClient(ctx, inFlight)
	if err != nil {
		return nil, nil, err
	}
	app, err := newCoreApp(conn.Client, opts...)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return app, func() { conn.Close() }, nil
}

// newCoreApp builds a guard on client.
func newCoreApp(client idem.Client, opts ...idem.Option) (*coreApp, error) {
	g, err := idem.New(client, append([]idem.Option{idem.WithPrefix("cmp")}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &coreApp{guard: g, client: client}, nil
}

// handleFunc is a Lambda handler of API Gateway HTTP API events.
type handleFunc func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// target is what measureCommon measures on the paths every implementation has.
type target struct {
	handle handleFunc
	// busy serves the requests measured with Conc in flight: handle's when nil.
	busy handleFunc
	// requests returns n new requests, each with its own key; tag keeps the sets apart.
	requests func(tag string, n int) []events.APIGatewayV2HTTPRequest
	// held is the handler of another environment that serves the held request; holdWork
	// arranges that its work on req closes started and then waits for release.
	held     handleFunc
	holdWork func(req events.APIGatewayV2HTTPRequest, release, started chan struct{})
	// executions counts the runs of the work, which no replay may add to.
	executions func() int64
}

// phaseSet collects measured phases under their names; who names the implementation in errors.
type phaseSet struct {
	who    string
	phases map[string]Phase
}

// record keeps p under name, or returns err with the phase named.
func (s phaseSet) record(name string, p Phase, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %s: %w", s.who, name, err)
	}
	s.phases[name] = p
	return nil
}

// measureCommon warms tg up and measures it on the paths every implementation has: first-time
// requests, their replays, duplicates of a request in progress, and both with Conc requests in
// flight.
func (m *measurer) measureCommon(ctx context.Context, tg target, set phaseSet) error {
	// Warm-up, not measured: connection, scripts, code paths.
	warm := tg.requests("warm", m.s.Warmup)
	for _, check := range []func(events.APIGatewayV2HTTPResponse, error) error{executed, replayed} {
		for _, req := range warm {
			if err := check(call(tg.handle, req)); err != nil {
				return fmt.Errorf("%s: warm-up: %w", set.who, err)
			}
		}
	}

	first := tg.requests("a", m.s.N)
	bodies := make([]string, m.s.N)
	p, err := m.sequential(ctx, m.s.N, func(i int) error {
		resp, err := call(tg.handle, first[i])
		bodies[i] = resp.Body
		return want(resp, err, 200, false)
	})
	if err := set.record("a first-time (unique keys)", p, err); err != nil {
		return err
	}
	execBefore := tg.executions()
	p, err = m.sequential(ctx, m.s.N, func(i int) error {
		resp, err := call(tg.handle, first[i])
		if err == nil && resp.Body != bodies[i] {
			return fmt.Errorf("replay of %d differs from the first response", i)
		}
		return want(resp, err, 200, true)
	})
	if n := tg.executions() - execBefore; err == nil && n != 0 {
		err = fmt.Errorf("replays ran the work %d times", n)
	}
	if err := set.record("b replay, no local cache", p, err); err != nil {
		return err
	}

	held := tg.requests("held", 1)[0]
	p, err = m.hold(ctx, func(release, started chan struct{}) func() error {
		tg.holdWork(held, release, started)
		return func() error { return executed(call(tg.held, held)) }
	}, func(int) error { return conflict(call(tg.handle, held)) })
	if err := set.record("i in-progress duplicate", p, err); err != nil {
		return err
	}

	// Throughput: one process with Conc requests in flight on one client.
	busy := tg.busy
	if busy == nil {
		busy = tg.handle
	}
	thr := tg.requests("t", m.s.ThrN)
	for _, c := range []struct {
		path  string
		check func(events.APIGatewayV2HTTPResponse, error) error
	}{{"a first-time", executed}, {"b replay", replayed}} {
		p, err := m.concurrent(ctx, m.s.ThrN, m.s.Conc, func(i int) error { return c.check(call(busy, thr[i])) })
		if err := set.record(fmt.Sprintf("%s c=%d", c.path, m.s.Conc), p, err); err != nil {
			return err
		}
	}
	return nil
}

// measureCore measures the core wrapped around the peers' business logic, in-process, on the
// paths the peers measure.
//
//cyclo:one phase after another, each with its error check, in the order the peers measure them
func (m *measurer) measureCore(ctx context.Context) (map[string]Phase, error) {
	set := phaseSet{who: "core", phases: map[string]Phase{}}
	requests := func(tag string, n int) []events.APIGatewayV2HTTPRequest {
		reqs := make([]events.APIGatewayV2HTTPRequest, n)
		for i := range reqs {
			reqs[i] = apiEvent(fmt.Sprintf("%s-%s-%d", m.run, tag, i))
		}
		return reqs
	}

	// The business logic alone, warmed up first.
	for _, req := range requests("warm", m.s.Warmup) {
		if _, err := businessLogic(req); err != nil {
			return nil, err
		}
	}
	base := requests("base", m.s.N)
	p, err := m.sequential(ctx, m.s.N, func(i int) error { _, err := businessLogic(base[i]); return err })
	if err := set.record("0 no-idempotency baseline", p, err); err != nil {
		return nil, err
	}

	app, closeApp, err := m.newCoreApp(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer closeApp()
	// Throughput: one process with Conc requests in flight on one client.
	busy, closeBusy, err := m.newCoreApp(ctx, m.s.Conc)
	if err != nil {
		return nil, err
	}
	defer closeBusy()
	holder, closeHolder, err := m.newCoreApp(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer closeHolder()
	if err := m.measureCommon(ctx, target{
		handle:   app.handle,
		busy:     busy.handle,
		requests: requests,
		held:     holder.handle,
		holdWork: func(_ events.APIGatewayV2HTTPRequest, release, started chan struct{}) {
			holder.hold, holder.started = release, started
		},
		executions: app.executions.Load,
	}, set); err != nil {
		return nil, err
	}

	// Local cache in front of Redis, as Powertools' useLocalCache.
	cached, closeCached, err := m.newCoreApp(ctx, 1, idem.WithLocalCache(m.s.N, time.Hour))
	if err != nil {
		return nil, err
	}
	defer closeCached()
	lc := requests("lc", m.s.N)
	p, err = m.sequential(ctx, m.s.N, func(i int) error { return executed(call(cached.handle, lc[i])) })
	if err := set.record("a first-time, local cache on", p, err); err != nil {
		return nil, err
	}
	p, err = m.sequential(ctx, m.s.N, func(i int) error { return replayed(call(cached.handle, lc[i])) })
	if err := set.record("b replay, local cache hit (warm)", p, err); err != nil {
		return nil, err
	}
	// Another environment's empty cache, on the same client as in the peers' driver.
	cold, err := newCoreApp(cached.client, idem.WithLocalCache(m.s.N, time.Hour))
	if err != nil {
		return nil, err
	}
	p, err = m.sequential(ctx, m.s.N, func(i int) error { return replayed(call(cold.handle, lc[i])) })
	if err := set.record("b replay, local cache miss (cold)", p, err); err != nil {
		return nil, err
	}

	for _, work := range []time.Duration{0, 20 * time.Millisecond} {
		p, err := m.concurrency(ctx, work)
		if err := set.record(fmt.Sprintf("c concurrent same key, work %dms", work.Milliseconds()), p, err); err != nil {
			return nil, err
		}
	}
	return set.phases, nil
}

// hold runs the request that start returns, in another environment; its work closes started
// and then waits for release, so its claim stays in progress. Meanwhile N calls of dup are
// measured, each a duplicate of that request.
func (m *measurer) hold(ctx context.Context, start func(release, started chan struct{}) func() error, dup func(i int) error) (Phase, error) {
	release, started := make(chan struct{}), make(chan struct{})
	first := start(release, started)
	done := make(chan error, 1)
	go func() { done <- first() }()
	select {
	case <-started:
	case err := <-done:
		return Phase{}, fmt.Errorf("the held request ended before its work started: %v", err)
	case <-time.After(10 * time.Second):
		close(release)
		return Phase{}, errors.Join(errors.New("the held request never started its work"), <-done)
	}
	p, err := m.sequential(ctx, m.s.N, dup)
	close(release)
	if ferr := <-done; err == nil && ferr != nil {
		err = fmt.Errorf("the held request: %w", ferr)
	}
	return p, err
}

// concurrency is the peers' concurrency test: Conc containers (each its own client and guard)
// invoked at once with the same new key, Rounds times.
func (m *measurer) concurrency(ctx context.Context, work time.Duration) (Phase, error) {
	apps := make([]*coreApp, m.s.Conc)
	for i := range apps {
		app, closeApp, err := m.newCoreApp(ctx, 1)
		if err != nil {
			return Phase{}, err
		}
		defer closeApp()
		app.work = work
		apps[i] = app
		if err := executed(call(app.handle, apiEvent(fmt.Sprintf("%s-cwarm-%d-%d", m.run, work.Milliseconds(), i)))); err != nil {
			return Phase{}, err
		}
	}
	before, err := m.srv.commandStats(ctx)
	if err != nil {
		return Phase{}, err
	}
	var p Phase
	var mu sync.Mutex
	var lat []time.Duration
	p.PerKeyMin = m.s.Conc + 1
	for r := range m.s.Rounds {
		req := apiEvent(fmt.Sprintf("%s-conc-%d-%d", m.run, work.Milliseconds(), r))
		var execBefore int64
		for _, a := range apps {
			execBefore += a.executions.Load()
		}
		var wg sync.WaitGroup
		for _, a := range apps {
			wg.Go(func() {
				t := time.Now()
				resp, err := call(a.handle, req)
				d := time.Since(t)
				mu.Lock()
				defer mu.Unlock()
				lat = append(lat, d)
				switch {
				case err != nil:
					p.Other++
				case resp.StatusCode == 409:
					p.InProgress++
				case resp.Headers["idempotent-replayed"] == "true":
					p.Stored++
				}
			})
		}
		wg.Wait()
		var execAfter int64
		for _, a := range apps {
			execAfter += a.executions.Load()
		}
		ran := int(execAfter - execBefore)
		p.Ran += ran
		p.PerKeyMin, p.PerKeyMax = min(p.PerKeyMin, ran), max(p.PerKeyMax, ran)
	}
	after, err := m.srv.commandStats(ctx)
	if err != nil {
		return Phase{}, err
	}
	l := latencies(lat)
	p.N, p.P50, p.P90, p.P99, p.Max, p.Mean = l.N, l.P50, l.P90, l.P99, l.Max, l.Mean
	p.Keys, p.PerKey, p.WorkMs = m.s.Rounds, m.s.Conc, int(work.Milliseconds())
	p.perRequest(commandDelta(before, after), m.s.Conc*m.s.Rounds)
	return p, nil
}

// handlerSecret signs the deliveries the webhook handler is measured with.
const handlerSecret = "whsec_compare"

// holdingSink forwards to a log sink, except that it waits for release before forwarding the
// event named held. It counts the events it is sent.
type holdingSink struct {
	next             sink.Sink
	sent             atomic.Int64
	mu               sync.Mutex
	held             string
	release, started chan struct{}
}

// Send forwards e to the next sink, first signalling started and waiting for release if e is
// the held event.
func (s *holdingSink) Send(ctx context.Context, e sink.Event) error {
	s.sent.Add(1)
	s.mu.Lock()
	held, release, started := s.held, s.release, s.started
	s.mu.Unlock()
	if e.ID == held {
		close(started)
		<-release
	}
	return s.next.Send(ctx, e)
}

// measureHandler measures the Stripe webhook function's handler in-process: signature check,
// event parsing, the core, the log sink and the request's log line, per signed delivery.
func (m *measurer) measureHandler(ctx context.Context, inFlight int) (map[string]Phase, error) {
	env := webhookfleet.Env(handlerSecret, map[string]string{"IDEM_KEY_PREFIX": "cmp"})
	// The client the function would build from REDIS_URL, with the counting hook.
	conn, err := m.openClient(ctx, inFlight)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	snk := &holdingSink{next: sink.NewLog(io.Discard)}
	h, err := handler.New(ctx, func(k string) string { return env[k] },
		handler.WithRedis(conn.Client), handler.WithSink(snk), handler.WithLogOutput(io.Discard))
	if err != nil {
		return nil, err
	}
	defer h.Close()
	set := phaseSet{who: "webhook handler", phases: map[string]Phase{}}
	if err := m.measureCommon(ctx, target{
		handle: h.Handle,
		requests: func(tag string, n int) []events.APIGatewayV2HTTPRequest {
			reqs := make([]events.APIGatewayV2HTTPRequest, n)
			for i := range reqs {
				ev, err := webhookfleet.NewEvent(fmt.Sprintf("evt_%s_%s_%d", m.run, tag, i))
				if err == nil {
					reqs[i], err = ev.Request(handlerSecret, time.Now())
				}
				if err != nil {
					panic(err) // the stripe preset always has a sample, and a raw HMAC secret always signs
				}
			}
			return reqs
		},
		held: h.Handle,
		holdWork: func(req events.APIGatewayV2HTTPRequest, release, started chan struct{}) {
			snk.mu.Lock()
			defer snk.mu.Unlock()
			snk.held, snk.release, snk.started = stripeID(req), release, started
		},
		executions: snk.sent.Load,
	}, set); err != nil {
		return nil, err
	}
	return set.phases, nil
}

// stripeID returns the event id in a Stripe delivery's body.
func stripeID(req events.APIGatewayV2HTTPRequest) string {
	var ev struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(req.Body), &ev)
	return ev.ID
}

// floor measures single Redis commands through the same client: the round trip every path is
// made of.
func (m *measurer) floor(ctx context.Context) (map[string]Phase, error) {
	conn, err := m.openClient(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	c := conn.Client
	phases := map[string]Phase{}
	for _, f := range []struct {
		name string
		do   func(i int) error
	}{
		{"PING", func(int) error { return c.Ping(ctx).Err() }},
		{"SET NX EX (new key)", func(i int) error {
			return c.SetNX(ctx, fmt.Sprintf("%s-floor-%d", m.run, i), "v", time.Hour).Err()
		}},
		{"GET", func(i int) error { return c.Get(ctx, fmt.Sprintf("%s-floor-%d", m.run, i)).Err() }},
	} {
		for i := range 500 {
			_ = f.do(-1 - i)
		}
		p, err := m.sequential(ctx, m.s.N, f.do)
		if err != nil {
			return nil, fmt.Errorf("floor %s: %w", f.name, err)
		}
		phases[f.name] = p
	}
	return phases, nil
}
