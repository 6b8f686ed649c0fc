package ledger

import (
	"context"
	"fmt"
	"sync"
)

// Memory is a Ledger held in process memory, for local runs and tests. It keeps the contract of
// [DynamoDB] but nothing survives the process, and each process has its own. It is safe for
// concurrent use. The zero value is not usable; call [NewMemory].
type Memory struct {
	mu sync.Mutex
	// Each payment is held once, under both its key and its id: the maps' slots stay a
	// pointer wide, which keeps their growth cheap, and are never handed out.
	byKey map[string]*Payment
	byID  map[string]*Payment
}

var _ Ledger = (*Memory)(nil)

// NewMemory returns an empty in-memory ledger.
func NewMemory() *Memory {
	return &Memory{byKey: map[string]*Payment{}, byID: map[string]*Payment{}}
}

// Create implements [Ledger].
func (m *Memory) Create(ctx context.Context, scopedKey string, p Payment) (Payment, error) {
	p, err := prepare(ctx, scopedKey, p)
	if err != nil {
		return Payment{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if existing, ok := m.byKey[scopedKey]; ok {
		return refused(ctx, *existing)
	}
	if err := live(ctx); err != nil {
		return Payment{}, fmt.Errorf("ledger: create payment %s: %w", p.ID, err)
	}
	if _, ok := m.byID[p.ID]; ok {
		return Payment{}, fmt.Errorf("%w: %s", ErrDuplicateID, p.ID)
	}
	stored := new(Payment)
	*stored = p
	m.byKey[scopedKey] = stored
	m.byID[p.ID] = stored
	return p, nil
}

// Get implements [Ledger].
func (m *Memory) Get(ctx context.Context, principal, id string) (Payment, error) {
	if err := ctx.Err(); err != nil {
		return Payment{}, fmt.Errorf("ledger: get payment %s: %w", id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.byID[id]
	if !ok || p.Principal != principal {
		return Payment{}, ErrNotFound
	}
	return *p, nil
}
