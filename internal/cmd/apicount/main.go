// Command apicount checks the shape of the module's public API, as CI runs it (make api-count):
//
//   - the exported identifiers of each public package (exported top-level constants, variables,
//     functions and types, exported methods of exported types, exported fields of exported
//     structs; non-test files only) are at most -max in total and at most -max-webhook in
//     pkg/webhook;
//   - go list ./... shows no package outside internal/ that is neither a public package nor a
//     main package;
//   - no public package's non-test files call os.Getenv, os.LookupEnv or os.Environ: a library
//     takes options, the program maps the environment to them;
//   - pkg/webhook does not depend on aws-lambda-go (go list -deps).
//
// With -report it prints the counts and every finding and exits 0; otherwise it exits 1 on any
// finding. It runs from the module root.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// module is the import path of the module whose API is checked.
const module = "github.com/idemlambda/idem"

// publicPackages are the library's packages, relative to the module root.
var publicPackages = []string{"pkg/idem", "pkg/idem/idemhttp", "pkg/idem/idemsqs", "pkg/webhook", "pkg/webhook/webhooktest"}

// environmentReaders are the functions of package os a public package must not call.
var environmentReaders = map[string]bool{"Getenv": true, "LookupEnv": true, "Environ": true}

func main() {
	report := flag.Bool("report", false, "print the counts and findings, and exit 0 whatever they are")
	limit := flag.Int("max", 220, "most exported identifiers across the public packages")
	webhookLimit := flag.Int("max-webhook", 60, "most exported identifiers in pkg/webhook")
	flag.Parse()

	findings, err := check(os.Stdout, ".", *limit, *webhookLimit)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apicount:", err)
		os.Exit(2)
	}
	label := "FAIL:"
	if *report {
		label = "over limit (reported only):"
	}
	for _, f := range findings {
		fmt.Println(label, f)
	}
	switch {
	case len(findings) == 0:
		fmt.Println("apicount: ok")
	case *report:
		fmt.Printf("apicount: %d finding(s), reported only (-report): not enforced\n", len(findings))
	default:
		fmt.Printf("apicount: %d finding(s)\n", len(findings))
		os.Exit(1)
	}
}

// check runs every check on the module in root, prints the counts to w and returns the
// findings.
func check(w io.Writer, root string, limit, webhookLimit int) ([]string, error) {
	var findings []string
	total := 0
	for _, rel := range publicPackages {
		pkg, err := parsePackage(filepath.Join(root, rel))
		if err != nil {
			return nil, err
		}
		n := len(exportedNames(pkg.files))
		total += n
		fmt.Fprintf(w, "%-26s %4d exported\n", rel, n)
		if rel == "pkg/webhook" && n > webhookLimit {
			findings = append(findings, fmt.Sprintf("pkg/webhook exports %d identifiers, more than %d", n, webhookLimit))
		}
		for _, call := range environmentCalls(pkg) {
			findings = append(findings, fmt.Sprintf("%s reads the environment: %s", rel, call))
		}
	}
	fmt.Fprintf(w, "%-26s %4d exported (at most %d)\n", "total", total, limit)
	if total > limit {
		findings = append(findings, fmt.Sprintf("the public packages export %d identifiers, more than %d", total, limit))
	}

	listed, err := goList(root, "-f", "{{.ImportPath}} {{.Name}}", "./...")
	if err != nil {
		return nil, err
	}
	findings = append(findings, strayPackages(listed)...)

	deps, err := goList(root, "-deps", "./pkg/webhook")
	if err != nil {
		return nil, err
	}
	for _, d := range deps {
		if d == "github.com/aws/aws-lambda-go" || strings.HasPrefix(d, "github.com/aws/aws-lambda-go/") {
			findings = append(findings, "pkg/webhook depends on "+d)
		}
	}
	return findings, nil
}

// strayPackages returns a finding for each line of `go list -f '{{.ImportPath}} {{.Name}}'`
// naming a package outside internal/ that is neither public nor a main package.
func strayPackages(listed []string) []string {
	public := map[string]bool{}
	for _, rel := range publicPackages {
		public[module+"/"+rel] = true
	}
	var findings []string
	for _, line := range listed {
		path, name, _ := strings.Cut(line, " ")
		rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
		if public[path] || name == "main" || rel == "internal" || strings.HasPrefix(rel, "internal/") || strings.Contains(path, "/internal/") {
			continue
		}
		findings = append(findings, fmt.Sprintf("package %s (%s) is outside internal/ but neither a public package nor a main package", path, name))
	}
	return findings
}

// goList runs go list in root and returns its output lines.
func goList(root string, args ...string) ([]string, error) {
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", strings.Join(args, " "), err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n"), nil
}

// parsedPackage is the non-test files of one package directory.
type parsedPackage struct {
	fset  *token.FileSet
	files []*ast.File
}

// parsePackage parses the non-test Go files of dir (not its subdirectories).
func parsePackage(dir string) (parsedPackage, error) {
	p := parsedPackage{fset: token.NewFileSet()}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return p, err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(p.fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return p, err
		}
		p.files = append(p.files, f)
	}
	if len(p.files) == 0 {
		return p, fmt.Errorf("%s: no Go files", dir)
	}
	return p, nil
}

// exportedNames lists the package's exported identifiers, each once: Name for a top-level
// constant, variable, function or type, Type.Name for a method of an exported type or an exported
// field of an exported struct.
func exportedNames(files []*ast.File) []string {
	seen := map[string]bool{}
	var names []string
	for _, f := range files {
		for _, decl := range f.Decls {
			var declared []string
			switch d := decl.(type) {
			case *ast.FuncDecl:
				declared = funcNames(d)
			case *ast.GenDecl:
				declared = genDeclNames(d)
			}
			for _, name := range declared {
				if !seen[name] {
					seen[name] = true
					names = append(names, name)
				}
			}
		}
	}
	return names
}

// funcNames returns the exported name of a function, or Type.Name for an exported method of an
// exported type.
func funcNames(d *ast.FuncDecl) []string {
	switch {
	case !d.Name.IsExported():
		return nil
	case d.Recv == nil:
		return []string{d.Name.Name}
	}
	if recv := receiverType(d.Recv.List[0].Type); ast.IsExported(recv) {
		return []string{recv + "." + d.Name.Name}
	}
	return nil
}

// genDeclNames returns the exported constants, variables and types of a declaration, and the
// exported fields of its exported structs as Type.Field.
func genDeclNames(d *ast.GenDecl) []string {
	var names []string
	for _, spec := range d.Specs {
		switch s := spec.(type) {
		case *ast.ValueSpec:
			for _, n := range s.Names {
				if n.IsExported() {
					names = append(names, n.Name)
				}
			}
		case *ast.TypeSpec:
			if !s.Name.IsExported() {
				continue
			}
			names = append(names, s.Name.Name)
			if st, ok := s.Type.(*ast.StructType); ok {
				for _, field := range exportedFields(st) {
					names = append(names, s.Name.Name+"."+field)
				}
			}
		}
	}
	return names
}

// exportedFields returns the exported field names of a struct, embedded fields by their type's
// name.
func exportedFields(st *ast.StructType) []string {
	var names []string
	for _, field := range st.Fields.List {
		if len(field.Names) == 0 {
			if name := receiverType(field.Type); ast.IsExported(name) {
				names = append(names, name)
			}
			continue
		}
		for _, n := range field.Names {
			if n.IsExported() {
				names = append(names, n.Name)
			}
		}
	}
	return names
}

// receiverType returns the name of the type a receiver or embedded field expression names:
// T, *T, T[P], pkg.T.
func receiverType(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.SelectorExpr:
			return t.Sel.Name
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

// environmentCalls returns file:line and the call of each use of os.Getenv, os.LookupEnv or
// os.Environ in the package, whatever name the file imports os under.
func environmentCalls(p parsedPackage) []string {
	var calls []string
	for _, f := range p.files {
		osName := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == `"os"` {
				osName = "os"
				if imp.Name != nil {
					osName = imp.Name.Name
				}
			}
		}
		if osName == "" || osName == "_" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == osName && environmentReaders[sel.Sel.Name] {
				pos := p.fset.Position(sel.Pos())
				calls = append(calls, fmt.Sprintf("%s:%d os.%s", pos.Filename, pos.Line, sel.Sel.Name))
			}
			return true
		})
	}
	return calls
}
