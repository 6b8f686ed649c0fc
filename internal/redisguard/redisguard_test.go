package redisguard_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemlambda/idem/internal/redisconn"
	"github.com/idemlambda/idem/internal/redisguard"
	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/internal/testsupport"
	"github.com/idemlambda/idem/pkg/idem"
)

func TestOpenUsesTheGivenClientAndOpensNothing(t *testing.T) {
	client := testsupport.StartMiniredis(t).NewClient()

	guard, conn, err := redisguard.Open(t.Context(), redisguard.Config{Client: client})
	if err != nil || guard == nil {
		t.Fatalf("Open = %v, %v; want a guard", guard, err)
	}
	if conn != nil {
		t.Fatalf("Open opened a connection although a client was given")
	}
}

func TestOpenOpensAConnectionFromSettings(t *testing.T) {
	m := testsupport.StartMiniredis(t)
	guard, conn, err := redisguard.Open(t.Context(), redisguard.Config{
		Settings: redisconn.Settings{URL: "redis://" + m.Addr()},
	})
	if err != nil || guard == nil || conn == nil {
		t.Fatalf("Open = %v, %v, %v; want a guard and a connection", guard, conn, err)
	}
	defer func() { _ = conn.Close() }()
	if err := conn.Client.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("the opened connection does not answer: %v", err)
	}
}

func TestOpenReportsABadSettingAsASettingError(t *testing.T) {
	_, conn, err := redisguard.Open(t.Context(), redisguard.Config{})
	var se *setting.Error
	if !errors.As(err, &se) || se.Var != redisconn.EnvURL || !strings.HasPrefix(err.Error(), "redis: ") {
		t.Fatalf("Open without a URL = %v; want a redis: *setting.Error for %s", err, redisconn.EnvURL)
	}
	if conn != nil {
		t.Fatalf("Open returned a connection with its error")
	}
}

func TestOpenLeavesTheGivenClientOpenWhenTheGuardCannotBeBuilt(t *testing.T) {
	client := testsupport.StartMiniredis(t).NewClient()

	_, _, err := redisguard.Open(t.Context(), redisguard.Config{
		Client:       client,
		GuardOptions: []idem.Option{idem.WithPrefix("")},
	})
	if err == nil || !strings.HasPrefix(err.Error(), "idempotency guard: ") {
		t.Fatalf("Open with an empty prefix = %v; want an idempotency guard error", err)
	}
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("the given client was closed: %v", err)
	}
}
