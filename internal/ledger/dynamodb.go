package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// DynamoDBAPI is the part of *dynamodb.Client that [DynamoDB] uses.
type DynamoDBAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// TableAPI is the part of *dynamodb.Client that [CreateTable] uses.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

var _ TableAPI = (*dynamodb.Client)(nil)

// Partition key values are the key or id behind a fixed prefix, so the two kinds of item share
// one table without colliding.
const (
	attrPK    = "pk"
	keyPrefix = "key#" // the idempotency item: pk = "key#" + scoped key
	payPrefix = "pay#" // the lookup item: pk = "pay#" + payment id
)

// Transactions that lose a race with another transaction on the same item are retried this many
// times in all, with jittered exponential backoff from transactBackoff.
const (
	transactAttempts = 5
	transactBackoff  = 25 * time.Millisecond
)

// DynamoDB is a Ledger in one DynamoDB table. It is safe for concurrent use.
//
// The table has a single partition key, pk (String), no sort key, and is billed
// PAY_PER_REQUEST (see [CreateTable]; the SAM template declares the same). Each payment is two
// items with the same attributes:
//
//	pk = "key#" + scoped key   the idempotency record: at most one per key
//	pk = "pay#" + payment id   the lookup by id for Get
//
// and the attributes key (the scoped key), id, principal, amount (Number), currency, status,
// created_at (RFC 3339 in UTC, nanoseconds) and fingerprint.
//
// Create writes both items in one TransactWriteItems, each conditional on attribute_not_exists(pk),
// so either both exist or neither does. Get reads the id item with a strongly consistent read.
//
// DynamoDB-compatible servers without transactions (dynalite, used in tests) answer
// UnknownOperationException. DynamoDB then switches, for the life of the value, to two
// conditional PutItem calls: first the key item, which alone decides who created the payment,
// then the id item. Create returns only after both are written, so every id a caller has seen
// can be read back; and a Create that finds the key taken writes the id item again if the
// creator died between its two writes.
type DynamoDB struct {
	client DynamoDBAPI
	table  string
	// sequential is set once the endpoint has answered that it does not implement
	// TransactWriteItems.
	sequential atomic.Bool
}

var _ Ledger = (*DynamoDB)(nil)

// NewDynamoDB returns a ledger storing payments in table through client, usually a
// *dynamodb.Client built once per execution environment.
func NewDynamoDB(client DynamoDBAPI, table string) *DynamoDB {
	return &DynamoDB{client: client, table: table}
}

// Create implements [Ledger].
func (d *DynamoDB) Create(ctx context.Context, scopedKey string, p Payment) (Payment, error) {
	p, err := prepare(ctx, scopedKey, p)
	if err != nil {
		return Payment{}, err
	}
	if !d.sequential.Load() {
		created, err := d.createInTransaction(ctx, scopedKey, p)
		if !isUnknownOperation(err) {
			return created, err
		}
		d.sequential.Store(true)
	}
	return d.createInSequence(ctx, scopedKey, p)
}

// Get implements [Ledger].
func (d *DynamoDB) Get(ctx context.Context, principal, id string) (Payment, error) {
	if id == "" || len(id) > MaxKeyLen {
		return Payment{}, ErrNotFound
	}
	p, _, err := d.read(ctx, payPrefix+id)
	switch {
	case errors.Is(err, ErrNotFound):
		return Payment{}, ErrNotFound
	case err != nil:
		return Payment{}, fmt.Errorf("ledger: get payment %s: %w", id, err)
	case p.Principal != principal:
		return Payment{}, ErrNotFound
	}
	return p, nil
}

// createInTransaction writes both items atomically.
func (d *DynamoDB) createInTransaction(ctx context.Context, scopedKey string, p Payment) (Payment, error) {
	put := func(pk string) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{
			TableName:                           aws.String(d.table),
			Item:                                encode(pk, scopedKey, p),
			ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}
	}
	in := &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		put(keyPrefix + scopedKey), // index 0: the reasons below are read by position
		put(payPrefix + p.ID),
	}}
	for attempt := 1; ; attempt++ {
		if err := live(ctx); err != nil {
			return Payment{}, fmt.Errorf("ledger: create payment %s: %w", p.ID, err)
		}
		_, err := d.client.TransactWriteItems(ctx, in)
		if err == nil {
			return p, nil
		}
		var canceled *types.TransactionCanceledException
		if !errors.As(err, &canceled) {
			return Payment{}, fmt.Errorf("ledger: create payment %s: %w", p.ID, err)
		}
		keyReason, idReason := reason(canceled, 0), reason(canceled, 1)
		switch {
		case keyReason.code == "ConditionalCheckFailed":
			existing, err := d.existing(ctx, scopedKey, keyReason.item)
			if !errors.Is(err, ErrExists) {
				return Payment{}, err
			}
			return refused(ctx, existing)
		case idReason.code == "ConditionalCheckFailed":
			return Payment{}, fmt.Errorf("%w: %s", ErrDuplicateID, p.ID)
		case attempt < transactAttempts && (retryable(keyReason.code) || retryable(idReason.code)):
			if err := sleep(ctx, backoff(attempt)); err != nil {
				return Payment{}, fmt.Errorf("ledger: create payment %s: %w", p.ID, err)
			}
		default:
			return Payment{}, fmt.Errorf("ledger: create payment %s: %w", p.ID, err)
		}
	}
}

// createInSequence writes the key item, then the id item, for endpoints without transactions.
func (d *DynamoDB) createInSequence(ctx context.Context, scopedKey string, p Payment) (Payment, error) {
	if err := live(ctx); err != nil {
		return Payment{}, fmt.Errorf("ledger: create payment %s: %w", p.ID, err)
	}
	_, err := d.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(d.table),
		Item:                                encode(keyPrefix+scopedKey, scopedKey, p),
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		existing, err := d.existing(ctx, scopedKey, failed.Item)
		if !errors.Is(err, ErrExists) {
			return Payment{}, err
		}
		// The creator may have died before writing the id item; write it for them, so the
		// payment this call is about to report can be read by id.
		if err := d.putIDItem(ctx, scopedKey, existing); err != nil {
			return Payment{}, err
		}
		return refused(ctx, existing)
	case err != nil:
		return Payment{}, fmt.Errorf("ledger: create payment %s: %w", p.ID, err)
	}

	if err := d.putIDItem(ctx, scopedKey, p); err != nil {
		if errors.Is(err, ErrDuplicateID) {
			// Free the key again, as the transaction would have left it.
			if _, derr := d.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
				TableName:                 aws.String(d.table),
				Key:                       pk(keyPrefix + scopedKey),
				ConditionExpression:       aws.String("#id = :id"),
				ExpressionAttributeNames:  map[string]string{"#id": "id"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":id": str(p.ID)},
			}); derr != nil {
				return Payment{}, errors.Join(err, fmt.Errorf("ledger: release key of payment %s: %w", p.ID, derr))
			}
		}
		return Payment{}, err
	}
	return p, nil
}

// putIDItem writes the id item of p, created under scopedKey, unless it exists. An existing id
// item for the same key is success; one for another key is ErrDuplicateID.
func (d *DynamoDB) putIDItem(ctx context.Context, scopedKey string, p Payment) error {
	_, err := d.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(d.table),
		Item:                                encode(payPrefix+p.ID, scopedKey, p),
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var failed *types.ConditionalCheckFailedException
	if !errors.As(err, &failed) {
		if err != nil {
			return fmt.Errorf("ledger: create payment %s: %w", p.ID, err)
		}
		return nil
	}
	owner := failed.Item
	if len(owner) == 0 {
		out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(d.table), Key: pk(payPrefix + p.ID), ConsistentRead: aws.Bool(true),
		})
		if err != nil {
			return fmt.Errorf("ledger: create payment %s: %w", p.ID, err)
		}
		owner = out.Item
	}
	if s, ok := owner["key"].(*types.AttributeValueMemberS); ok && s.Value == scopedKey {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrDuplicateID, p.ID)
}

// existing returns the payment stored under scopedKey, with ErrExists: from item when the failed
// condition check returned it, else from a strongly consistent read.
func (d *DynamoDB) existing(ctx context.Context, scopedKey string, item map[string]types.AttributeValue) (Payment, error) {
	if len(item) > 0 {
		p, _, err := decode(item)
		if err != nil {
			return Payment{}, fmt.Errorf("ledger: payment for existing key: %w", err)
		}
		return p, ErrExists
	}
	p, _, err := d.read(ctx, keyPrefix+scopedKey)
	if errors.Is(err, ErrNotFound) {
		// Only a sequential Create that hit a duplicate id removes a key item again.
		return Payment{}, errors.New("ledger: payment for existing key was removed concurrently; retry")
	}
	if err != nil {
		return Payment{}, fmt.Errorf("ledger: payment for existing key: %w", err)
	}
	return p, ErrExists
}

// read returns the payment in the item with partition key pkValue, read strongly consistently,
// and the scoped key it was created under.
func (d *DynamoDB) read(ctx context.Context, pkValue string) (Payment, string, error) {
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(d.table), Key: pk(pkValue), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Payment{}, "", err
	}
	if len(out.Item) == 0 {
		return Payment{}, "", ErrNotFound
	}
	return decode(out.Item)
}

// cancelReason is one item's reason in a canceled transaction.
type cancelReason struct {
	code string
	item map[string]types.AttributeValue
}

// reason returns the cancellation reason of the i-th item, or the zero reason if there is none.
func reason(e *types.TransactionCanceledException, i int) cancelReason {
	if i >= len(e.CancellationReasons) {
		return cancelReason{}
	}
	r := e.CancellationReasons[i]
	return cancelReason{code: aws.ToString(r.Code), item: r.Item}
}

// retryable reports whether a transaction canceled for this item reason may succeed if retried.
func retryable(code string) bool {
	switch code {
	case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded":
		return true
	}
	return false
}

// backoff returns a random delay up to transactBackoff * 2^(attempt-1).
func backoff(attempt int) time.Duration {
	ceiling := transactBackoff << (attempt - 1)
	return ceiling/2 + rand.N(ceiling/2)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// isUnknownOperation reports whether err is an endpoint's answer that it does not implement the
// operation called.
func isUnknownOperation(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode() == "UnknownOperationException"
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// pk returns the primary key with partition key value v.
func pk(v string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(v)}
}

// encode returns the item for p with partition key pkValue.
func encode(pkValue, scopedKey string, p Payment) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		attrPK:        str(pkValue),
		"key":         str(scopedKey),
		"id":          str(p.ID),
		"principal":   str(p.Principal),
		"amount":      &types.AttributeValueMemberN{Value: strconv.FormatInt(p.Amount, 10)},
		"currency":    str(p.Currency),
		"status":      str(p.Status),
		"created_at":  str(p.CreatedAt.UTC().Format(time.RFC3339Nano)),
		"fingerprint": str(p.Fingerprint),
	}
	if p.Fence != 0 {
		item["fence"] = &types.AttributeValueMemberN{Value: strconv.FormatUint(p.Fence, 10)}
	}
	return item
}

// decode returns the payment in item and the scoped key it was created under.
func decode(item map[string]types.AttributeValue) (Payment, string, error) {
	var errs []error
	s := func(name string) string {
		v, ok := item[name].(*types.AttributeValueMemberS)
		if !ok {
			errs = append(errs, fmt.Errorf("attribute %s is missing or not a string", name))
			return ""
		}
		return v.Value
	}
	p := Payment{
		ID:          s("id"),
		Principal:   s("principal"),
		Currency:    s("currency"),
		Status:      s("status"),
		Fingerprint: s("fingerprint"),
	}
	scopedKey := s("key")
	if n, ok := item["amount"].(*types.AttributeValueMemberN); !ok {
		errs = append(errs, errors.New("attribute amount is missing or not a number"))
	} else if amount, err := strconv.ParseInt(n.Value, 10, 64); err != nil {
		errs = append(errs, fmt.Errorf("attribute amount: %w", err))
	} else {
		p.Amount = amount
	}
	if n, ok := item["fence"].(*types.AttributeValueMemberN); ok {
		fence, err := strconv.ParseUint(n.Value, 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute fence: %w", err))
		}
		p.Fence = fence
	}
	if created := s("created_at"); created != "" {
		t, err := time.Parse(time.RFC3339Nano, created)
		if err != nil {
			errs = append(errs, fmt.Errorf("attribute created_at: %w", err))
		}
		p.CreatedAt = t.UTC()
	}
	if err := errors.Join(errs...); err != nil {
		return Payment{}, "", fmt.Errorf("decode item %v: %w", aws.ToString(stringAttr(item, attrPK)), err)
	}
	return p, scopedKey, nil
}

// stringAttr returns item[name] if it is a string.
func stringAttr(item map[string]types.AttributeValue, name string) *string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return &v.Value
	}
	return nil
}

// CreateTable creates the ledger's table (partition key pk of type String, PAY_PER_REQUEST, the
// schema [DynamoDB] documents) and waits up to two minutes for it to become ACTIVE. A table that
// already exists is not an error. It is meant for tests and local servers; in AWS the SAM
// template declares the table.
func CreateTable(ctx context.Context, client TableAPI, table string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("ledger: create table %s: %w", table, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 100 * time.Millisecond
		o.MaxDelay = 5 * time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 2*time.Minute); err != nil {
		return fmt.Errorf("ledger: wait for table %s: %w", table, err)
	}
	return nil
}
