package main

import (
	"go/parser"
	"go/token"
	"slices"
	"strings"
	"testing"
)

func parseSource(t *testing.T, src string) parsedPackage {
	t.Helper()
	p := parsedPackage{fset: token.NewFileSet()}
	f, err := parser.ParseFile(p.fset, "x.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	p.files = append(p.files, f)
	return p
}

func TestCountsExportedNamesMethodsAndFieldsOfExportedTypesOnly(t *testing.T) {
	p := parseSource(t, `package x
import "io"
const A, b = 1, 2
var (V int; w int)
func F() {}
func g() {}
type T struct { Name string; hidden int; io.Reader; *Inner; X, y int }
type Inner struct{ Z int }
type hidden struct { Field int }
type G[P any] struct{ Val P }
func (T) M() {}
func (*T) m() {}
func (hidden) Exported() {}
func (g *G[P]) Get() P { return g.Val }
type I interface{ Method() }
`)
	got := exportedNames(p.files)
	want := []string{"A", "V", "F", "T", "T.Name", "T.Reader", "T.Inner", "T.X", "Inner", "Inner.Z", "G", "G.Val", "T.M", "G.Get", "I"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

func TestFindsEnvironmentReadsWhateverOsIsImportedAs(t *testing.T) {
	p := parseSource(t, `package x
import sys "os"
func a() string { return sys.Getenv("A") }
func b() { _, _ = sys.LookupEnv("B"); _ = sys.Environ(); _ = sys.Args }
`)
	got := environmentCalls(p)
	if len(got) != 3 || !strings.HasSuffix(got[0], "x.go:3 os.Getenv") || !strings.HasSuffix(got[1], "os.LookupEnv") || !strings.HasSuffix(got[2], "os.Environ") {
		t.Fatalf("got %q; want the Getenv, LookupEnv and Environ calls with their lines", got)
	}
	if got := environmentCalls(parseSource(t, "package x\nfunc Getenv(string) string { return \"\" }\nvar os struct{ Getenv func(string) string }\nvar _ = os.Getenv\n")); len(got) != 0 {
		t.Fatalf("a file that does not import os: got %q, want nothing", got)
	}
}

func TestOnlyPublicMainAndInternalPackagesMayBeListed(t *testing.T) {
	got := strayPackages([]string{
		module + "/pkg/idem idem",
		module + "/pkg/webhook/webhooktest webhooktest",
		module + "/functions/webhook main",
		module + "/internal/config config",
		module + "/functions/payments/internal/handler handler",
		module + "/pkg/setting setting",
		module + "/functions/webhook/handler handler",
	})
	if len(got) != 2 || !strings.Contains(got[0], "pkg/setting") || !strings.Contains(got[1], "functions/webhook/handler") {
		t.Fatalf("got %q; want pkg/setting and functions/webhook/handler reported", got)
	}
}
