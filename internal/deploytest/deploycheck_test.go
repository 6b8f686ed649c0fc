package deploytest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const deployCheck = "../../.ci/deploy-check"

// fakeTools writes sam and aws scripts into a new directory: sam prints samVersion (no sam when
// it is empty), aws prints its version and answers sts get-caller-identity with an ARN, or fails
// like the real CLI without credentials when stsFails. It returns a PATH of that directory and
// the directories of bash and the coreutils the check uses, and nothing else.
func fakeTools(t *testing.T, samVersion string, withAWS, stsFails bool) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if samVersion != "" {
		write("sam", "[ \"$1\" = --version ] && echo '"+samVersion+"'\n")
	}
	if withAWS {
		sts := "echo arn:aws:iam::123456789012:user/dev\n"
		if stsFails {
			sts = "echo 'Unable to locate credentials. You can configure credentials by running \"aws configure\".' >&2; exit 253\n"
		}
		write("aws", "if [ \"$1\" = --version ]; then echo 'aws-cli/2.22.0 Python/3.12.6 Linux/6.1 exe/x86_64'; exit 0; fi\n"+
			"if [ \"$1\" = sts ]; then "+strings.TrimSuffix(sts, "\n")+"; fi\n")
	}
	path := []string{dir}
	for _, tool := range []string{"bash", "grep", "head"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s not found", tool)
		}
		path = append(path, filepath.Dir(p))
	}
	return strings.Join(path, string(os.PathListSeparator))
}

// runDeployCheck runs the script under PATH path, returning its exit status and output.
func runDeployCheck(t *testing.T, path string) (int, string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not found")
	}
	cmd := exec.Command(bash, deployCheck)
	cmd.Env = []string{"PATH=" + path, "HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// make deploy-check passes with SAM CLI 1.161 or later (the first release that expands
// Fn::ForEach under language_extensions), the AWS CLI and credentials, and otherwise says what is
// missing, each problem on its line.
func TestDeployCheckReadsTheSAMCLIVersion(t *testing.T) {
	for _, tt := range []struct {
		sam    string
		ok     bool
		saying string
	}{
		{"SAM CLI, version 1.161.0", true, "ok: SAM CLI, version 1.161.0"},
		{"SAM CLI, version 1.164.0", true, "ok: SAM CLI, version 1.164.0"},
		{"SAM CLI, version 1.200.3", true, "ok:"},
		{"SAM CLI, version 2.0.0", true, "ok:"},
		{"SAM CLI, version 1.161", true, "ok:"},
		{"SAM CLI, version 1.160.1", false, "is too old: template.yaml needs SAM CLI 1.161 or later"},
		{"SAM CLI, version 1.99.0", false, "is too old"},
		{"SAM CLI, version 1.16.0", false, "is too old"},
		{"SAM CLI, version 0.999.0", false, "is too old"},
		{"SAM CLI, version 1.0161.0", true, "ok:"}, // leading zeros are decimal, not octal
		{"SAM CLI, development build", false, "cannot read a version"},
		{"", false, "sam (the AWS SAM CLI) is not installed"},
	} {
		code, out := runDeployCheck(t, fakeTools(t, tt.sam, true, false))
		if (code == 0) != tt.ok || !strings.Contains(out, tt.saying) {
			t.Errorf("sam %q: exit %d, output:\n%s\nwant ok=%v and %q", tt.sam, code, out, tt.ok, tt.saying)
		}
		if tt.ok && !strings.Contains(out, "credentials of arn:aws:iam::123456789012:user/dev") {
			t.Errorf("sam %q: the credentials are not reported:\n%s", tt.sam, out)
		}
	}
}

func TestDeployCheckNeedsTheAWSCLIAndCredentials(t *testing.T) {
	code, out := runDeployCheck(t, fakeTools(t, "SAM CLI, version 1.164.0", false, false))
	if code != 1 || !strings.Contains(out, "aws (the AWS CLI) is not installed") {
		t.Errorf("without aws: exit %d\n%s", code, out)
	}
	code, out = runDeployCheck(t, fakeTools(t, "SAM CLI, version 1.164.0", true, true))
	if code != 1 || !strings.Contains(out, "no usable credentials") || !strings.Contains(out, "Unable to locate credentials") {
		t.Errorf("without credentials: exit %d\n%s", code, out)
	}
	// Every problem is reported, not only the first.
	code, out = runDeployCheck(t, fakeTools(t, "SAM CLI, version 1.150.0", true, true))
	if code != 1 || !strings.Contains(out, "is too old") || !strings.Contains(out, "no usable credentials") {
		t.Errorf("old sam and no credentials: exit %d\n%s", code, out)
	}
}
