package rietest

import (
	"context"
	"debug/elf"
	"os"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/samtemplate"
)

func TestBothFunctionsCrossCompileForArm64(t *testing.T) {
	// A bound on the build, generous: a cold cross-compile of every dependency on a busy 2-core
	// machine has taken over 5 minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, code := range []samtemplate.Code{samtemplate.Webhook, samtemplate.Payments} {
		path, err := buildBootstrap(ctx, code, "arm64", t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		machine := f.Machine
		f.Close()
		if machine != elf.EM_AARCH64 {
			t.Errorf("%s bootstrap is for %s, want EM_AARCH64", code, machine)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("functions/%s: linux/arm64 bootstrap %d bytes (%.1f MiB)", code, fi.Size(), float64(fi.Size())/(1<<20))
	}
}
