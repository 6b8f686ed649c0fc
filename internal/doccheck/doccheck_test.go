// Package doccheck holds the docs to their budget and their links: every relative link and
// #anchor of README.md and docs/*.md resolves, and each file stays within its size.
package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

const root = "../.."

// Size limits in bytes (1 KB = 1,000 bytes, as `wc -c` is read).
const (
	readmeMax     = 16_000
	docMax        = 20_000
	benchmarksMax = 12_000
	docsTotalMax  = 150_000
)

// pending holds the docs not yet cut to their limit, each with the ceiling it must not pass
// meanwhile (its size when the limits were set, plus room for the sections being added to it);
// a file leaves this map when it is within its limit. While any remain, the total's ceiling is
// pendingTotalMax instead of docsTotalMax.
var pending = map[string]int{
	"README.md":          17_500,
	"docs/design.md":     33_000,
	"docs/library.md":    26_500,
	"docs/powertools.md": 20_500,
	"docs/providers.md":  26_500,
}

const pendingTotalMax = 200_000

// docs returns README.md and docs/*.md, relative to the repository's root.
func docs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no docs/*.md found")
	}
	return append([]string{filepath.Join(root, "README.md")}, files...)
}

// prose returns the lines of a Markdown document outside fenced code blocks.
func prose(doc string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if !in {
			out = append(out, line)
		}
	}
	return out
}

var inlineCode = regexp.MustCompile("`[^`]*`")

// anchors returns the anchors GitHub gives a document's headings: lower case, punctuation
// dropped but for hyphens and underscores, spaces made hyphens, a repeated one suffixed -1, -2.
func anchors(doc string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range prose(doc) {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		text = strings.ReplaceAll(text, "`", "")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// links returns the targets of a document's Markdown links and images, code spans aside.
func links(doc string) []string {
	var out []string
	for _, line := range prose(doc) {
		for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			out = append(out, m[1])
		}
	}
	return out
}

//cyclo:each kind of link (external, anchor only, file, file with anchor) and each refusal is one branch
func TestEveryRelativeLinkAndAnchorResolves(t *testing.T) {
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := cache[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		cache[path] = anchors(string(b))
		return cache[path], nil
	}
	for _, file := range docs(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		name, _ := filepath.Rel(root, file)
		for _, target := range links(string(b)) {
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), path)
				rel, err := filepath.Rel(root, dest)
				if err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("%s: link %q points outside the repository", name, target)
					continue
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q: no such file", name, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				t.Errorf("%s: link %q: an anchor into a file that is not Markdown", name, target)
				continue
			}
			a, err := anchorsOf(dest)
			if err != nil {
				t.Fatal(err)
			}
			if !a[anchor] {
				t.Errorf("%s: link %q: no heading with that anchor", name, target)
			}
		}
	}
}

func TestTheDocsStayWithinTheirSizes(t *testing.T) {
	total := 0
	for _, file := range docs(t) {
		info, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		size := int(info.Size())
		name, _ := filepath.Rel(root, file)
		limit := docMax
		switch name {
		case "README.md":
			limit = readmeMax
		case filepath.Join("docs", "benchmarks.md"):
			limit = benchmarksMax
		}
		if ceiling, ok := pending[filepath.ToSlash(name)]; ok {
			if size <= limit {
				t.Errorf("%s is %d bytes, within its limit of %d: remove it from pending", name, size, limit)
			}
			limit = ceiling
		}
		if size > limit {
			t.Errorf("%s is %d bytes, over its limit of %d", name, size, limit)
		}
		if name != "README.md" {
			total += size
		}
	}
	totalMax := docsTotalMax
	if len(pending) > 0 {
		totalMax = pendingTotalMax
	}
	if total >= totalMax {
		t.Errorf("docs/*.md total %d bytes, the limit is under %d", total, totalMax)
	}
	t.Logf("docs/*.md: %d bytes in all", total)
}

func TestAnchorsFollowGitHubsRules(t *testing.T) {
	doc := "# The idempotency core (`pkg/idem`)\n## Local use, without AWS or Docker\n```\n# not a heading\n```\n## Local use, without AWS or Docker\n"
	got := anchors(doc)
	for _, want := range []string{"the-idempotency-core-pkgidem", "local-use-without-aws-or-docker", "local-use-without-aws-or-docker-1"} {
		if !got[want] {
			t.Errorf("anchors(%q) lacks %q: %v", doc, want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a line in a code block was read as a heading")
	}
}
