package handler_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/functions/payments/handler"
	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/setting"
	"github.com/idemlambda/idem/internal/testsupport"
)

// readCountingLedger counts reads besides the writes spyLedger counts.
type readCountingLedger struct {
	*spyLedger
	reads atomic.Int64
}

func (l *readCountingLedger) Get(ctx context.Context, principal, id string) (ledger.Payment, error) {
	l.reads.Add(1)
	return l.spyLedger.Get(ctx, principal, id)
}

func TestRequestsWithoutAUsablePrincipalGet401BeforeAnyWork(t *testing.T) {
	t.Parallel()
	iam := loadEvent(t, "authorizer_iam.json")
	jwt := loadEvent(t, "authorizer_jwt.json")
	lambda := loadEvent(t, "authorizer_lambda.json")
	jwtNoSub := loadEvent(t, "authorizer_jwt.json")
	delete(jwtNoSub.RequestContext.Authorizer.JWT.Claims, "sub")
	lambdaNumber := loadEvent(t, "authorizer_lambda.json")
	lambdaNumber.RequestContext.Authorizer.Lambda["principalId"] = 42.0
	lambdaEmpty := loadEvent(t, "authorizer_lambda.json")
	lambdaEmpty.RequestContext.Authorizer.Lambda["principalId"] = ""
	noPrincipal := loadEvent(t, "authorizer_lambda_no_principal.json")
	noContext := loadEvent(t, "create_payment.json")

	unusable := map[string][]events.APIGatewayV2HTTPRequest{
		handler.AuthIAM:    {noContext, jwt, lambda},
		handler.AuthJWT:    {noContext, jwtNoSub, iam, lambda},
		handler.AuthLambda: {noContext, noPrincipal, lambdaNumber, lambdaEmpty, iam, jwt},
	}
	for mode, reqs := range unusable {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			addr, accepted := testsupport.SilentListener(t)
			l := &readCountingLedger{spyLedger: newSpyLedger(ledger.NewMemory())}
			h := newHandler(t, env{"REDIS_URL": "redis://" + addr, handler.EnvAuth: mode}, handler.WithLedger(l))
			for i, req := range reqs {
				wantError(t, do(t, h, req), 401, "unauthenticated")
				g := get(t, "pay_1")
				g.RequestContext.Authorizer = req.RequestContext.Authorizer
				wantError(t, do(t, h, g), 401, "unauthenticated")
				if n := accepted.Load(); n != 0 {
					t.Fatalf("request %d: %d connections to Redis, want none", i, n)
				}
				if w, r := l.calls.Load(), l.reads.Load(); w != 0 || r != 0 {
					t.Fatalf("request %d: %d ledger writes and %d reads, want none", i, w, r)
				}
			}
		})
	}
}

func TestEachAuthorizationModeServesItsOwnCallers(t *testing.T) {
	t.Parallel()
	for mode, file := range map[string]string{
		handler.AuthIAM:    "authorizer_iam.json",
		handler.AuthJWT:    "authorizer_jwt.json",
		handler.AuthLambda: "authorizer_lambda.json",
		handler.AuthNone:   "create_payment.json",
	} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			h := newHandler(t, sharedEnv(t).with(handler.EnvAuth, mode))
			req := loadEvent(t, file)
			p := wantCreated(t, do(t, h, req), false)
			if again := wantCreated(t, do(t, h, req), true); again.ID != p.ID {
				t.Fatalf("replay carries %s, want %s", again.ID, p.ID)
			}
			g := get(t, p.ID)
			g.RequestContext.Authorizer = req.RequestContext.Authorizer
			if resp := do(t, h, g); resp.StatusCode != 200 {
				t.Fatalf("the caller cannot read its payment: %d %s", resp.StatusCode, resp.Body)
			}
		})
	}
}

func TestNoneSharesOnePrincipalWhateverTheRequestCarries(t *testing.T) {
	t.Parallel()
	h := newHandler(t, sharedEnv(t).with(handler.EnvAuth, handler.AuthNone))
	first := wantCreated(t, do(t, h, loadEvent(t, "authorizer_jwt.json")), false)
	// Same key, same body, another identity: under none it is the same caller, so a replay.
	if again := wantCreated(t, do(t, h, loadEvent(t, "authorizer_iam.json")), true); again.ID != first.ID {
		t.Fatalf("replay carries %s, want %s", again.ID, first.ID)
	}
}

func TestInsideLambdaPaymentsAuthMustBeSet(t *testing.T) {
	t.Parallel()
	lambda := env{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "REDIS_URL": "redis://127.0.0.1:6379", "PAYMENTS_LEDGER": "memory"}
	for _, e := range []env{lambda, lambda.with(handler.EnvAuth, "cognito"), env{handler.EnvAuth: "open"}} {
		_, err := handler.New(context.Background(), e.get)
		var se *setting.Error
		if !errors.As(err, &se) || se.Var != handler.EnvAuth {
			t.Errorf("%v: %v, want an error naming %s", e, err, handler.EnvAuth)
		}
	}
	h := newHandler(t, lambda.with(handler.EnvAuth, handler.AuthIAM))
	wantError(t, do(t, h, loadEvent(t, "create_payment.json")), 401, "unauthenticated")
}
