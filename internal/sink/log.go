package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// Log writes each event as one JSON line:
//
//	{"provider":"stripe","id":"evt_1","type":"...","object_id":"...","received_at":"...",
//	 "signed":["id","type","object_id","payload"],"body":{...}}
//
// with the verified body embedded as JSON, not as a string. delivery_id and
// unsigned appear when the event has them, as in the SQS envelope; "payload"
// in signed names the body. It is the default
// sink, for development and for consumers that subscribe to the log group.
// A Log is safe for concurrent use; each line is written with a single Write.
type Log struct {
	mu sync.Mutex
	w  io.Writer
}

// NewLog returns a sink that writes one JSON line per event to w.
func NewLog(w io.Writer) *Log {
	return &Log{w: w}
}

// logLine is the envelope with the payload under "body" rather than "payload".
type logLine struct {
	Metadata
	Body json.RawMessage `json:"body"`
}

// Send writes e as one line. It returns an error if the body is not JSON or
// the write fails.
func (l *Log) Send(ctx context.Context, e Event) error {
	b, err := json.Marshal(logLine{Metadata: metaOf(e), Body: rawJSON(e.Body)})
	if err != nil {
		return fmt.Errorf("sink: encode %s event %s for log: %w", e.Provider, e.ID, err)
	}
	b = append(b, '\n')

	l.mu.Lock()
	defer l.mu.Unlock()
	if err := live(ctx); err != nil {
		return fmt.Errorf("sink: write %s event %s to log: not written: %w", e.Provider, e.ID, err)
	}
	if _, err := l.w.Write(b); err != nil {
		return fmt.Errorf("sink: write %s event %s to log: %w", e.Provider, e.ID, err)
	}
	return nil
}
