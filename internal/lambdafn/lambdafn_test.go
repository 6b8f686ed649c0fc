package lambdafn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/setting"
)

// fakeHandler records what the skeleton did with it.
type fakeHandler struct {
	steps         []string
	primeDeadline time.Time
}

func (f *fakeHandler) Handle(_ context.Context, ev string) (string, error) {
	return "handled " + ev, nil
}

func (f *fakeHandler) Prime(ctx context.Context) error {
	f.steps = append(f.steps, "prime")
	f.primeDeadline, _ = ctx.Deadline()
	return errors.New("redis down") // ignored: the first event meets Redis itself
}

func (f *fakeHandler) Close() error {
	f.steps = append(f.steps, "close")
	return nil
}

func TestRunBuildsPrimesWithinTheWarmUpStartsAndCloses(t *testing.T) {
	f := &fakeHandler{}
	var gotOpts int
	var gotEnv string
	build := func(_ context.Context, getenv func(string) string, opts ...redisconn.Option) (*fakeHandler, error) {
		f.steps, gotOpts, gotEnv = append(f.steps, "build"), len(opts), getenv("X")
		return f, nil
	}
	var out bytes.Buffer
	before := time.Now()
	code := Run([]slog.Attr{slog.String("function", "test")}, build, func(k string) string { return map[string]string{"X": "x"}[k] }, &out,
		func(h func(context.Context, string) (string, error)) {
			r, _ := h(context.Background(), "ev")
			f.steps = append(f.steps, r)
		})
	after := time.Now()
	if code != 0 || fmt.Sprint(f.steps) != "[build prime handled ev close]" {
		t.Fatalf("status %d, steps %v; want build, prime, handle, close", code, f.steps)
	}
	if gotOpts != 1 || gotEnv != "x" {
		t.Fatalf("build got %d Redis options (want the warm-up) and X=%q", gotOpts, gotEnv)
	}
	// The deadline is the start of build plus the warm-up: one bound for both steps.
	if d := f.primeDeadline; d.Before(before.Add(redisconn.DefaultWarmUp)) || d.After(after.Add(redisconn.DefaultWarmUp)) {
		t.Fatalf("prime deadline %v, want %s after build started", d, redisconn.DefaultWarmUp)
	}
	if out.Len() != 0 {
		t.Fatalf("a successful init wrote %q", out.String())
	}
}

func TestRunWritesOneLineNamingTheVariableWhenBuildFails(t *testing.T) {
	for _, tc := range []struct {
		err      error
		variable any
	}{
		{fmt.Errorf("payments: %w", &setting.Error{Var: "PAYMENTS_TABLE", Reason: "required"}), "PAYMENTS_TABLE"},
		{errors.New("boom"), nil},
	} {
		build := func(context.Context, func(string) string, ...redisconn.Option) (*fakeHandler, error) {
			return nil, tc.err
		}
		var out bytes.Buffer
		started := false
		code := Run([]slog.Attr{slog.String("function", "payments"), slog.String("provider", "stripe")}, build,
			func(string) string { return "" }, &out, func(func(context.Context, string) (string, error)) { started = true })
		if code != 1 || started {
			t.Fatalf("%v: status %d, started %v; want 1 and no start", tc.err, code, started)
		}
		if n := strings.Count(out.String(), "\n"); n != 1 {
			t.Fatalf("%d lines:\n%s", n, out.String())
		}
		var line map[string]any
		if err := json.Unmarshal(out.Bytes(), &line); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out.String())
		}
		if line["level"] != "ERROR" || line["msg"] != "init failed" || line["function"] != "payments" ||
			line["provider"] != "stripe" || line["variable"] != tc.variable || line["error"] != tc.err.Error() {
			t.Fatalf("line %v", line)
		}
	}
}
