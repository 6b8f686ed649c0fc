// Package obs writes the one structured log line each request produces.
//
// The line is JSON from log/slog and is at the same time a CloudWatch Embedded
// Metric Format (EMF) document: CloudWatch Logs turns it into the metrics
// requests, duration_ms and redis_round_trips per function and outcome, with
// no call to the CloudWatch API and no agent. On Lambda, writing the line to
// standard output is all it takes.
package obs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/idemlambda/idem/internal/setting"
)

// Outcomes of a request, the values of Request.Outcome and of the EMF
// dimension "outcome".
const (
	// OutcomeExecuted: the work ran and its result was stored.
	OutcomeExecuted = "executed"
	// OutcomeHandshake: a sender's endpoint check (Slack url_verification,
	// Discord PING, Zoom validation, Twitch challenge, WooCommerce ping) was
	// answered; no work ran, nothing was claimed or forwarded.
	OutcomeHandshake = "handshake"
	// OutcomeReplayed: a completed result was returned again.
	OutcomeReplayed = "replayed"
	// OutcomeInProgress: a duplicate arrived while the first was still running.
	OutcomeInProgress = "in_progress"
	// OutcomeMismatch: a known key arrived with a different payload.
	OutcomeMismatch = "mismatch"
	// OutcomeRejected: the request was refused before any work (bad
	// signature, bad input, too large).
	OutcomeRejected = "rejected"
	// OutcomeError: the work, the sink or the store failed.
	OutcomeError = "error"
)

// EnvLogLevel is the environment variable ParseLevel's value comes from.
const EnvLogLevel = "LOG_LEVEL"

// Namespace is the CloudWatch namespace of the metrics LogRequest emits.
const Namespace = "Idem"

// unknown stands in for an empty dimension value, which CloudWatch rejects.
const unknown = "unknown"

// ParseLevel parses a LOG_LEVEL value: debug, info, warn or error, in any
// case. The empty string means info, the default. Anything else is an error
// naming LOG_LEVEL.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return slog.LevelInfo, fmt.Errorf("obs: %s=%q is not one of debug, info, warn, error", EnvLogLevel, s)
}

// LevelFromEnv reads LOG_LEVEL through getenv with ParseLevel; a value that is
// not a level is a *setting.Error naming LOG_LEVEL.
func LevelFromEnv(getenv func(string) string) (slog.Level, error) {
	v := getenv(EnvLogLevel)
	level, err := ParseLevel(v)
	if err != nil {
		return level, setting.Errorf(EnvLogLevel, "%q is not one of debug, info, warn, error", v)
	}
	return level, nil
}

// NewLogger returns a logger writing JSON lines to w at level and above,
// each carrying the attribute function=<function> (omitted when function is
// empty). LogRequest writes its lines through such a logger without
// log/slog's encoder, in the bytes slog would write (appendRequestLine).
func NewLogger(w io.Writer, level slog.Level, function string) *slog.Logger {
	lw := &lineWriter{w: w}
	h := slog.Handler(slog.NewJSONHandler(lw, &slog.HandlerOptions{Level: level}))
	if function == "" {
		return slog.New(h)
	}
	fn := slog.String("function", function)
	return slog.New(&functionHandler{
		base:     h.WithAttrs([]slog.Attr{fn}),
		function: function,
		out:      lw,
		attrs:    appendStringMember(nil, fn.Key, function),
	})
}

// lineWriter is a logger's output, shared by its slog handler and by
// LogRequest's own encoder, so that lines from either are written whole, one
// at a time.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (lw *lineWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.Write(p)
}

// functionHandler remembers the function attribute already baked into its
// handler, so LogRequest can use it as the EMF dimension without writing a
// second "function" member. While its attributes are strings (the
// function's, and those of Logger.With), it also keeps them encoded, so that
// LogRequest writes its line to out itself; the attributes of Logger.With
// reach the slog handler only when a line other than a request line is
// written (a logger made per request for its request line costs no slog
// handler).
type functionHandler struct {
	base     slog.Handler // the slog handler, with the function attribute
	pending  []slog.Attr  // the attributes of Logger.With, not yet in base
	once     sync.Once
	resolved slog.Handler // base with pending, once needed
	function string
	// out is the logger's output; nil once an attribute is not a string or a
	// group is open, and LogRequest then goes through the slog handler.
	out *lineWriter
	// attrs are the handler's attributes as slog writes them: ,"key":"value"...
	attrs []byte
}

// handler is the slog handler with every attribute.
func (h *functionHandler) handler() slog.Handler {
	if len(h.pending) == 0 {
		return h.base
	}
	h.once.Do(func() { h.resolved = h.base.WithAttrs(h.pending) })
	return h.resolved
}

// Enabled reports whether the slog handler writes level (attributes do not change it).
func (h *functionHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.base.Enabled(ctx, level)
}

// Handle writes r with the slog handler.
func (h *functionHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.handler().Handle(ctx, r)
}

// WithAttrs keeps the function name known across Logger.With.
func (h *functionHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	next := &functionHandler{base: h.base, pending: append(slices.Clip(h.pending), attrs...), function: h.function, out: h.out}
	if next.out == nil {
		return next
	}
	next.attrs = slices.Clip(h.attrs)
	for _, a := range attrs {
		if a.Value.Kind() != slog.KindString || a.Key == "" {
			next.out, next.attrs = nil, nil
			return next
		}
		next.attrs = appendStringMember(next.attrs, a.Key, a.Value.String())
	}
	return next
}

// WithGroup drops the wrapper: inside a group nothing LogRequest writes would
// be top-level, so it could not be an EMF document anyway.
func (h *functionHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return h.handler().WithGroup(name)
}

// Request is what one request did, as LogRequest records it.
type Request struct {
	// Function is the function's name, the EMF dimension "function". When the
	// logger comes from NewLogger its function attribute is used instead, so
	// the line never holds the member twice.
	Function string
	// Provider is the webhook provider; empty for payments.
	Provider string
	// Outcome is one of the Outcome constants.
	Outcome string
	// ID identifies the request for correlation: the provider's event id, or
	// KeyID of an idempotency key. Never a secret, never the body.
	ID string
	// DeliveryID is the sender's own delivery id when its signature does not
	// cover it (GitHub's x-github-delivery GUID), so an operator can find a
	// delivery the sender's console names; empty otherwise.
	DeliveryID string
	// Status is the HTTP status returned.
	Status int
	// Duration is how long the request took.
	Duration time.Duration
	// RoundTrips is the number of Redis round trips spent.
	RoundTrips int
	// Reason is a short machine code for rejected and error outcomes, e.g.
	// "invalid_signature".
	Reason string
	// Err is the error behind an error outcome, if any.
	Err error
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// emfDirectives is the constant part of every line's "_aws" member, encoded once.
var emfDirectives = func() []byte {
	b, err := json.Marshal([]emfDirective{{
		Namespace:  Namespace,
		Dimensions: [][]string{{"function", "outcome"}},
		Metrics:    emfMetrics,
	}})
	if err != nil {
		panic("obs: encode the EMF directives: " + err.Error())
	}
	return b
}()

// emfDocument is the "_aws" member of an EMF document written at the Unix millisecond it
// holds, {"Timestamp": ..., "CloudWatchMetrics": [...]}, its constant part encoded once
// rather than on every request.
type emfDocument int64

// MarshalJSON writes {"Timestamp":...,"CloudWatchMetrics":[...]}.
func (ts emfDocument) MarshalJSON() ([]byte, error) {
	return ts.append(make([]byte, 0, len(emfDirectives)+48)), nil
}

// append appends the document to b.
func (ts emfDocument) append(b []byte) []byte {
	b = append(b, `{"Timestamp":`...)
	b = strconv.AppendInt(b, int64(ts), 10)
	b = append(b, `,"CloudWatchMetrics":`...)
	b = append(b, emfDirectives...)
	return append(b, '}')
}

var emfMetrics = []emfMetric{
	{Name: "requests", Unit: "Count"},
	{Name: "duration_ms", Unit: "Milliseconds"},
	{Name: "redis_round_trips", Unit: "Count"},
}

// Bounds on the request text a request line carries, in bytes as written in
// the JSON line (escapes counted). An id or error message is the sender's to
// make long (a header quoted into an error, an oversized event id), and a
// line must stay readable and cheap whatever a request holds: with both at
// their bound, a request line stays under 2 KiB.
const (
	// MaxIDBytes bounds Request.ID in the line.
	MaxIDBytes = 256
	// MaxErrorBytes bounds the text of Request.Err in the line.
	MaxErrorBytes = 1024
)

// truncatedMarker follows text that Bound cut; the original length follows it.
const truncatedMarker = "...(truncated, "

// Bound returns s when it takes at most max bytes once written as a JSON
// string by log/slog (escapes such as \u0001 counted at their written width);
// otherwise its longest such prefix, cut between characters, followed by
// "...(truncated, N bytes)" where N is len(s). The result is always valid
// UTF-8 where s was.
func Bound(s string, max int) string {
	width := 0
	for i := 0; i < len(s); {
		w, size := jsonWidth(s[i:])
		if width+w > max {
			return s[:i] + truncatedMarker + strconv.Itoa(len(s)) + " bytes)"
		}
		width += w
		i += size
	}
	return s
}

// jsonWidth returns how many bytes the first character of s takes in a JSON
// string as log/slog writes it, and how many bytes of s it is.
func jsonWidth(s string) (width, size int) {
	if b := s[0]; b < utf8.RuneSelf {
		switch {
		case b == '"' || b == '\\' || b == '\n' || b == '\r' || b == '\t':
			return 2, 1
		case b < 0x20:
			return 6, 1 // \u00XX
		}
		return 1, 1
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
		return 6, size // \ufffd, \u2028, \u2029
	}
	return size, size
}

// LogRequest writes exactly one line for r: at error level for OutcomeError,
// info otherwise. The line holds function, provider, outcome, id, delivery_id, status,
// duration_ms (float), redis_round_trips, reason and error (the empty ones
// omitted; delivery_id after id when set), plus requests=1 and an "_aws" member that makes the line an EMF
// document: metrics requests (Count), duration_ms (Milliseconds) and
// redis_round_trips (Count) in Namespace, with
// the dimension set [function, outcome]. An empty function or outcome is
// written as "unknown", since CloudWatch rejects empty dimension values. The
// id and the error are cut by Bound to MaxIDBytes and MaxErrorBytes.
//
// The line is written whatever the logger's level: it carries the metrics,
// which LOG_LEVEL=error must not switch off. The logger must not have an open
// group (Logger.WithGroup): EMF reads top-level members only. A nil l means
// slog.Default().
func LogRequest(ctx context.Context, l *slog.Logger, r Request) {
	if l == nil {
		l = slog.Default()
	}
	h := l.Handler()
	now := time.Now()
	level := slog.LevelInfo
	if r.Outcome == OutcomeError {
		level = slog.LevelError
	}
	fh, ok := h.(*functionHandler)
	if ok && fh.out != nil {
		// The line slog would write, without its reflection on the float and
		// the "_aws" member.
		buf := linePool.Get().(*[]byte)
		*buf = appendRequestLine((*buf)[:0], now, level, fh.attrs, r)
		_, _ = fh.out.Write(*buf)
		if cap(*buf) <= maxPooledLine {
			linePool.Put(buf)
		}
		return
	}
	// Handle directly rather than through l.LogAttrs, which would drop the
	// line (and its metrics) below the configured level.
	_ = h.Handle(ctx, requestRecord(now, level, r, !ok))
}

// requestRecord is r's line as a slog record; withFunction adds the function
// member, which a functionHandler already holds.
func requestRecord(now time.Time, level slog.Level, r Request, withFunction bool) slog.Record {
	attrs := make([]slog.Attr, 0, 13)
	if withFunction {
		attrs = append(attrs, slog.String("function", orUnknown(r.Function)))
	}
	if r.Provider != "" {
		attrs = append(attrs, slog.String("provider", r.Provider))
	}
	attrs = append(attrs, slog.String("outcome", orUnknown(r.Outcome)))
	if r.ID != "" {
		attrs = append(attrs, slog.String("id", Bound(r.ID, MaxIDBytes)))
	}
	if r.DeliveryID != "" {
		attrs = append(attrs, slog.String("delivery_id", Bound(r.DeliveryID, MaxIDBytes)))
	}
	attrs = append(attrs,
		slog.Int("status", r.Status),
		slog.Float64("duration_ms", durationMillis(r.Duration)),
		slog.Int("redis_round_trips", r.RoundTrips),
	)
	if r.Reason != "" {
		attrs = append(attrs, slog.String("reason", r.Reason))
	}
	if r.Err != nil {
		attrs = append(attrs, slog.String("error", Bound(r.Err.Error(), MaxErrorBytes)))
	}
	attrs = append(attrs,
		slog.Int("requests", 1),
		slog.Any("_aws", emfDocument(now.UnixMilli())),
	)
	rec := slog.NewRecord(now, level, "request", 0)
	rec.AddAttrs(attrs...)
	return rec
}

func durationMillis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// linePool holds the buffers of request lines; one over maxPooledLine (a long
// handler attribute) is not kept.
var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledLine = 8 << 10

// appendRequestLine appends r's line, newline included, in the bytes a
// slog.JSONHandler writes for requestRecord(now, level, r, false) when its
// attributes are handlerAttrs (TestRequestLineIsTheLineSlogWrites).
func appendRequestLine(b []byte, now time.Time, level slog.Level, handlerAttrs []byte, r Request) []byte {
	b = append(b, `{"time":"`...)
	b = now.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"`...)
	b = append(b, level.String()...)
	b = append(b, `","msg":"request"`...)
	b = append(b, handlerAttrs...)
	if r.Provider != "" {
		b = appendStringMember(b, "provider", r.Provider)
	}
	b = appendStringMember(b, "outcome", orUnknown(r.Outcome))
	if r.ID != "" {
		b = appendStringMember(b, "id", Bound(r.ID, MaxIDBytes))
	}
	if r.DeliveryID != "" {
		b = appendStringMember(b, "delivery_id", Bound(r.DeliveryID, MaxIDBytes))
	}
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = append(b, `,"duration_ms":`...)
	b = appendJSONFloat(b, durationMillis(r.Duration))
	b = append(b, `,"redis_round_trips":`...)
	b = strconv.AppendInt(b, int64(r.RoundTrips), 10)
	if r.Reason != "" {
		b = appendStringMember(b, "reason", r.Reason)
	}
	if r.Err != nil {
		b = appendStringMember(b, "error", Bound(r.Err.Error(), MaxErrorBytes))
	}
	b = append(b, `,"requests":1,"_aws":`...)
	b = emfDocument(now.UnixMilli()).append(b)
	return append(b, "}\n"...)
}

// appendStringMember appends ,"key":"value" as slog's JSON handler writes it.
func appendStringMember(b []byte, key, value string) []byte {
	b = append(b, ',')
	b = appendJSONString(b, key)
	b = append(b, ':')
	return appendJSONString(b, value)
}

// appendJSONString appends s quoted and escaped as slog's JSON handler does:
// quote, backslash and control characters escaped (\n, \r, \t, else
// \u00XX), invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped, HTML
// characters kept.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendJSONFloat appends f as encoding/json writes a float64, which is how
// slog writes one: like strconv's shortest 'f' form, in exponent form below
// 1e-6 and from 1e21, the exponent without a leading zero.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b
}

// Served calls serve, the whole of one request, and writes the request's one
// line: the Request serve returns, with Duration the time serve took. It
// returns serve's response.
func Served[Resp any](ctx context.Context, l *slog.Logger, serve func() (Resp, Request)) Resp {
	start := time.Now()
	resp, r := serve()
	r.Duration = time.Since(start)
	LogRequest(ctx, l, r)
	return resp
}

func orUnknown(s string) string {
	if s == "" {
		return unknown
	}
	return s
}

// KeyID returns a short, stable, non-reversible identifier for an
// idempotency key, for Request.ID: the first 16 hex digits of its SHA-256.
// Logs can then correlate retries of one key without holding the key.
func KeyID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}
