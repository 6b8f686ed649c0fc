package setting_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/idemlambda/idem/internal/setting"
)

func TestErrorNamesTheVariableThroughWrapping(t *testing.T) {
	err := fmt.Errorf("init: %w", setting.Errorf("REDIS_URL", "must be a redis:// or rediss:// URL, got scheme %q", "http"))
	var se *setting.Error
	if !errors.As(err, &se) {
		t.Fatalf("errors.As found no *setting.Error in %v", err)
	}
	if se.Var != "REDIS_URL" {
		t.Errorf("Var = %q, want REDIS_URL", se.Var)
	}
	if got, want := err.Error(), `init: REDIS_URL: must be a redis:// or rediss:// URL, got scheme "http"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
