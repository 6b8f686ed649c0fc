// Command cyclo checks that every function gocyclo lists over the limit carries a reason, as CI
// runs it (make cyclo). It runs the pinned gocyclo (-tool, a module path at a version, through go run) over the module and,
// for each function it lists, looks for a reason in the comment lines directly above the func
// line:
//
//	// parse reads the signature header.
//	//
//	//cyclo:one case per header form of the published grammar
//	func parse(...) {
//
// The marker is a directive comment (//cyclo: and the reason, no space after the slashes, like
// //go: or //nolint:), so go doc leaves it out of the function's documentation, and gofmt sets
// it after the doc comment with a "//" line between; "// cyclo:" is accepted too. It may sit
// anywhere in the comment block that ends on the line above the func.
//
// With -report it prints what it finds and exits 0; otherwise it exits 1 if a listed function
// has no reason. It runs from the module root.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

func main() {
	report := flag.Bool("report", false, "print the functions without a reason, and exit 0 whatever they are")
	tool := flag.String("tool", "github.com/fzipp/gocyclo/cmd/gocyclo@v0.6.0", "the gocyclo to run, at a pinned version")
	over := flag.Int("over", 15, "list functions whose cyclomatic complexity is above this")
	flag.Parse()

	listing, err := runGocyclo(*tool, *over)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cyclo:", err)
		os.Exit(2)
	}
	funcs, err := parseListing(listing)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cyclo:", err)
		os.Exit(2)
	}
	var missing []listed
	reasoned := 0
	for _, f := range funcs {
		ok, err := hasReason(f.file, f.line)
		if err != nil {
			fmt.Fprintln(os.Stderr, "cyclo:", err)
			os.Exit(2)
		}
		if ok {
			reasoned++
		} else {
			missing = append(missing, f)
		}
	}
	for _, f := range missing {
		fmt.Printf("no reason: %d %s %s:%d\n", f.complexity, f.name, f.file, f.line)
	}
	fmt.Printf("cyclo: %d function(s) over %d, %d with a //cyclo: reason, %d without\n", len(funcs), *over, reasoned, len(missing))
	if len(missing) > 0 {
		if *report {
			fmt.Println("cyclo: reported only (-report): not enforced")
			return
		}
		os.Exit(1)
	}
}

// runGocyclo returns gocyclo's listing of the functions over the limit in the current directory,
// running the pinned tool with go run. gocyclo exits 1 when it lists any function, which is not a
// failure here (go run then adds only "exit status 1" to its standard error, after the modules
// it downloaded on a fresh machine); any other failure is.
func runGocyclo(tool string, over int) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("go", "run", tool, "-over", strconv.Itoa(over), ".")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	listed := errors.As(err, &exit) && exit.ExitCode() == 1 && len(out) > 0 && onlyListed(stderr.String())
	if err != nil && !listed {
		return nil, fmt.Errorf("go run %s: %w: %s", tool, err, stderr.String())
	}
	return out, nil
}

// onlyListed reports whether stderr, go run's standard error, says no more than that the tool
// exited 1, after any "go: downloading" lines of a fresh machine's module cache.
func onlyListed(stderr string) bool {
	var rest []string
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !strings.HasPrefix(line, "go: downloading ") {
			rest = append(rest, line)
		}
	}
	return len(rest) == 1 && rest[0] == "exit status 1"
}

// listed is one function of gocyclo's listing.
type listed struct {
	complexity int
	name       string // package and function, as gocyclo writes them
	file       string
	line       int
}

// listingLine is a line of gocyclo's output: complexity, package, function, file:line:column.
var listingLine = regexp.MustCompile(`^(\d+) (\S+) (.+) (\S+\.go):(\d+):\d+$`)

// parseListing reads gocyclo's output.
func parseListing(out []byte) ([]listed, error) {
	var funcs []listed
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		m := listingLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("unexpected gocyclo line %q", line)
		}
		c, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[5])
		funcs = append(funcs, listed{complexity: c, name: m[2] + " " + m[3], file: m[4], line: n})
	}
	return funcs, sc.Err()
}

// reasonMarker is a comment line giving the reason: //cyclo: or // cyclo: and at least one
// word.
var reasonMarker = regexp.MustCompile(`^// ?cyclo:\s*\S`)

// hasReason reports whether the comment block directly above line funcLine of file has a
// reason line.
func hasReason(file string, funcLine int) (bool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return false, err
	}
	return reasonAbove(strings.Split(string(b), "\n"), funcLine), nil
}

// reasonAbove reports whether the comment lines directly above line funcLine (1-based) hold a
// reason.
func reasonAbove(lines []string, funcLine int) bool {
	for i := funcLine - 2; i >= 0 && i < len(lines); i-- {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "//") {
			return false
		}
		if reasonMarker.MatchString(l) {
			return true
		}
	}
	return false
}
