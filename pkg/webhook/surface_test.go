package webhook_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxExported is the budget of exported identifiers of package webhook:
// every exported const, var, func, type, method and struct field counts.
const maxExported = 60

// exported lists the exported identifiers the Go files of dir declare, tests
// left out.
func exported(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	for _, file := range parseNonTest(t, dir) {
		for _, decl := range file.Decls {
			names = append(names, declared(decl)...)
		}
	}
	return names
}

// parseNonTest parses the Go files of dir, tests left out.
func parseNonTest(t *testing.T, dir string) []*ast.File {
	t.Helper()
	fset := token.NewFileSet()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	return files
}

// declared lists the exported names decl declares: a func or method, consts,
// vars, types and the named fields of exported struct types.
func declared(decl ast.Decl) []string {
	var ids []*ast.Ident
	switch d := decl.(type) {
	case *ast.FuncDecl:
		ids = append(ids, d.Name)
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.ValueSpec:
				ids = append(ids, s.Names...)
			case *ast.TypeSpec:
				ids = append(ids, s.Name)
				if st, ok := s.Type.(*ast.StructType); ok && s.Name.IsExported() {
					for _, field := range st.Fields.List {
						ids = append(ids, field.Names...)
					}
				}
			}
		}
	}
	var names []string
	for _, id := range ids {
		if id.IsExported() {
			names = append(names, id.Name)
		}
	}
	return names
}

// The public surface stays small: what a user needs to verify deliveries and
// nothing of how the schemes are built.
func TestExportedIdentifiersStayWithinBudget(t *testing.T) {
	names := exported(t, ".")
	t.Logf("%d exported identifiers: %s", len(names), strings.Join(names, " "))
	if len(names) > maxExported {
		t.Errorf("%d exported identifiers, budget %d", len(names), maxExported)
	}
	if n := len(exported(t, "webhooktest")); n > 15 {
		t.Errorf("webhooktest exports %d identifiers, budget 15", n)
	}
}
