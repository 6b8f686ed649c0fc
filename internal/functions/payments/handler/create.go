package handler

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/apigw"
	"github.com/idemlambda/idem/internal/jsonstr"
	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/obs"
	"github.com/idemlambda/idem/internal/refusal"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
)

// StatusSucceeded is the status of every payment this API creates.
const StatusSucceeded = "succeeded"

// HeaderReplayed marks a response that repeats the first response to the same key.
const HeaderReplayed = idemhttp.HeaderReplayed

// codeUnsupportedMediaType (415): a content-type other than application/json.
const codeUnsupportedMediaType = "unsupported_media_type"

// idAttempts bounds the payment ids drawn for one request when the ledger reports a collision.
const idAttempts = 3

// reasonResultNotReplayable: the payment was made (by this request or an earlier one with its
// key), but its response could not be stored in Redis, so it cannot be sent again.
const reasonResultNotReplayable = "result_not_replayable"

// errKeyReused is the ledger's answer when it holds a payment for the scoped key made from a
// different request: Redis had lost the record of the first request, the ledger had not.
var errKeyReused = errors.New("payments: idempotency key already used for a different request")

// createState is one POST /payments on its way through the middleware: what its hooks learn
// (the caller, the scoped key, the parsed request), what the work found, and what the core
// reported, for the work and for the log line. It is also the request's context, the one the
// middleware is given, holding itself under stateKey (one allocation rather than a
// context.WithValue beside it).
type createState struct {
	context.Context
	principal string
	scoped    string // principal and idempotency key, once the key is known
	in        createRequest
	fp        idem.Fingerprint

	fromLedger bool  // the work found the payment already in the ledger
	keyReused  bool  // the ledger holds a payment for this key made from another request
	workErr    error // the ledger's error, when the payment could not be confirmed

	observed bool // the request reached the core: out and err are what it reported
	out      idem.Outcome
	err      error
}

type stateKey struct{}

// Value returns st for stateKey, else the value of the context it was made on.
func (st *createState) Value(key any) any {
	if key == (stateKey{}) {
		return st
	}
	return st.Context.Value(key)
}

func stateOf(ctx context.Context) *createState { return ctx.Value(stateKey{}).(*createState) }

// newCreate returns the create path on guard: idemhttp's Idempotency-Key middleware (the key, its
// caller, the body limit, the claim, the replay, the refusals) around the work, which writes the
// payment to the ledger.
func (h *Handler) newCreate(guard *idem.Guard) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	mw, err := idemhttp.New(guard, Scope,
		idemhttp.WithHeader(HeaderIdempotencyKey),
		idemhttp.WithMethods(http.MethodPost),
		idemhttp.WithMaxBody(MaxBodyBytes),
		// serve answered 401 already for a request without a principal.
		idemhttp.WithCaller(func(ctx context.Context, _ *idemhttp.Request) (string, bool) {
			return principalInKey(stateOf(ctx).principal), true
		}),
		idemhttp.WithFingerprint(h.parse),
		idemhttp.WithStored(func(status int) bool { return status == http.StatusCreated }),
		idemhttp.WithObserver(func(ctx context.Context, out idem.Outcome, err error) {
			st := stateOf(ctx)
			st.observed, st.out, st.err = true, out, err
		}))
	if err != nil {
		return nil, fmt.Errorf("payments: %w", err)
	}
	return idemhttp.HTTPAPI(mw, h.work), nil
}

// create serves POST /payments for principal, top to bottom: content type, then the middleware
// (key, body, claim, work, respond), then the log line.
func (h *Handler) create(ctx context.Context, req events.APIGatewayV2HTTPRequest, principal string) (events.APIGatewayV2HTTPResponse, obs.Request) {
	st := &createState{Context: ctx, principal: principal}
	if ct := apigw.Header(req.Headers, "content-type"); !jsonContentType(ct) {
		rec := st.rejected(req, codeUnsupportedMediaType)
		return apigw.Error(http.StatusUnsupportedMediaType, codeUnsupportedMediaType,
			"content-type: must be application/json, got "+strconv.Quote(clip(ct, 64))), rec
	}
	resp, _ := h.createOnGuard(st, guarded(req)) // the work never returns an error
	if resp.Headers["content-type"] == "" {
		// The work's response, and the result stored of it, carry no content type: it is JSON.
		if resp.Headers == nil {
			resp.Headers = map[string]string{}
		}
		resp.Headers["content-type"] = "application/json"
	}
	return resp, st.record(req, resp)
}

// canonicalKeyHeader is HeaderIdempotencyKey as net/http writes it: the name under which
// http.Header holds it, and which it looks up without writing a new string.
var canonicalKeyHeader = textproto.CanonicalMIMEHeaderKey(HeaderIdempotencyKey)

// guarded is req as the middleware is given it: with the method the route says (a route key may
// come without the request context's method), and of its headers and cookies only the
// idempotency key's header, under its canonical name. Nothing on the create path reads any
// other (the caller is the state's principal, the work reads the state), and the middleware
// would otherwise copy every one of them, its name canonicalized, into a new http.Header. The
// key is the one apigw.Header finds, as for the log line's id: under the lower-case name API
// Gateway writes, else under any name differing from it in case only.
func guarded(req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPRequest {
	req.RequestContext.HTTP.Method = http.MethodPost
	var key map[string]string
	if v := apigw.Header(req.Headers, HeaderIdempotencyKey); v != "" {
		key = map[string]string{canonicalKeyHeader: v}
	}
	req.Headers, req.Cookies = key, nil
	return req
}

// parse is the middleware's fingerprint: it parses the body strictly (an error is 400
// invalid_request, the message naming the field) and fingerprints its canonical form.
func (h *Handler) parse(ctx context.Context, r *idemhttp.Request) (idem.Fingerprint, error) {
	st := stateOf(ctx)
	key, _ := idemhttp.ParseKey(r.Header.Get(canonicalKeyHeader)) // the middleware accepted it
	st.scoped = scopedKey(st.principal, key)
	in, err := parseCreateRequest(r.Body, h.maxAmount)
	if err != nil {
		return idem.Fingerprint{}, err
	}
	if st.fp, err = in.fingerprint(); err != nil {
		return idem.Fingerprint{}, err
	}
	st.in = in
	return st.fp, nil
}

// work is the guarded work: the payment written to the ledger, answered 201. A payment the
// ledger already holds for the key is answered as a replay; one made from another request is
// 422, and a ledger failure 500: neither is stored, so the claim is released.
func (h *Handler) work(ctx context.Context, _ events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	st := stateOf(ctx)
	p, existed, err := h.record(ctx, st.scoped, st.principal, st.in, st.fp)
	switch {
	case errors.Is(err, errKeyReused):
		st.keyReused = true
		r, _ := refusal.Of(idem.Mismatch)
		return apigw.Error(r.Status, r.Code, r.Message), nil
	case err != nil:
		st.workErr = err
		return internalError(), nil
	}
	body, err := paymentJSON(p)
	if err != nil {
		st.workErr = fmt.Errorf("payments: encode payment %s: %w", p.ID, err)
		return internalError(), nil
	}
	// No headers: the content type of every payments response is JSON, and create adds it on
	// the way out, so the result the core stores (and replays) holds the body alone.
	resp := events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: body}
	if existed {
		// The ledger kept what Redis lost: the first response again.
		st.fromLedger = true
		resp.Headers = map[string]string{HeaderReplayed: "true"}
	}
	return resp, nil
}

// paymentJSON is p encoded as json.Marshal encodes it, written by hand into one string when
// none of its strings needs an escape.
func paymentJSON(p ledger.Payment) (string, error) {
	var buf [256]byte
	if b, ok := appendPaymentJSON(buf[:0], p); ok {
		return string(b), nil
	}
	b, err := json.Marshal(p)
	return string(b), err
}

// appendPaymentJSON appends what json.Marshal writes for p, or reports false when a string
// would need an escape or the time has no RFC 3339 form (json.Marshal then writes, or refuses,
// it).
func appendPaymentJSON(b []byte, p ledger.Payment) ([]byte, bool) {
	if !jsonstr.Plain(p.ID) || !jsonstr.Plain(p.Currency) || !jsonstr.Plain(p.Status) {
		return b, false
	}
	b = append(b, `{"id":"`...)
	b = append(b, p.ID...)
	b = append(b, `","amount":`...)
	b = strconv.AppendInt(b, p.Amount, 10)
	b = append(b, `,"currency":"`...)
	b = append(b, p.Currency...)
	b = append(b, `","status":"`...)
	b = append(b, p.Status...)
	b = append(b, `","created_at":"`...)
	b, err := p.CreatedAt.AppendText(b) // what Time.MarshalJSON writes between its quotes
	if err != nil {
		return b, false
	}
	return append(b, `"}`...), true
}

// record is the log line of the request: what the core reported, or the refusal before it.
func (st *createState) record(req events.APIGatewayV2HTTPRequest, resp events.APIGatewayV2HTTPResponse) obs.Request {
	if !st.observed {
		var body apigw.ErrorBody
		_ = json.Unmarshal([]byte(resp.Body), &body)
		return st.rejected(req, body.Error.Code)
	}
	rec := obs.Request{ID: obs.KeyID(st.scoped), RoundTrips: st.out.RoundTrips, Err: st.err}
	switch st.out.Kind {
	case idem.Executed, idem.LockLost, idem.NotStored, idem.ExecutedUnguarded:
		// The payment is in the ledger, whatever became of the Redis record: a retry that finds
		// no record in Redis finds the same payment in the ledger.
		rec.Outcome = obs.OutcomeExecuted
		switch {
		case st.fromLedger:
			rec.Outcome, rec.Reason = obs.OutcomeReplayed, "ledger"
		case st.out.Kind == idem.ExecutedUnguarded:
			rec.Reason = "unguarded"
		case st.out.Kind != idem.Executed:
			rec.Reason = "result_not_stored"
		}
	case idem.NotReplayable:
		// The payment is in the ledger; its response was too large to keep, so a marker stands
		// in for it: the request that made it got the payment, every later one 409
		// idempotency_result_unavailable (refusal.Of), and none writes to the ledger.
		rec.Outcome, rec.Reason = obs.OutcomeExecuted, reasonResultNotReplayable
		if !st.out.Ran {
			rec.Outcome, rec.Err = obs.OutcomeReplayed, nil
		}
	case idem.Replayed:
		rec.Outcome = obs.OutcomeReplayed
	case idem.InProgress:
		rec.Outcome, rec.Err = obs.OutcomeInProgress, nil
	case idem.Mismatch:
		rec.Outcome, rec.Err = obs.OutcomeMismatch, nil
	case idem.Unavailable:
		rec.Outcome, rec.Reason = obs.OutcomeError, "store_unavailable"
	case idem.InvalidKey:
		rec.Outcome, rec.Reason = obs.OutcomeRejected, "invalid_idempotency_key"
	default: // Failed
		switch {
		case st.keyReused:
			rec.Outcome, rec.Reason, rec.Err = obs.OutcomeMismatch, "ledger", nil
		default:
			rec.Outcome, rec.Reason = obs.OutcomeError, "work_failed"
			if st.workErr != nil {
				rec.Err = st.workErr
			}
		}
	}
	return rec
}

// rejected is the log record of a request refused before the core: with the scoped key's id
// once the key is usable.
func (st *createState) rejected(req events.APIGatewayV2HTTPRequest, reason string) obs.Request {
	r := rejected(reason)
	if st.scoped == "" {
		if key, err := idemhttp.ParseKey(apigw.Header(req.Headers, HeaderIdempotencyKey)); err == nil {
			st.scoped = scopedKey(st.principal, key)
		}
	}
	if st.scoped != "" {
		r.ID = obs.KeyID(st.scoped)
	}
	return r
}

// jsonContentType reports whether a request's content-type lets its body be read as JSON:
// application/json, case-insensitively, with any parameters but a charset other than UTF-8.
// A request without a content-type is read as JSON too: its body is still parsed strictly, and
// no browser form can send one without it (a form's text/plain or urlencoded body is refused).
func jsonContentType(v string) bool {
	if strings.EqualFold(v, "application/json") {
		return true // what nearly every request says, without the parser's map of parameters
	}
	if strings.TrimSpace(v) == "" {
		return true
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil || mt != "application/json" {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8")
}

// record writes the payment for scoped to the ledger, or returns the one already there
// (existed). A payment there made from a different request is errKeyReused.
func (h *Handler) record(ctx context.Context, scoped, principal string, in createRequest, fp idem.Fingerprint) (p ledger.Payment, existed bool, err error) {
	fingerprint := hex.EncodeToString(fp[:])
	for attempt := 1; ; attempt++ {
		stored, err := h.ledger.Create(ctx, scoped, ledger.Payment{
			ID:          h.newID(),
			Principal:   principal,
			Amount:      in.Amount,
			Currency:    in.Currency,
			Status:      StatusSucceeded,
			CreatedAt:   h.now(),
			Fingerprint: fingerprint,
		})
		switch {
		case err == nil:
			return stored, false, nil
		case errors.Is(err, ledger.ErrExists), errors.Is(err, ledger.ErrFenced):
			// ErrFenced: this claim was taken over and the later owner wrote the payment; this
			// request gets that payment, as a retry would.
			if stored.Fingerprint != "" && stored.Fingerprint != fingerprint {
				return ledger.Payment{}, false, errKeyReused
			}
			return stored, true, nil
		case errors.Is(err, ledger.ErrDuplicateID) && attempt < idAttempts:
			continue
		default:
			return ledger.Payment{}, false, fmt.Errorf("payments: record payment: %w", err)
		}
	}
}

func internalError() events.APIGatewayV2HTTPResponse {
	return apigw.Error(500, refusal.CodeInternal, "the payment could not be confirmed; retry with the same idempotency key")
}
