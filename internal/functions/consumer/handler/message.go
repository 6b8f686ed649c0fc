package handler

import (
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// LocalQueueARN is the eventSourceARN of the messages Delivered returns: a FIFO queue's.
const LocalQueueARN = "arn:aws:sqs:local:000000000000:events.fifo"

// Delivered returns the record SQS would deliver to this function for a message sent with in
// (what the sqs sink sends), as message id: its body, its String attributes, and for a FIFO
// send its group and deduplication ids. For local tools and tests that hand the sink's
// messages to the consumer without a queue.
func Delivered(in *sqs.SendMessageInput, id string, receiveCount int) events.SQSMessage {
	msg := events.SQSMessage{
		MessageId:         id,
		Body:              aws.ToString(in.MessageBody),
		EventSource:       "aws:sqs",
		EventSourceARN:    LocalQueueARN,
		Attributes:        map[string]string{"ApproximateReceiveCount": strconv.Itoa(receiveCount)},
		MessageAttributes: map[string]events.SQSMessageAttribute{},
	}
	if in.MessageGroupId != nil {
		msg.Attributes["MessageGroupId"] = *in.MessageGroupId
	}
	if in.MessageDeduplicationId != nil {
		msg.Attributes["MessageDeduplicationId"] = *in.MessageDeduplicationId
	}
	for name, a := range in.MessageAttributes {
		msg.MessageAttributes[name] = events.SQSMessageAttribute{DataType: aws.ToString(a.DataType), StringValue: a.StringValue}
	}
	return msg
}
