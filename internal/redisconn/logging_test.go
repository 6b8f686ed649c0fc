package redisconn

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
)

func TestSlogLoggerWritesOneJSONLinePerMessage(t *testing.T) {
	var buf bytes.Buffer
	l := slogLogger{slog.New(slog.NewJSONHandler(&buf, nil))}
	l.Printf(context.Background(), "redis: %s:%d: connection pool: %v", "127.0.0.1", 6379, "dial tcp: connection refused\nsecond line")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("not one JSON object: %v: %q", err, buf.String())
	}
	if bytes.Count(buf.Bytes(), []byte("\n")) != 1 {
		t.Errorf("want exactly one line, got %q", buf.String())
	}
	if rec["level"] != "WARN" || rec["msg"] != "redis client" ||
		rec["detail"] != "redis: 127.0.0.1:6379: connection pool: dial tcp: connection refused\nsecond line" {
		t.Errorf("record %v", rec)
	}
}
