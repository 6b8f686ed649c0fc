package handler

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemlambda/idem/internal/apigw"
	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/obs"
	"github.com/idemlambda/idem/pkg/idem"
	"github.com/idemlambda/idem/pkg/idem/idemhttp"
)

// StatusSucceeded is the status of every payment this API creates.
const StatusSucceeded = "succeeded"

// HeaderReplayed marks a response that repeats the first response to the same key.
const HeaderReplayed = idemhttp.HeaderReplayed

// idAttempts bounds the payment ids drawn for one request when the ledger reports a collision.
const idAttempts = 3

// errKeyReused is the work's error when the ledger holds a payment for the scoped key made from
// a different request: Redis had lost the record of the first request, the ledger had not.
var errKeyReused = errors.New("payments: idempotency key already used for a different request")

// create serves POST /payments for principal, top to bottom: key, body, claim, work, respond.
func (h *Handler) create(ctx context.Context, req events.APIGatewayV2HTTPRequest, principal string) (events.APIGatewayV2HTTPResponse, obs.Request) {
	key, err := idemhttp.ParseKey(apigw.Header(req.Headers, HeaderIdempotencyKey))
	switch {
	case errors.Is(err, idemhttp.ErrMissingKey):
		return apigw.Error(400, idemhttp.CodeMissingKey, err.Error()), rejected(idemhttp.CodeMissingKey)
	case err != nil:
		return apigw.Error(400, idemhttp.CodeInvalidKey, err.Error()), rejected(idemhttp.CodeInvalidKey)
	}
	scoped := scopedKey(principal, key)

	body, err := apigw.Body(req, MaxBodyBytes)
	switch {
	case errors.Is(err, apigw.ErrBodyTooLarge):
		return apigw.Error(413, "body_too_large", fmt.Sprintf("body: larger than %d bytes", MaxBodyBytes)),
			rejectedKey(scoped, "body_too_large")
	case err != nil:
		return apigw.Error(400, "invalid_request", "body: not valid base64"), rejectedKey(scoped, "invalid_request")
	}
	in, err := parseCreateRequest(body, h.maxAmount)
	if err != nil {
		return apigw.Error(400, "invalid_request", err.Error()), rejectedKey(scoped, "invalid_request")
	}
	fp, err := in.fingerprint()
	if err != nil {
		return internalError(scoped, err)
	}

	var fromLedger bool // the work found the payment already in the ledger
	out, err := h.guard.Do(ctx, idem.Key{Scope: Scope, ID: scoped}, fp, func(ctx context.Context) (idem.Result, error) {
		p, existed, err := h.record(ctx, scoped, principal, in, fp)
		if err != nil {
			return idem.Result{}, err
		}
		fromLedger = existed
		body, err := json.Marshal(p)
		if err != nil {
			return idem.Result{}, fmt.Errorf("payments: encode payment %s: %w", p.ID, err)
		}
		return idem.Result{Status: 201, Body: body}, nil
	})

	rec := obs.Request{ID: obs.KeyID(scoped), RoundTrips: out.RoundTrips, Err: err}
	switch out.Kind {
	case idem.Executed, idem.LockLost, idem.NotStored, idem.ExecutedUnguarded:
		// The payment is in the ledger, whatever became of the Redis record: answer with it. A
		// retry that finds no record in Redis finds the same payment in the ledger.
		rec.Outcome = obs.OutcomeExecuted
		switch {
		case out.Kind == idem.ExecutedUnguarded:
			rec.Reason = "unguarded"
		case out.Kind != idem.Executed:
			rec.Reason = "result_not_stored"
		}
		if fromLedger {
			rec.Outcome, rec.Reason = obs.OutcomeReplayed, "ledger"
			return apigw.Raw(out.Result.Status, out.Result.Body, HeaderReplayed, "true"), rec
		}
		return apigw.Raw(out.Result.Status, out.Result.Body), rec
	case idem.Replayed:
		rec.Outcome = obs.OutcomeReplayed
		return replay(out.Result), rec
	case idem.InProgress:
		rec.Outcome, rec.Err = obs.OutcomeInProgress, nil
		return refuse(out.Kind), rec
	case idem.Mismatch:
		rec.Outcome, rec.Err = obs.OutcomeMismatch, nil
		return refuse(out.Kind), rec
	case idem.Unavailable:
		rec.Outcome, rec.Reason = obs.OutcomeError, "store_unavailable"
		return refuse(out.Kind), rec
	case idem.InvalidKey:
		rec.Outcome, rec.Reason = obs.OutcomeRejected, "invalid_idempotency_key"
		return refuse(out.Kind), rec
	}
	if errors.Is(err, errKeyReused) {
		rec.Outcome, rec.Reason, rec.Err = obs.OutcomeMismatch, "ledger", nil
		return refuse(idem.Mismatch), rec
	}
	resp, rec2 := internalError(scoped, err)
	rec2.RoundTrips = out.RoundTrips
	return resp, rec2
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
		case errors.Is(err, ledger.ErrExists):
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

// replay returns a stored result again, marked as a replay.
func replay(r idem.Result) events.APIGatewayV2HTTPResponse {
	headers := make([]string, 0, 2*len(r.Headers)+2)
	for name, value := range r.Headers {
		headers = append(headers, name, value)
	}
	return apigw.Raw(r.Status, r.Body, append(headers, HeaderReplayed, "true")...)
}

// refuse answers an outcome in which no payment is sent (in progress, key reused, Redis
// unreachable, unusable key) the way every HTTP front of the core does: idemhttp.Refuse's
// status, code and retry-after policy.
func refuse(k idem.Kind) events.APIGatewayV2HTTPResponse {
	r, _ := idemhttp.Refuse(k)
	return apigw.Error(r.Status, r.Code, r.Message, r.Header()...)
}

func internalError(scoped string, err error) (events.APIGatewayV2HTTPResponse, obs.Request) {
	return apigw.Error(500, "internal_error",
			"the payment could not be confirmed; retry with the same idempotency key"),
		obs.Request{ID: obs.KeyID(scoped), Outcome: obs.OutcomeError, Reason: "work_failed", Err: err}
}

// rejectedKey is the log record of a request refused before any work, once its key is known.
func rejectedKey(scoped, reason string) obs.Request {
	r := rejected(reason)
	r.ID = obs.KeyID(scoped)
	return r
}
