package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/samples"
	"github.com/idemlambda/idem/internal/samtemplate"
)

func TestRunWritesEverySampleAndTheEnvFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "events")
	now := time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)
	if err := run("../../template.yaml", dir, now); err != nil {
		t.Fatal(err)
	}
	tpl, err := samtemplate.Load("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	all, err := samples.All(tpl)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		ev, err := samples.Read(filepath.Join(dir, s.File))
		if err != nil {
			t.Fatal(err)
		}
		if ev.RequestContext.TimeEpoch != now.UnixMilli() {
			t.Errorf("%s: timeEpoch %d, want %d", s.File, ev.RequestContext.TimeEpoch, now.UnixMilli())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, samples.EnvFile)); err != nil {
		t.Error(err)
	}
	if err := run("no-such-template.yaml", dir, now); err == nil {
		t.Error("run with a missing template succeeded")
	}
}
