package idem

import (
	"sync"
	"sync/atomic"
	"time"
)

// Claims whose reply was lost. A claim can reach Redis and take the key while its reply is lost
// (a timeout, a dropped connection): the call answers Unavailable, and the key stays claimed by
// a token nobody holds until the claim expires, blocking every retry for up to a claim TTL. The
// guard keeps the tokens of such claims for a while, per key, so that the next call of the key in
// this environment claims with the same token: it finds its own record and runs at once (within
// what is left of that claim) instead of waiting for it to expire.

// maxLostClaims bounds the tokens kept; beyond it the oldest is forgotten (its key then waits
// for the claim's expiry, as without this).
const maxLostClaims = 256

// lostClaim is a claim sent whose reply never came.
type lostClaim struct {
	tok       token
	fp        Fingerprint
	expiresAt time.Time
}

// lostClaims holds the lost claims of one guard by record key.
type lostClaims struct {
	n     atomic.Int32 // entries, read without the lock: 0 on every call but after a lost reply
	mu    sync.Mutex
	byKey map[string]lostClaim
	order []string
}

// remember keeps c's claim, whose reply was lost.
func (l *lostClaims) remember(c *call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byKey == nil {
		l.byKey = map[string]lostClaim{}
	}
	if _, ok := l.byKey[c.rk]; !ok {
		l.order = append(l.order, c.rk)
	}
	l.byKey[c.rk] = lostClaim{tok: c.tok, fp: c.fp, expiresAt: c.now.Add(c.lockTTL)}
	for len(l.order) > maxLostClaims {
		delete(l.byKey, l.order[0])
		l.order = l.order[1:]
	}
	l.n.Store(int32(len(l.byKey)))
}

// take returns, and forgets, the token of a lost claim of rk with fingerprint fp that may still
// be in Redis at now.
func (l *lostClaims) take(rk string, fp Fingerprint, now time.Time) (token, bool) {
	if l.n.Load() == 0 {
		return token{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lc, ok := l.byKey[rk]
	if !ok {
		return token{}, false
	}
	delete(l.byKey, rk)
	for i, k := range l.order {
		if k == rk {
			l.order = append(l.order[:i], l.order[i+1:]...)
			break
		}
	}
	l.n.Store(int32(len(l.byKey)))
	return lc.tok, lc.fp == fp && now.Before(lc.expiresAt)
}
