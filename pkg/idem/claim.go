package idem

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// sendRawClaim sends the claim args on a standalone client and reads its reply as the bytes the
// server sent. go-redis reads a nil reply as the error redis.Nil, and every error as one it may
// retry, which costs a first execution, whose claim of a free key is answered nil, some twenty
// allocations; read raw, a nil is only bytes. ok is false when the reply is an error reply or one
// a claim never gets: the claim did not run, or it ran and holds our token, so the caller sends
// it again as a typed command, for go-redis to classify and retry as it does any command's (a
// READONLY after a failover, a LOADING restart; an OOM is answered as it is).
func sendRawClaim(ctx context.Context, rc *redis.Client, args []any) (stored []byte, ok bool, err error) {
	cmd := redis.NewRawCmd(ctx, args...)
	_ = rc.Process(ctx, cmd) // the reply carries its own error
	raw, err := cmd.Result()
	if err != nil {
		return nil, true, err // no reply: the connection's error, already retried by go-redis
	}
	stored, free, ok := parseBulkReply(raw)
	switch {
	case !ok:
		return nil, false, nil
	case free:
		return nil, true, redis.Nil
	}
	return stored, true, nil
}

// parseBulkReply reads raw, one RESP2 or RESP3 reply as the server sent it, as the reply to a
// SET ... GET: a bulk string, whose bytes it returns (sharing raw's memory), or a null (free).
// ok is false for any other reply, an error reply among them.
func parseBulkReply(raw []byte) (stored []byte, free, ok bool) {
	switch {
	case string(raw) == "_\r\n" || string(raw) == "$-1\r\n":
		return nil, true, true
	case len(raw) < 4 || raw[0] != '$':
		return nil, false, false
	}
	n, end := 0, 1
	for ; end < len(raw) && raw[end] >= '0' && raw[end] <= '9'; end++ {
		if n = n*10 + int(raw[end]-'0'); n > len(raw) {
			return nil, false, false // longer than the reply
		}
	}
	if end == 1 || end+1 >= len(raw) || raw[end] != '\r' || raw[end+1] != '\n' {
		return nil, false, false
	}
	body := raw[end+2:]
	if len(body) != n+2 || string(body[n:]) != "\r\n" {
		return nil, false, false
	}
	return body[:n:n], false, true
}
