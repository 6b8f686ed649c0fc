package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// verifier checks SigV4 as API Gateway does, with the same signer: it signs the request it
// received again (the signed headers, the body's hash, the time of X-Amz-Date) with the
// credentials it knows for the access key, and compares the two Authorization headers.
type verifier struct {
	creds  aws.Credentials
	region string
	seen   []string // the bodies of the requests that verified
}

func (v *verifier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	auth := r.Header.Get("Authorization")
	scope := "Credential=" + v.creds.AccessKeyID + "/"
	signedAt, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 ") || !strings.Contains(auth, scope) || err != nil {
		http.Error(w, `{"message":"Missing Authentication Token"}`, http.StatusForbidden)
		return
	}
	_, signed, _ := strings.Cut(auth, "SignedHeaders=")
	signed, _, _ = strings.Cut(signed, ",")
	again, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	for _, name := range strings.Split(signed, ";") {
		if name != "host" {
			again.Header.Set(name, r.Header.Get(name))
		}
	}
	sum := r.Header.Get("X-Amz-Content-Sha256")
	if sum == "" {
		sum = sha256Hex(body)
	}
	if sum != sha256Hex(body) {
		http.Error(w, `{"message":"body changed"}`, http.StatusForbidden)
		return
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), v.creds, again, sum, Service, v.region, signedAt); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if again.Header.Get("Authorization") != auth {
		http.Error(w, `{"message":"The request signature we calculated does not match"}`, http.StatusForbidden)
		return
	}
	v.seen = append(v.seen, string(body))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, `{"id":"pay_1"}`)
}

var testCreds = aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: "session-token"}

func TestSignedCreateIsAcceptedBySigV4Verification(t *testing.T) {
	v := &verifier{creds: testCreds, region: "eu-west-1"}
	srv := httptest.NewServer(v)
	defer srv.Close()
	body := []byte(`{"amount":2500,"currency":"EUR"}`)
	req, err := NewSignedRequest(context.Background(), Call{URL: srv.URL + "/payments", Method: http.MethodPost, IdempotencyKey: "order-1", Body: body},
		testCreds, "eu-west-1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Get("X-Amz-Security-Token"); got != testCreds.SessionToken {
		t.Errorf("session token header %q", got)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated || len(v.seen) != 1 || v.seen[0] != string(body) {
		t.Fatalf("%d %s; verified %q", resp.StatusCode, b, v.seen)
	}
}

func TestVerificationRefusesWrongSecretsAndChangedRequests(t *testing.T) {
	v := &verifier{creds: testCreds, region: "eu-west-1"}
	srv := httptest.NewServer(v)
	defer srv.Close()
	call := Call{URL: srv.URL + "/payments", Method: http.MethodPost, IdempotencyKey: "order-2", Body: []byte(`{"amount":1,"currency":"EUR"}`)}
	wrong := testCreds
	wrong.SecretAccessKey = "not-the-secret"
	for name, tamper := range map[string]func() (*http.Request, error){
		"wrong secret": func() (*http.Request, error) {
			return NewSignedRequest(context.Background(), call, wrong, "eu-west-1", time.Now())
		},
		"wrong region": func() (*http.Request, error) {
			return NewSignedRequest(context.Background(), call, testCreds, "us-east-1", time.Now())
		},
		"idempotency key changed": func() (*http.Request, error) {
			req, err := NewSignedRequest(context.Background(), call, testCreds, "eu-west-1", time.Now())
			if err == nil {
				req.Header.Set("Idempotency-Key", "order-3")
			}
			return req, err
		},
	} {
		req, err := tamper()
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, resp.StatusCode)
		}
	}
	if len(v.seen) != 0 {
		t.Fatalf("verified %q", v.seen)
	}
}

func TestRegionComesFromTheAPIHost(t *testing.T) {
	for host, want := range map[string]string{
		"a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com":     "eu-west-1",
		"a1b2c3d4e5.execute-api.cn-north-1.amazonaws.com.cn": "cn-north-1",
		"payments.example.com":                               "",
		"127.0.0.1":                                          "",
	} {
		if got := RegionFromHost(host); got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
	if _, err := NewSignedRequest(context.Background(), Call{URL: "https://payments.example.com/payments", Method: "GET"}, testCreds, "", time.Now()); err == nil {
		t.Error("signed without a region")
	}
}
