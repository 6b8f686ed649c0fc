package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/idemlambda/idem/internal/functions/payments/handler"
)

func TestInitFailureIsOneLineNamingTheVariable(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no table inside Lambda", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "REDIS_URL": "redis://127.0.0.1:6379", "PAYMENTS_AUTH": "iam"}, "PAYMENTS_TABLE"},
		{"no Redis inside Lambda", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "PAYMENTS_LEDGER": "memory", "PAYMENTS_AUTH": "iam"}, "REDIS_URL"},
		{"no authorization mode inside Lambda", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "PAYMENTS_LEDGER": "memory", "REDIS_URL": "redis://127.0.0.1:6379"}, "PAYMENTS_AUTH"},
		{"no Redis outside Lambda", map[string]string{}, "REDIS_URL"},
		{"bad ledger", map[string]string{"PAYMENTS_LEDGER": "sqlite"}, "PAYMENTS_LEDGER"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := handler.New(context.Background(), func(k string) string { return tt.env[k] })
			if err == nil {
				t.Fatal("New accepted the settings")
			}
			var out bytes.Buffer
			logInitFailure(&out, err)
			if n := strings.Count(out.String(), "\n"); n != 1 {
				t.Fatalf("%d lines:\n%s", n, out.String())
			}
			var line map[string]any
			if err := json.Unmarshal(out.Bytes(), &line); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out.String())
			}
			if line["level"] != "ERROR" || line["variable"] != tt.want || line["function"] != "payments" ||
				!strings.Contains(line["error"].(string), tt.want) {
				t.Fatalf("line %v, want variable %s", line, tt.want)
			}
		})
	}
}

func TestInitFailureWithoutAVariableIsStillOneLine(t *testing.T) {
	var out bytes.Buffer
	logInitFailure(&out, errors.New("boom"))
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if _, ok := line["variable"]; ok || line["error"] != "boom" {
		t.Fatalf("line %v", line)
	}
}
