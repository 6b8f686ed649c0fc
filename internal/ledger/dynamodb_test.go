package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemlambda/idem/internal/ledger"
	"github.com/idemlambda/idem/internal/testsupport"
)

// dynalite returns a client for a fresh dynalite server, stopped at cleanup.
func dynalite(t *testing.T) *dynamodb.Client {
	t.Helper()
	return dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(testsupport.StartDynalite(t)),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

var tables atomic.Int64

// newTable creates a ledger table with a name no other test uses.
func newTable(t *testing.T, client ledger.TableAPI) string {
	t.Helper()
	name := fmt.Sprintf("payments-%d", tables.Add(1))
	if err := ledger.CreateTable(context.Background(), client, name); err != nil {
		t.Fatal(err)
	}
	return name
}

// transacting adds TransactWriteItems (Put items conditional on attribute_not_exists(pk) only)
// to a server that lacks it, such as dynalite. Every call holds one lock, so a transaction is
// atomic to everything that goes through the same value. Like DynamoDB it checks every item's
// condition before writing any, reports a reason per item, and returns the existing item on
// ReturnValuesOnConditionCheckFailure ALL_OLD.
type transacting struct {
	*dynamodb.Client
	mu        sync.Mutex
	conflicts int // the next this many transactions are canceled with TransactionConflict
}

// locked calls op with mu held.
func locked[In, Out any](mu *sync.Mutex, op func(context.Context, In, ...func(*dynamodb.Options)) (Out, error), ctx context.Context, in In, opts []func(*dynamodb.Options)) (Out, error) {
	mu.Lock()
	defer mu.Unlock()
	return op(ctx, in, opts...)
}

func (c *transacting) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return locked(&c.mu, c.Client.GetItem, ctx, in, opts)
}

func (c *transacting) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return locked(&c.mu, c.Client.PutItem, ctx, in, opts)
}

func (c *transacting) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return locked(&c.mu, c.Client.DeleteItem, ctx, in, opts)
}

func (c *transacting) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reasons := make([]types.CancellationReason, len(in.TransactItems))
	for i := range reasons {
		reasons[i].Code = aws.String("None")
	}
	canceled := &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: reasons}
	if c.conflicts > 0 {
		c.conflicts--
		reasons[0].Code = aws.String("TransactionConflict")
		return nil, canceled
	}
	failed := false
	for i, item := range in.TransactItems {
		put := item.Put
		if put == nil || aws.ToString(put.ConditionExpression) != "attribute_not_exists(pk)" {
			return nil, errors.New("transacting: only Put with attribute_not_exists(pk) is supported")
		}
		out, err := c.Client.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: put.TableName, Key: map[string]types.AttributeValue{"pk": put.Item["pk"]}, ConsistentRead: aws.Bool(true),
		}, opts...)
		if err != nil {
			return nil, err
		}
		if len(out.Item) > 0 {
			failed = true
			reasons[i].Code = aws.String("ConditionalCheckFailed")
			if put.ReturnValuesOnConditionCheckFailure == types.ReturnValuesOnConditionCheckFailureAllOld {
				reasons[i].Item = out.Item
			}
		}
	}
	if failed {
		return nil, canceled
	}
	for _, item := range in.TransactItems {
		if _, err := c.Client.PutItem(ctx, &dynamodb.PutItemInput{TableName: item.Put.TableName, Item: item.Put.Item}, opts...); err != nil {
			return nil, err
		}
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

func TestDynamoDBKeepsTheLedgerContract(t *testing.T) {
	client := dynalite(t)
	t.Run("WithTransactions", func(t *testing.T) {
		runContract(t, func(t *testing.T) ledger.Ledger {
			return ledger.NewDynamoDB(&transacting{Client: client}, newTable(t, client))
		})
	})
	t.Run("WithoutTransactions", func(t *testing.T) { // dynalite answers UnknownOperationException
		runContract(t, func(t *testing.T) ledger.Ledger {
			return ledger.NewDynamoDB(client, newTable(t, client))
		})
	})
}

// failingIDWrites fails the next failures PutItem calls that write an id item.
type failingIDWrites struct {
	ledger.DynamoDBAPI
	failures atomic.Int64
}

func (c *failingIDWrites) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if pk, _ := in.Item["pk"].(*types.AttributeValueMemberS); pk != nil && strings.HasPrefix(pk.Value, "pay#") && c.failures.Add(-1) >= 0 {
		return nil, errors.New("injected: connection reset")
	}
	return c.DynamoDBAPI.PutItem(ctx, in, opts...)
}

func TestDynamoDB(t *testing.T) {
	client := dynalite(t)
	ctx := context.Background()

	t.Run("RetriesATransactionThatConflicts", func(t *testing.T) {
		t.Parallel()
		l := ledger.NewDynamoDB(&transacting{Client: client, conflicts: 3}, newTable(t, client))
		p := payment("alice", "pay_1", 100)
		if got, err := l.Create(ctx, "k1", p); err != nil || got != stored(p) {
			t.Errorf("Create after 3 conflicts = %+v, %v; want the payment", got, err)
		}
	})

	t.Run("GivesUpOnATransactionThatKeepsConflicting", func(t *testing.T) {
		t.Parallel()
		l := ledger.NewDynamoDB(&transacting{Client: client, conflicts: 100}, newTable(t, client))
		_, err := l.Create(ctx, "k1", payment("alice", "pay_1", 100))
		var canceled *types.TransactionCanceledException
		if !errors.As(err, &canceled) || errors.Is(err, ledger.ErrExists) {
			t.Errorf("Create = %v, want the wrapped TransactionCanceledException", err)
		}
	})

	t.Run("WithoutTransactionsFinishesAPaymentWhoseCreatorFailedBetweenWrites", func(t *testing.T) {
		t.Parallel()
		faulty := &failingIDWrites{DynamoDBAPI: client}
		faulty.failures.Store(1)
		l := ledger.NewDynamoDB(faulty, newTable(t, client))
		first := payment("alice", "pay_1", 100)
		if _, err := l.Create(ctx, "k1", first); err == nil {
			t.Fatal("Create succeeded although its id item write failed")
		}
		got, err := l.Create(ctx, "k1", payment("alice", "pay_2", 100))
		if !errors.Is(err, ledger.ErrExists) || got != stored(first) {
			t.Fatalf("retried Create = %+v, %v; want the first payment and ErrExists", got, err)
		}
		if got, err := l.Get(ctx, "alice", "pay_1"); err != nil || got != stored(first) {
			t.Errorf("Get after the retry = %+v, %v; want the first payment", got, err)
		}
	})

	t.Run("StoresTheDocumentedItems", func(t *testing.T) {
		t.Parallel()
		table := newTable(t, client)
		p := payment("alice", "pay_1", 1250)
		if _, err := ledger.NewDynamoDB(&transacting{Client: client}, table).Create(ctx, "alice:k1", p); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"key": "alice:k1", "id": "pay_1", "principal": "alice", "amount": "1250", "currency": "EUR",
			"status": "succeeded", "created_at": "2026-03-04T04:06:07.123456789Z", "fingerprint": p.Fingerprint,
		}
		for _, pk := range []string{"key#alice:k1", "pay#pay_1"} {
			checkItem(t, client, table, pk, want)
		}
	})

	t.Run("CreateTableAcceptsAnExistingTable", func(t *testing.T) {
		t.Parallel()
		table := newTable(t, client)
		if err := ledger.CreateTable(ctx, client, table); err != nil {
			t.Errorf("second CreateTable: %v", err)
		}
	})

	t.Run("ReportsAMissingTable", func(t *testing.T) {
		t.Parallel()
		_, err := ledger.NewDynamoDB(client, "no-such-table").Create(ctx, "k1", payment("alice", "pay_1", 1))
		var notFound *types.ResourceNotFoundException
		if !errors.As(err, &notFound) {
			t.Errorf("Create = %v, want a wrapped ResourceNotFoundException", err)
		}
		if _, err := ledger.NewDynamoDB(client, "no-such-table").Get(ctx, "alice", "pay_1"); !errors.As(err, &notFound) {
			t.Errorf("Get = %v, want a wrapped ResourceNotFoundException, not ErrNotFound", err)
		}
	})
}

// checkItem fails t unless the item of table under pk holds exactly the attributes of want
// (and pk), each a string or number written as want's value.
func checkItem(t *testing.T, client ledger.DynamoDBAPI, table, pk string, want map[string]string) {
	t.Helper()
	out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Item) != len(want)+1 {
		t.Errorf("item %s has %d attributes, want %d", pk, len(out.Item), len(want)+1)
	}
	for name, value := range want {
		var got string
		switch v := out.Item[name].(type) {
		case *types.AttributeValueMemberS:
			got = v.Value
		case *types.AttributeValueMemberN:
			got = v.Value
		}
		if got != value {
			t.Errorf("item %s: %s = %q, want %q", pk, name, got, value)
		}
	}
}
