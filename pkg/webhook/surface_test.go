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
	var names []string
	add := func(id *ast.Ident) {
		if id.IsExported() {
			names = append(names, id.Name)
		}
	}
	for _, file := range files {
		for _, decl := range file.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				add(d.Name)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							add(n)
						}
					case *ast.TypeSpec:
						add(s.Name)
						if st, ok := s.Type.(*ast.StructType); ok && s.Name.IsExported() {
							for _, field := range st.Fields.List {
								for _, n := range field.Names {
									add(n)
								}
							}
						}
					}
				}
			}
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
