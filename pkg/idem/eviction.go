package idem

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// policyNoEviction is the one maxmemory-policy under which the store never forgets a claim or
// a result: a full store refuses new claims instead (Unavailable). Every record the guard writes
// has a TTL, so the volatile-* policies can evict all of them, as the allkeys-* ones can.
const policyNoEviction = "noeviction"

// ErrUnsafeEviction: under WithUnsafeEviction(EvictionRefuse), the store's maxmemory-policy is
// one that can evict claims and results, or it could not be read, so nothing ran. The error of
// such an Unavailable outcome, and the one Wrap returns, match both it and ErrUnavailable.
var ErrUnsafeEviction = errors.New("idem: the store's maxmemory-policy can evict claims and results")

// EvictionAction is what a guard does about a store whose maxmemory-policy can evict its records.
type EvictionAction int

const (
	// EvictionWarn: the guard runs as usual; EvictionPolicy reports the policy Warm read, for the
	// program to log. The default.
	EvictionWarn EvictionAction = iota
	// EvictionRefuse: the guard runs no work until it has read the policy as noeviction from
	// every primary: each call is answered Unavailable (ErrUnsafeEviction) meanwhile. A policy
	// Warm could not read is read by the first call (one more round trip, once); an unsafe one is
	// read again, by the next call, every 10 seconds, so a corrected parameter group takes effect
	// without a new deployment.
	EvictionRefuse
)

// evictionRecheck is how long an unsafe policy is believed before a call under EvictionRefuse
// reads it again. A safe one is believed for the guard's lifetime: reading it on every call
// would cost a round trip each.
const evictionRecheck = 10 * time.Second

// WithUnsafeEviction sets what the guard does when the store's maxmemory-policy is not
// noeviction (see EvictionAction). Default EvictionWarn.
func WithUnsafeEviction(a EvictionAction) Option { return func(o *options) { o.unsafeEviction = a } }

func (a EvictionAction) validate() error {
	if a != EvictionWarn && a != EvictionRefuse {
		return fmt.Errorf("idem: unknown eviction action %d", int(a))
	}
	return nil
}

// evictionSafe reports whether policy, a maxmemory-policy, keeps every claim and result: only
// noeviction does. On a cluster whose primaries differ (a comma-separated list), none is safe.
func evictionSafe(policy string) bool { return policy == policyNoEviction }

// EvictionPolicy returns the store's maxmemory-policy as last read by Warm (or by a call under
// EvictionRefuse): on a cluster the policies of its primaries, sorted and comma-separated when
// they differ; "" while none was read. safe reports whether it keeps every claim and result:
// only noeviction does, since every record the guard writes has a TTL, which the volatile-*
// policies evict as the allkeys-* ones do.
func (g *Guard) EvictionPolicy() (policy string, safe bool) {
	if r := g.eviction.last.Load(); r != nil {
		return r.policy, evictionSafe(r.policy)
	}
	return "", false
}

// evictionState is the store's policy as last read; safe for concurrent use.
type evictionState struct {
	last atomic.Pointer[evictionReading]
}

type evictionReading struct {
	policy string
	at     time.Time
}

// learnEvictionPolicy reads the store's policy and records it; one round trip (on a cluster, one
// per primary, in parallel). It is what Warm adds to the script loads.
func (g *Guard) learnEvictionPolicy(ctx context.Context) (*evictionReading, error) {
	policy, err := g.readEvictionPolicy(ctx)
	if err != nil {
		return nil, fmt.Errorf("idem: read the eviction policy: %w", err)
	}
	r := &evictionReading{policy: policy, at: g.opts.now()}
	g.eviction.last.Store(r)
	return r, nil
}

// learnEvictionPolicyFrom records the policy of a single server from its reply to INFO memory.
func (g *Guard) learnEvictionPolicyFrom(info string, err error) error {
	if err == nil {
		p, ok := policyFromInfo(info)
		if ok {
			g.eviction.last.Store(&evictionReading{policy: p, at: g.opts.now()})
			return nil
		}
		err = errPolicyNotReported
	}
	return fmt.Errorf("idem: read the eviction policy: %w", err)
}

// admitEviction lets a call go ahead, or answers it Unavailable under EvictionRefuse while the
// policy is not known to be noeviction. out.RoundTrips counts a read it made.
func (g *Guard) admitEviction(ctx context.Context) (out Outcome, err error) {
	if g.opts.unsafeEviction != EvictionRefuse {
		return out, nil
	}
	r := g.eviction.last.Load()
	if r != nil && evictionSafe(r.policy) {
		return out, nil
	}
	if r == nil || g.opts.now().Sub(r.at) >= evictionRecheck {
		out.RoundTrips = 1
		if r, err = g.learnEvictionPolicy(ctx); err != nil {
			out.Kind = Unavailable
			return out, fmt.Errorf("%w: %w: %w", ErrUnavailable, ErrUnsafeEviction, err)
		}
		if evictionSafe(r.policy) {
			return out, nil
		}
	}
	out.Kind = Unavailable
	return out, fmt.Errorf("%w: %w: maxmemory-policy is %s, not %s", ErrUnavailable, ErrUnsafeEviction, r.policy, policyNoEviction)
}

// errPolicyNotReported: INFO memory had no maxmemory_policy field.
var errPolicyNotReported = errors.New("INFO memory reports no maxmemory_policy")

// readEvictionPolicy reads maxmemory_policy from INFO memory (CONFIG GET is refused on
// ElastiCache): from the one server, or from every primary of a cluster.
func (g *Guard) readEvictionPolicy(ctx context.Context) (string, error) {
	var infos []string
	if cc, ok := g.client.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			s, err := node.Info(ctx, "memory").Result()
			mu.Lock()
			infos = append(infos, s)
			mu.Unlock()
			return err
		})
		if err != nil {
			return "", err
		}
	} else {
		s, err := g.client.Do(ctx, "info", "memory").Text()
		if err != nil {
			return "", err
		}
		infos = append(infos, s)
	}
	var policies []string
	for _, info := range infos {
		p, ok := policyFromInfo(info)
		if !ok {
			return "", errPolicyNotReported
		}
		if !slices.Contains(policies, p) {
			policies = append(policies, p)
		}
	}
	slices.Sort(policies)
	return strings.Join(policies, ","), nil
}

// policyFromInfo returns the maxmemory_policy field of info, the reply of INFO memory (or of
// INFO), and whether it holds one.
func policyFromInfo(info string) (string, bool) {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "maxmemory_policy:"); ok {
			// A policy name is lower-case letters and dashes; anything else is not one.
			if v == "" || strings.ContainsFunc(v, func(c rune) bool { return (c < 'a' || c > 'z') && c != '-' }) {
				return "", false
			}
			return v, true
		}
	}
	return "", false
}
