package idem

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// isDone reports whether ctx's Done channel is closed now, without waiting.
func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// ended waits up to bound for ctx to end, failing the test if it does not.
func ended(t *testing.T, ctx context.Context, bound time.Duration) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(bound):
		t.Fatalf("not ended %v after its deadline", bound)
	}
}

func TestStoreContextEndsAtItsDeadline(t *testing.T) {
	var a alarm
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	at := time.Now().Add(20 * time.Millisecond)
	s := a.start(parent, at)
	defer s.release()
	if d, ok := s.Deadline(); !ok || !d.Equal(at) {
		t.Fatalf("Deadline() = %v, %v; want %v, true", d, ok, at)
	}
	if s.Value(key{}) != "v" {
		t.Fatal("the parent's value is lost")
	}
	if err := s.Err(); err != nil {
		t.Fatalf("Err() before the deadline = %v", err)
	}
	ended(t, s, 5*time.Second)
	if time.Now().Before(at) {
		t.Fatal("ended before its deadline")
	}
	if err := s.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err() = %v, want DeadlineExceeded", err)
	}
	s.release() // after the end: nothing changes
	if err := s.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err() after release = %v, want DeadlineExceeded", err)
	}
}

func TestStoreContextReleaseCancelsIt(t *testing.T) {
	var a alarm
	s := a.start(context.Background(), time.Now().Add(time.Hour))
	s.release()
	if !isDone(s) {
		t.Fatal("Done is open after release")
	}
	if err := s.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err() = %v, want Canceled", err)
	}
	if n := len(a.pending); n != 0 {
		t.Fatalf("%d contexts pending after release", n)
	}
}

// A resumed process's store context is ended on its first look, before the alarm rings: the alarm
// is stopped here, as a paused process's timers are late. Err and Done each read the clock.
func TestStoreContextReadsTheClockBeforeTheAlarm(t *testing.T) {
	for _, look := range []string{"Err", "Done"} {
		var a alarm
		s := a.start(context.Background(), time.Now().Add(100*time.Millisecond))
		a.mu.Lock()
		stopped := a.timer.Stop()
		a.mu.Unlock()
		if !stopped {
			t.Fatal("the alarm rang before it could be stopped")
		}
		time.Sleep(110 * time.Millisecond)
		if look == "Err" {
			if err := s.Err(); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Err() past the deadline = %v, want DeadlineExceeded", err)
			}
		}
		if !isDone(s) {
			t.Fatalf("first look %s: Done is open past the deadline", look)
		}
		if err := s.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("first look %s: Err() = %v, want DeadlineExceeded", look, err)
		}
	}
}

// One timer serves deadlines in any order: an earlier deadline sets the alarm earlier, a ring sets
// it for the next pending one, and released contexts are skipped.
func TestStoreContextsShareOneAlarm(t *testing.T) {
	var a alarm
	now := time.Now()
	late := a.start(context.Background(), now.Add(60*time.Millisecond))
	released := a.start(context.Background(), now.Add(30*time.Millisecond))
	early := a.start(context.Background(), now.Add(15*time.Millisecond))
	far := a.start(context.Background(), now.Add(time.Hour))
	defer far.release()
	released.release()

	ended(t, early, 5*time.Second)
	if err := late.Err(); err != nil && time.Now().Before(late.at) {
		t.Fatalf("the later context ended early: %v", err)
	}
	ended(t, late, 5*time.Second)
	if !errors.Is(late.Err(), context.DeadlineExceeded) || !errors.Is(released.Err(), context.Canceled) {
		t.Fatalf("Err() = %v and %v, want DeadlineExceeded and Canceled", late.Err(), released.Err())
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pending) != 1 || a.pending[0] != far || !a.armed.Equal(far.at) {
		t.Fatalf("pending %d, armed %v: want only the far context, the alarm set for it", len(a.pending), a.armed)
	}
}

// Many store calls at once, as idemsqs and concurrent invocations make them (go test -race).
func TestStoreContextsConcurrently(t *testing.T) {
	var a alarm
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			s := a.start(context.Background(), time.Now().Add(time.Duration(i%8)*time.Millisecond))
			if i%2 == 0 {
				s.release()
				return
			}
			select {
			case <-s.Done():
			case <-time.After(5 * time.Second):
				t.Error("not ended 5s after its deadline")
			}
		})
	}
	wg.Wait()
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(a.pending); n != 0 {
		t.Fatalf("%d contexts still pending", n)
	}
}
