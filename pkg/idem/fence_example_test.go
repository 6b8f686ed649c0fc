package idem_test

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemlambda/idem/pkg/idem"
)

// workContext stands in for the context a guard built WithFencing gives its work.
func workContext() context.Context {
	return idem.ContextWithFence(context.Background(), 1764601200000001)
}

// A DynamoDB write made conditional on the claim's token: it succeeds for the first writer and
// for any later claim of the key (a larger token), and fails with ConditionalCheckFailed for an
// owner whose claim was taken over while it was paused (a smaller token than the one stored).
func ExampleFenceFrom_dynamoDB() {
	ctx := workContext()
	fence, ok := idem.FenceFrom(ctx)
	if !ok {
		return // the guard was built without WithFencing
	}
	token := &types.AttributeValueMemberN{Value: strconv.FormatUint(fence, 10)}
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String("orders"),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "order#42"}},
		UpdateExpression:          aws.String("SET #status = :status, fence = :fence"),
		ConditionExpression:       aws.String("attribute_not_exists(fence) OR fence < :fence"),
		ExpressionAttributeNames:  map[string]string{"#status": "status"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":status": &types.AttributeValueMemberS{Value: "shipped"}, ":fence": token},
	}
	// client.UpdateItem(ctx, in): a *types.ConditionalCheckFailedException means a later owner wrote.
	fmt.Println(*in.ConditionExpression)
	fmt.Println(":fence =", token.Value)
	// Output:
	// attribute_not_exists(fence) OR fence < :fence
	// :fence = 1764601200000001
}

// The same for SQL: the row is updated only by a claim whose token is larger than the last
// writer's; 0 rows affected means a later owner wrote first (the fence column starts at 0).
func ExampleFenceFrom_sql() {
	ctx := workContext()
	fence, ok := idem.FenceFrom(ctx)
	if !ok {
		return
	}
	const update = `UPDATE orders SET status = $2, fence = $1 WHERE id = $3 AND fence < $1`
	args := []any{int64(fence), "shipped", 42} // db.ExecContext(ctx, update, args...)
	fmt.Println(update)
	fmt.Println(args...)
	// Output:
	// UPDATE orders SET status = $2, fence = $1 WHERE id = $3 AND fence < $1
	// 1764601200000001 shipped 42
}
