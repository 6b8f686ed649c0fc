package testsupport_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemlambda/idem/internal/testsupport"
)

func TestFakeAWSKeepsRequestsAndAnswersAsTold(t *testing.T) {
	f := testsupport.StartFakeAWS(t, testsupport.AWSJSON10, func(r testsupport.AWSRequest) (int, any) {
		if r.Target == "AmazonSQS.SendMessage" {
			return testsupport.SendMessageAnswer(r)
		}
		return http.StatusBadRequest, `{"__type":"Unknown"}`
	})
	for _, target := range []string{"AmazonSQS.SendMessage", "AmazonSQS.Other"} {
		req, _ := http.NewRequest(http.MethodPost, f.URL, strings.NewReader(`{"MessageBody":"hello"}`))
		req.Header.Set("X-Amz-Target", target)
		resp, body := testsupport.RoundTrip(t, req)
		if ct := resp.Header.Get("Content-Type"); ct != testsupport.AWSJSON10 {
			t.Errorf("%s: content-type %q", target, ct)
		}
		// The MD5 of "hello", as SQS answers SendMessage.
		if want := target == "AmazonSQS.SendMessage"; want != strings.Contains(string(body), "5d41402abc4b2a76b9719d911017c592") ||
			want != (resp.StatusCode == http.StatusOK) {
			t.Errorf("%s: %d %s", target, resp.StatusCode, body)
		}
	}
	calls := testsupport.Calls[struct{ MessageBody string }](t, f)
	if len(calls) != 2 || calls[0].Target != "AmazonSQS.SendMessage" || calls[1].Input.MessageBody != "hello" {
		t.Errorf("calls %+v", calls)
	}
}

func TestSilentListenerCountsAndClosedAddrRefuses(t *testing.T) {
	addr, accepted := testsupport.SilentListener(t)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for deadline := time.Now().Add(5 * time.Second); accepted.Load() != 1 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := accepted.Load(); n != 1 {
		t.Errorf("accepted %d connections, want 1", n)
	}
	if c, err := net.Dial("tcp", testsupport.ClosedAddr(t)); err == nil {
		c.Close()
		t.Error("a connection to ClosedAddr succeeded")
	}
}
