// Powertools for AWS Lambda (TypeScript) idempotency on Redis: the business logic bench/compare
// also wraps in pkg/idem, made idempotent with makeIdempotent and the Redis persistence layer
// (CachePersistenceLayer on @redis/client), keyed on the body's id of an API Gateway HTTP API
// (payload v2.0) event, as the Powertools documentation shows it.
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';
import { createClient } from '@redis/client';
import { REDIS_HOST, REDIS_PORT } from '../common/measure.mjs';

// The persistence layer reads the function's name (the key prefix) when it is built.
process.env.AWS_LAMBDA_FUNCTION_NAME ??= 'peer-powertools';

// connect opens one client: plain TCP on loopback, where a function would use rediss://.
export function connect() {
  return createClient({ url: `redis://${REDIS_HOST}:${REDIS_PORT}` }).connect();
}

// businessLogic is the work: it parses the body and answers an accepted payment, after workMs.
export function businessLogic(workMs = 0, counters = { executions: 0 }) {
  return async (event) => {
    counters.executions++;
    const body = JSON.parse(event.body);
    if (workMs > 0) await new Promise((r) => setTimeout(r, workMs));
    return {
      statusCode: 200,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: body.id, status: 'accepted', amount: body.amount ?? 0 }),
    };
  };
}

// idempotent wraps the business logic as one execution environment would: its own persistence
// layer on client. The record lifetime stays at Powertools' default (3600 s).
export function idempotent(client, { useLocalCache = false, maxLocalCacheSize = 1000, workMs = 0 } = {}) {
  const counters = { executions: 0 };
  const config = new IdempotencyConfig({
    eventKeyJmesPath: 'powertools_json(body).id',
    throwOnNoIdempotencyKey: true,
    useLocalCache,
    maxLocalCacheSize,
  });
  const handler = makeIdempotent(businessLogic(workMs, counters), {
    persistenceStore: new CachePersistenceLayer({ client }),
    config,
  });
  return { handler, counters };
}

// paymentEvent is a POST /payments of an HTTP API whose body carries id.
export function paymentEvent(id) {
  const body = JSON.stringify({ id, amount: 1000, currency: 'EUR' });
  return {
    version: '2.0',
    routeKey: 'POST /payments',
    rawPath: '/payments',
    rawQueryString: '',
    headers: { 'content-type': 'application/json', 'content-length': String(body.length) },
    requestContext: {
      accountId: '123456789012',
      apiId: 'api',
      domainName: 'example.invalid',
      http: { method: 'POST', path: '/payments', protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'compare' },
      requestId: `req-${id}`,
      routeKey: 'POST /payments',
      stage: '$default',
      time: new Date().toISOString(),
      timeEpoch: Date.now(),
    },
    body,
    isBase64Encoded: false,
  };
}

// lambdaContext is the context of an invocation with timeoutMs left (30 s, as bench/compare
// gives its own calls).
export function lambdaContext(timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  return {
    functionName: process.env.AWS_LAMBDA_FUNCTION_NAME,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:us-east-1:123456789012:function:${process.env.AWS_LAMBDA_FUNCTION_NAME}`,
    memoryLimitInMB: '1024',
    awsRequestId: 'compare',
    logGroupName: `/aws/lambda/${process.env.AWS_LAMBDA_FUNCTION_NAME}`,
    logStreamName: 'compare',
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
  };
}
