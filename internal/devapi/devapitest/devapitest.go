// Package devapitest serves the local API of package devapi in tests.
package devapitest

import (
	"context"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/idemlambda/idem/internal/devapi"
)

// Start builds the API cfg describes and serves it on a test server, both closed at cleanup (an
// error closing the API fails the test), and returns the API and the server's URL. The
// function logs and the access log are discarded unless cfg sets them.
func Start(t testing.TB, cfg devapi.Config) (*devapi.API, string) {
	t.Helper()
	if cfg.LogOutput == nil {
		cfg.LogOutput = io.Discard
	}
	if cfg.AccessLog == nil {
		cfg.AccessLog = io.Discard
	}
	api, err := devapi.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(func() {
		srv.Close()
		if err := api.Close(); err != nil {
			t.Error(err)
		}
	})
	return api, srv.URL
}
