package testsupport

import (
	"io"
	"net/http"
	"testing"
)

// RoundTrip sends req with http.DefaultClient and returns the response with its whole body,
// already read and closed. A transport or read error fails the test.
func RoundTrip(t testing.TB, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read the response to %s %s: %v", req.Method, req.URL, err)
	}
	return resp, body
}
