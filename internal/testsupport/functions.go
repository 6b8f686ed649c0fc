package testsupport

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// IsolateAWS points the AWS SDK's default configuration at static test credentials, region
// us-east-1, no shared files, no instance metadata, no endpoint override and a single attempt
// (retries are the SDK's business), so a developer's ~/.aws files or environment cannot change
// what a test sees. A test then sets the one AWS_ENDPOINT_URL_<SERVICE> it needs. It uses
// t.Setenv, so the test must not be parallel.
func IsolateAWS(t testing.TB) {
	t.Helper()
	none := filepath.Join(t.TempDir(), "absent")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":                   "AKIDTEST",
		"AWS_SECRET_ACCESS_KEY":               "secret-test",
		"AWS_SESSION_TOKEN":                   "",
		"AWS_REGION":                          "us-east-1",
		"AWS_PROFILE":                         "",
		"AWS_CONFIG_FILE":                     none,
		"AWS_SHARED_CREDENTIALS_FILE":         none,
		"AWS_EC2_METADATA_DISABLED":           "true",
		"AWS_ENDPOINT_URL":                    "",
		"AWS_ENDPOINT_URL_SQS":                "",
		"AWS_ENDPOINT_URL_EVENTBRIDGE":        "",
		"AWS_ENDPOINT_URL_S3":                 "",
		"AWS_ENDPOINT_URL_SECRETS_MANAGER":    "",
		"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "",
		"AWS_MAX_ATTEMPTS":                    "1",
	} {
		t.Setenv(k, v)
	}
}

// SilentListener listens on a loopback address, counts the connections made to it and answers
// nothing on them: it stands where a server would be, for a test that checks nothing dials it.
// It and its connections are closed when the test ends.
func SilentListener(t testing.TB) (addr string, accepted *atomic.Int64) {
	t.Helper()
	accepted = &atomic.Int64{}
	return Serve(t, func(net.Conn) { accepted.Add(1) }), accepted
}

// SentMessages is an SQS client (the SendMessage of sink.SQSAPI) that keeps what it is sent
// and answers every send with success, for tests that hand a sink's messages on themselves.
type SentMessages struct {
	mu  sync.Mutex
	ins []*sqs.SendMessageInput
}

// SendMessage keeps in.
func (s *SentMessages) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ins = append(s.ins, in)
	return &sqs.SendMessageOutput{}, nil
}

// Inputs returns what was sent, in order.
func (s *SentMessages) Inputs() []*sqs.SendMessageInput {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*sqs.SendMessageInput(nil), s.ins...)
}

// MainOrTests is the TestMain of a Lambda function's main package: with the variable runMain set
// to 1 the test binary runs main (then exits 0) instead of the tests, so that InitFailure can
// observe main as Lambda does.
func MainOrTests(m *testing.M, runMain string, main func()) {
	if os.Getenv(runMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// InitFailure runs the test binary's main (see MainOrTests) with exactly the environment env and
// returns the line it wrote, failing t unless main exited with status 1 after writing one line
// to standard output and nothing to standard error.
func InitFailure(t testing.TB, runMain string, env []string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append([]string{runMain + "=1"}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1; stdout %s stderr %s", err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 1 || stderr.Len() != 0 {
		t.Fatalf("want one line on stdout and nothing on stderr; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	return lines[0]
}

// Content types of the AWS JSON protocols, the FakeAWS answers' content-type.
const (
	AWSJSON10 = "application/x-amz-json-1.0" // SQS
	AWSJSON11 = "application/x-amz-json-1.1" // EventBridge, Secrets Manager
)

// AWSRequest is what a FakeAWS saw of one request.
type AWSRequest struct {
	// Target is the X-Amz-Target header: service and operation, e.g. "AmazonSQS.SendMessage".
	Target string
	// ContentType and Authorization are the request's headers.
	ContentType, Authorization string
	// Body is the operation's JSON input.
	Body []byte
}

// AWSCall is a request a FakeAWS saw, with its input decoded into an In.
type AWSCall[In any] struct {
	AWSRequest
	Input In
}

// Calls returns the requests f saw so far, in order, with their inputs decoded; an input that
// is not JSON fails t.
func Calls[In any](t testing.TB, f *FakeAWS) []AWSCall[In] {
	t.Helper()
	var calls []AWSCall[In]
	for _, r := range f.Requests() {
		c := AWSCall[In]{AWSRequest: r}
		if err := json.Unmarshal(r.Body, &c.Input); err != nil {
			t.Fatalf("%s input is not JSON: %v: %s", r.Target, err, r.Body)
		}
		calls = append(calls, c)
	}
	return calls
}

// FakeAWS is an HTTP server speaking an AWS JSON protocol: it keeps every request and answers
// each with the status and body its answer function returns, a string written as it is and
// anything else encoded as JSON.
type FakeAWS struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []AWSRequest
}

// StartFakeAWS starts a FakeAWS answering with contentType (AWSJSON10 or AWSJSON11), closed when
// the test ends. Point the SDK at it with the service's AWS_ENDPOINT_URL_<SERVICE>.
func StartFakeAWS(t testing.TB, contentType string, answer func(AWSRequest) (int, any)) *FakeAWS {
	t.Helper()
	f := &FakeAWS{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := AWSRequest{Target: r.Header.Get("X-Amz-Target"), ContentType: r.Header.Get("Content-Type"),
			Authorization: r.Header.Get("Authorization"), Body: body}
		f.mu.Lock()
		f.reqs = append(f.reqs, req)
		f.mu.Unlock()
		status, v := answer(req)
		out, ok := v.(string)
		if !ok {
			b, _ := json.Marshal(v)
			out = string(b)
		}
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		w.Header().Set("X-Amzn-Requestid", "5fea7756-0ea4-451a-a703-a558b933e274")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, out)
	}))
	t.Cleanup(f.Close)
	return f
}

// Requests returns the requests seen so far, in order.
func (f *FakeAWS) Requests() []AWSRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]AWSRequest(nil), f.reqs...)
}

// SendMessageAnswer is the answer function of a fake SQS whose every SendMessage succeeds: the
// message id and the body's MD5 the SDK checks.
func SendMessageAnswer(r AWSRequest) (int, any) {
	var in struct{ MessageBody string }
	_ = json.Unmarshal(r.Body, &in)
	sum := md5.Sum([]byte(in.MessageBody))
	return http.StatusOK, map[string]string{
		"MessageId":        "5fea7756-0ea4-451a-a703-a558b933e274",
		"MD5OfMessageBody": hex.EncodeToString(sum[:]),
		"SequenceNumber":   "18849496460467696128",
	}
}
