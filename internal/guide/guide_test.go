// Package guide checks that docs/library.md cannot drift from the code: every ```go block of the
// guide appears, line for line (indentation aside), in a test file of the repository, where it
// is compiled and run by go test (the guide's own programs are in wrapguide, sqsguide and
// httpguide, with tests that run them as a new user would).
package guide

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const guidePath = "../../docs/library.md"

// goBlocks returns the fenced ```go blocks of a Markdown document, in order.
func goBlocks(doc string) []string {
	var blocks []string
	var cur []string
	in := false
	for _, line := range strings.Split(doc, "\n") {
		switch fence := strings.TrimSpace(line); {
		case !in && fence == "```go":
			in, cur = true, nil
		case in && fence == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// normalize drops each line's indentation and trailing space, and blank lines, so that a block
// matches the same code indented inside a test function.
func normalize(code string) string {
	var out []string
	for _, line := range strings.Split(code, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// testFiles returns the normalized text of every _test.go file of the module, by path.
func testFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files[path] = "\n" + normalize(string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// foundIn returns a file holding block, or "".
func foundIn(files map[string]string, block string) string {
	want := "\n" + normalize(block)
	for path, text := range files {
		if strings.Contains(text, want) {
			return path
		}
	}
	return ""
}

func TestEveryGoBlockOfTheGuideIsInATest(t *testing.T) {
	doc, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(doc))
	if len(blocks) < 6 {
		t.Fatalf("%d go blocks in %s; the guide has at least 6", len(blocks), guidePath)
	}
	files := testFiles(t)
	for i, b := range blocks {
		if foundIn(files, b) == "" {
			first, _, _ := strings.Cut(strings.TrimSpace(b), "\n")
			t.Errorf("block %d of %s (%q...) is in no test file: copy it from the test that runs it, or change that test", i+1, guidePath, first)
		}
	}
}

func TestADriftedBlockIsFound(t *testing.T) {
	doc := "text\n```go\nfunc f() {\n\treturn\n}\n```\nmore\n```bash\nmake\n```\n"
	blocks := goBlocks(doc)
	if len(blocks) != 1 || blocks[0] != "func f() {\n\treturn\n}" {
		t.Fatalf("blocks %q", blocks)
	}
	files := map[string]string{
		"a_test.go": "\n" + normalize("package a\n\nfunc g() {\n\tfunc f() {\n\t\treturn\n\t}\n}\n"),
	}
	if foundIn(files, blocks[0]) == "" {
		t.Fatal("the block, indented inside a function, was not found")
	}
	if foundIn(files, "func f() {\n\treturn 1\n}") != "" {
		t.Fatal("a changed block was found")
	}
	if foundIn(files, "unc f() {\n\treturn\n}") != "" {
		t.Fatal("a block matching only the end of a line was found")
	}
}
