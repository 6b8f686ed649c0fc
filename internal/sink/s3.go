package sink

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3API is the part of *s3.Client the S3 payload store uses.
type S3API interface {
	PutObject(ctx context.Context, params *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, params *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
}

// S3Store is a PayloadStore in an S3 bucket. Each payload is one object, written by one
// PutObject with its SHA-256 (x-amz-checksum-sha256), so S3 refuses an upload whose bytes are
// not those sent, and an object is never half-written: S3 makes an object visible only once
// the whole of it is stored. Encryption at rest is the bucket's.
type S3Store struct {
	client S3API
	bucket string
}

// NewS3Store returns a store that keeps payloads in bucket through client.
func NewS3Store(client S3API, bucket string) *S3Store {
	return &S3Store{client: client, bucket: bucket}
}

// Bucket returns the bucket's name.
func (s *S3Store) Bucket() string { return s.bucket }

// Put writes payload to key, as application/json.
func (s *S3Store) Put(ctx context.Context, key string, payload []byte) error {
	sum := sha256.Sum256(payload)
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:         aws.String(s.bucket),
		Key:            aws.String(key),
		Body:           bytes.NewReader(payload),
		ContentLength:  aws.Int64(int64(len(payload))),
		ContentType:    aws.String("application/json"),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	})
	if err != nil {
		return fmt.Errorf("sink: s3 put %s/%s: %w", s.bucket, key, err)
	}
	return nil
}

// Get reads key, at most maxBytes of it.
func (s *S3Store) Get(ctx context.Context, key string, maxBytes int64) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("sink: s3 get %s/%s: %w", s.bucket, key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, maxBytes+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("sink: s3 get %s/%s: read: %w", s.bucket, key, err)
	case int64(len(b)) > maxBytes:
		return nil, fmt.Errorf("sink: s3 get %s/%s: over %d bytes", s.bucket, key, maxBytes)
	}
	return b, nil
}
