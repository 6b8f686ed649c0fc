// Measures Powertools' idempotency on Redis, in-process (no Lambda runtime, no HTTP), for
// bench/compare: the business logic alone; first executions and replays with and without the
// local cache; and the concurrency test (ROUNDS new keys, each invoked by CONC environments at
// once, each with its own client and persistence layer). Writes RESULTS_DIR/powertools.json.
import { isDeepStrictEqual } from 'node:util';
import { commandStats, commandsPerRequest, knobs, percentiles, report, since, writeResults } from '../common/measure.mjs';
import { businessLogic, connect, idempotent, lambdaContext, paymentEvent } from './handler.mjs';

const run = `pt-${Date.now().toString(36)}`; // fresh keys every run
const ids = (tag, n) => Array.from({ length: n }, (_, i) => `${run}-${tag}-${i}`);
const phases = {};

// sequential calls fn once per id, one after another; with want, it counts the responses that
// differ from want's.
async function sequential(name, fn, keys, { want, counters } = {}) {
  const us = new Array(keys.length);
  const responses = new Array(keys.length);
  const executionsBefore = counters?.executions;
  const before = await commandStats();
  for (let i = 0; i < keys.length; i++) {
    const event = paymentEvent(keys[i]);
    const start = process.hrtime.bigint();
    responses[i] = await fn(event, lambdaContext());
    us[i] = since(start);
  }
  const phase = { ...percentiles(us), ...commandsPerRequest(before, await commandStats(), keys.length) };
  if (want) phase.replayMismatches = responses.filter((r, i) => !isDeepStrictEqual(r, want[i])).length;
  if (counters) phase.executionsDuringPhase = counters.executions - executionsBefore;
  phases[name] = phase;
  report('powertools', name, phase);
  return responses;
}

// concurrency invokes each of ROUNDS new keys from CONC environments at once.
async function concurrency(workMs) {
  const name = `c concurrent same key, work ${workMs}ms`;
  const envs = [];
  for (let i = 0; i < knobs.conc; i++) {
    const client = await connect();
    envs.push({ client, ...idempotent(client, { workMs }) });
  }
  const tally = { ranBusinessLogic: 0, inProgressErrors: 0, returnedStoredResult: 0, otherErrors: 0 };
  let perKeyMin = Infinity;
  let perKeyMax = 0;
  const us = [];
  const before = await commandStats();
  for (let r = 0; r < knobs.rounds; r++) {
    const id = `${run}-conc-${workMs}-${r}`;
    const executions = () => envs.reduce((a, e) => a + e.counters.executions, 0);
    const executedBefore = executions();
    const outcomes = await Promise.allSettled(
      envs.map(async (e) => {
        const start = process.hrtime.bigint();
        try {
          return await e.handler(paymentEvent(id), lambdaContext());
        } finally {
          us.push(since(start));
        }
      }),
    );
    const executed = executions() - executedBefore;
    perKeyMin = Math.min(perKeyMin, executed);
    perKeyMax = Math.max(perKeyMax, executed);
    tally.ranBusinessLogic += executed;
    tally.returnedStoredResult += outcomes.filter((o) => o.status === 'fulfilled').length - executed;
    for (const o of outcomes) {
      if (o.status === 'fulfilled') continue;
      if (o.reason?.name === 'IdempotencyAlreadyInProgressError') tally.inProgressErrors++;
      else tally.otherErrors++;
    }
  }
  const phase = {
    ...percentiles(us),
    keys: knobs.rounds,
    invocationsPerKey: knobs.conc,
    workMs,
    ...tally,
    executionsPerKeyMin: perKeyMin,
    executionsPerKeyMax: perKeyMax,
    ...commandsPerRequest(before, await commandStats(), knobs.conc * knobs.rounds),
  };
  phases[name] = phase;
  report('powertools', name, phase);
  for (const e of envs) await e.client.close();
}

const client = await connect();
{
  // Warm-up, not measured: JIT, the connection, both paths.
  const { handler } = idempotent(client);
  const logic = businessLogic();
  for (const id of ids('warm', knobs.warmup)) {
    await handler(paymentEvent(id), lambdaContext());
    await handler(paymentEvent(id), lambdaContext());
    await logic(paymentEvent(id), lambdaContext());
  }
}
await sequential('0 no-idempotency baseline', businessLogic(), ids('base', knobs.n));
{
  const { handler, counters } = idempotent(client);
  const keys = ids('a', knobs.n);
  const first = await sequential('a first-time (unique keys)', handler, keys);
  await sequential('b replay, no local cache', handler, keys, { want: first, counters });
}
{
  // Powertools' in-memory LRU in front of Redis, large enough for every key.
  const { handler, counters } = idempotent(client, { useLocalCache: true, maxLocalCacheSize: knobs.n });
  const keys = ids('lc', knobs.n);
  const first = await sequential('a first-time, local cache on', handler, keys);
  await sequential('b replay, local cache hit (warm)', handler, keys, { want: first, counters });
  // Another environment, its cache empty, replaying the same keys.
  const cold = idempotent(client, { useLocalCache: true, maxLocalCacheSize: knobs.n });
  await sequential('b replay, local cache miss (cold)', cold.handler, keys, { want: first, counters: cold.counters });
}
await concurrency(0);
await concurrency(20);
await client.close();
writeResults('powertools.json', { peer: 'powertools-ts', n: knobs.n, phases });
