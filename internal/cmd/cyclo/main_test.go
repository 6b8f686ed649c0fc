package main

import (
	"strings"
	"testing"
)

func TestReadsGocycloListing(t *testing.T) {
	out := "43 webhook HMACPresetFromEnv pkg/webhook/hmac.go:57:1\n" +
		"16 main (*measurer).measureCore bench/compare/ours.go:384:1\n"
	got, err := parseListing([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != (listed{43, "webhook HMACPresetFromEnv", "pkg/webhook/hmac.go", 57}) ||
		got[1] != (listed{16, "main (*measurer).measureCore", "bench/compare/ours.go", 384}) {
		t.Fatalf("got %+v", got)
	}
	if _, err := parseListing([]byte("Average: 2.3\n")); err == nil {
		t.Fatal("a line that is not a listed function: got no error")
	}
}

func TestReasonIsTheCommentBlockDirectlyAboveTheFunc(t *testing.T) {
	src := strings.Split(`package x

// parse reads the header.
//
//cyclo:one case per header form of the published grammar
func parse() {}

// cyclo: the older spacing is accepted too
func older() {}

//cyclo:
func emptyReason() {}

//cyclo:a reason separated by a blank line does not count

func detached() {}

// plain reads nothing.
func plain() {}
`, "\n")
	for line, want := range map[int]bool{6: true, 9: true, 12: false, 16: false, 19: false, 1: false} {
		if got := reasonAbove(src, line); got != want {
			t.Errorf("func on line %d (%q): reason %v, want %v", line, src[line-1], got, want)
		}
	}
}

func TestGoRunsDownloadLinesAreNotAFailure(t *testing.T) {
	for stderr, want := range map[string]bool{
		"exit status 1\n": true,
		"go: downloading github.com/fzipp/gocyclo v0.6.0\nexit status 1\n": true,
		"go: github.com/fzipp/gocyclo@v9: not found\nexit status 1\n":      false,
		"go: downloading x v1\n": false,
		"":                       false,
	} {
		if got := onlyListed(stderr); got != want {
			t.Errorf("onlyListed(%q) = %v, want %v", stderr, got, want)
		}
	}
}
