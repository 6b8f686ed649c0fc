package idemhttp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/idemlambda/idem/internal/refusal"
)

// Handler returns next guarded by m, as net/http middleware: for containers, and for Lambda
// functions behind the Lambda Web Adapter. Requests of unguarded methods reach next untouched;
// the others are read whole (up to the body limit) and answered as the package describes, with
// next's response buffered so it can be stored.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !m.guards(r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, int64(m.maxBody)+1))
		if err != nil {
			write(w, errorResponse(400, refusal.CodeInvalidRequest, "body: could not be read"))
			return
		}
		req := &Request{Method: r.Method, Path: r.URL.Path, Header: r.Header, Body: body, Event: r}
		resp, _ := m.serve(r.Context(), req, func(ctx context.Context) (response, error) {
			inner := r.Clone(ctx)
			inner.Body = io.NopCloser(bytes.NewReader(body))
			rec := &recorder{header: http.Header{}}
			next.ServeHTTP(rec, inner)
			return rec.response(), nil
		})
		write(w, resp)
	})
}

func write(w http.ResponseWriter, resp response) {
	h := w.Header()
	for name, values := range resp.Header {
		h[http.CanonicalHeaderKey(name)] = values
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// recorder buffers a handler's response.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

func (r *recorder) response() response {
	r.WriteHeader(http.StatusOK)
	h := make(map[string][]string, len(r.header))
	for name, values := range r.header {
		h[strings.ToLower(name)] = values
	}
	return response{Status: r.status, Header: h, Body: r.body.Bytes()}
}
