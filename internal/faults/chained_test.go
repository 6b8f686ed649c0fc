package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
)

// TestChainedLostClaims measures how long a key waits behind claims whose replies were lost.
// Replies are held longer than the client's read timeout for 3 claim TTLs while deliveries
// of one key keep arriving, 4 environments each retrying every 100 ms: every claim that reaches
// Redis while the key is free takes it, its reply is lost, the delivery answers 503, and the key
// stays claimed for a TTL; when that claim expires, the next delivery's claim takes it again.
// Lost claims chain for as long as the fault lasts, so the wait is not bounded by the TTL; what
// is bounded is the wait after the fault ends: at most the TTL of the last lost claim, plus the
// sender's retry interval. Asserted: the work runs once, and within a TTL plus a retry interval
// plus the client's own timeouts after the fault ends.
func TestChainedLostClaims(t *testing.T) {
	t.Run("FaultLongerThanTheTTL", func(t *testing.T) { chainedLostClaims(t, time.Second, 3*time.Second) })
	// A fault shorter than the TTL: the environment whose claim took the key claims again with
	// the same token and finds it its own, instead of waiting for it to expire.
	t.Run("FaultShorterThanTheTTL", func(t *testing.T) { chainedLostClaims(t, 3*time.Second, 600*time.Millisecond) })
}

func chainedLostClaims(t *testing.T, lockTTL, fault time.Duration) {
	srv := testsupport.StartRedis(t)
	admin := srv.NewClient()
	proxy := testsupport.StartProxy(t, srv.Addr())
	const (
		every = 100 * time.Millisecond
		envs  = 4
	)
	clientBound := time.Duration(1+redisconn.DefaultMaxRetries)*(redisconn.DefaultDialTimeout+redisconn.DefaultWriteTimeout+redisconn.DefaultReadTimeout) + 100*time.Millisecond
	guards := productionGuards(t, proxy.Addr(), envs, lockTTL)
	key := idem.Key{Scope: "stripe", ID: "evt_chained_" + lockTTL.String()}
	rk := recordKey(prefix, "stripe", key.ID)

	// Count the distinct claims Redis held for the key: each one a lost claim.
	claims := map[string]bool{}
	var mu sync.Mutex
	stopWatch := make(chan struct{})
	go everyUntil(stopWatch, 20*time.Millisecond, func() {
		v, err := admin.Get(context.Background(), rk).Bytes()
		if err == nil && len(v) > 18 && v[1] == 'P' {
			mu.Lock()
			claims[string(v[2:18])] = true
			mu.Unlock()
		}
	})

	// Warm connections, so that commands reach Redis during the fault (a dial's own handshake
	// would time out first).
	for i, g := range guards {
		g.Do(context.Background(), idem.Key{Scope: "stripe", ID: fmt.Sprintf("evt_chained_warm_%d", i)}, idem.Fingerprint{}, func(context.Context) (idem.Result, error) {
			return idem.Result{Status: 200}, nil
		})
	}
	var runs int
	var runsMu sync.Mutex
	start := time.Now()
	proxy.SetLatency(0, redisconn.DefaultReadTimeout+200*time.Millisecond)
	faultEnd := start.Add(fault)
	go func() {
		time.Sleep(time.Until(faultEnd))
		proxy.SetLatency(0, 0)
	}()
	var wg sync.WaitGroup
	acked := make(chan time.Time, envs)
	for e := range envs {
		wg.Go(func() {
			for time.Since(start) < fault+5*lockTTL {
				out, _ := guards[e].Do(context.Background(), key, idem.Fingerprint{}, func(context.Context) (idem.Result, error) {
					runsMu.Lock()
					runs++
					runsMu.Unlock()
					return idem.Result{Status: 200}, nil
				})
				if out.Kind == idem.Executed || out.Kind == idem.Replayed {
					acked <- time.Now()
					return
				}
				time.Sleep(every)
			}
		})
	}
	wg.Wait()
	close(stopWatch)
	close(acked)
	first := earliest(acked)
	if first.IsZero() {
		t.Fatal("the key was never acknowledged")
	}
	if runs != 1 {
		t.Errorf("the work ran %d times; want 1", runs)
	}
	afterFault := first.Sub(faultEnd)
	if bound := lockTTL + every + clientBound; afterFault > bound {
		t.Errorf("acknowledged %s after the fault ended; want within the TTL + the retry interval + the client's timeouts (%s)", afterFault, bound)
	}
	mu.Lock()
	n := len(claims)
	mu.Unlock()
	t.Logf("%s fault, claim TTL %s: %d claims applied whose replies were lost; first acknowledgement %s after the first delivery, %s after the fault ended",
		fault, lockTTL, n, first.Sub(start).Round(time.Millisecond), afterFault.Round(time.Millisecond))
}

// productionGuards returns n guards, each on its own client of the Redis at addr with the
// functions' default timeouts and retries, whose claims live lockTTL.
func productionGuards(t *testing.T, addr string, n int, lockTTL time.Duration) []*idem.Guard {
	t.Helper()
	guards := make([]*idem.Guard, n)
	for i := range guards {
		c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: redisconn.DefaultDialTimeout,
			ReadTimeout: redisconn.DefaultReadTimeout, WriteTimeout: redisconn.DefaultWriteTimeout, MaxRetries: redisconn.DefaultMaxRetries})
		t.Cleanup(func() { c.Close() })
		g, err := idem.New(c, idem.WithPrefix(prefix), idem.WithLockTTL(lockTTL), idem.WithResultTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		guards[i] = g
	}
	return guards
}

// earliest returns the earliest time received from times until it is closed, or the zero time
// if none is.
func earliest(times <-chan time.Time) time.Time {
	var first time.Time
	for a := range times {
		if first.IsZero() || a.Before(first) {
			first = a
		}
	}
	return first
}
