// Measures the express + ioredis middleware over HTTP/1.1 keep-alive on loopback, for
// bench/compare: the route without the middleware; first requests and replays, one at a time
// and CONC in flight (and autocannon replaying as a cross-check); and the concurrency test (ROUNDS
// new keys, CONC requests each at once). It starts server.mjs as a child process and stops it.
// Writes RESULTS_DIR/express.json.
import { spawn } from 'node:child_process';
import http from 'node:http';
import autocannon from 'autocannon';
import { commandStats, commandsPerRequest, knobs, percentiles, report, since, sleep, writeResults } from '../common/measure.mjs';

const port = Number(process.env.PORT ?? 3091);
const run = `ex-${Date.now().toString(36)}`;
const ids = (tag, n) => Array.from({ length: n }, (_, i) => `${run}-${tag}-${i}`);
const phases = {};

const server = spawn(process.execPath, [new URL('./server.mjs', import.meta.url).pathname], {
  env: { ...process.env, PORT: String(port) },
  stdio: ['ignore', 'pipe', 'inherit'],
});
await new Promise((resolve, reject) => {
  server.stdout.on('data', (d) => String(d).includes('listening') && resolve());
  server.on('exit', (code) => reject(new Error(`server.mjs exited with ${code}`)));
});

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

// request sends one HTTP request and resolves to its status, replay header and body.
function request(method, path, { id, work = 0 } = {}) {
  const body = id === undefined ? '' : JSON.stringify({ id, amount: 1000, currency: 'EUR' });
  const headers = id === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'idempotency-key': id };
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: work ? `${path}?work=${work}` : path, agent, headers }, (res) => {
      let data = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (data += c));
      res.on('end', () => resolve({ status: res.statusCode, replayed: res.headers['idempotent-replayed'] === 'true', body: data }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
const executions = async () => JSON.parse((await request('GET', '/stats')).body).executions;

// drive posts one request per id to path from `workers` loops at once and records the phase;
// with want, it counts the bodies that differ from want's.
async function drive(name, path, keys, workers, { want, record = true } = {}) {
  const us = new Array(keys.length);
  const bodies = new Array(keys.length);
  const statuses = {};
  let next = 0;
  const before = await commandStats();
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (next < keys.length) {
        const i = next++;
        const start = process.hrtime.bigint();
        const r = await request('POST', path, { id: keys[i] });
        us[i] = since(start);
        statuses[r.status] = (statuses[r.status] ?? 0) + 1;
        bodies[i] = r.body;
      }
    }),
  );
  const rps = keys.length / (since(t0) / 1e6);
  await sleep(50); // the middleware's final SET is not awaited: let it reach the server
  if (!record) return bodies;
  const phase = { ...percentiles(us), workers, rps, statuses, ...commandsPerRequest(before, await commandStats(), keys.length) };
  if (want) phase.replayMismatches = bodies.filter((b, i) => b !== want[i]).length;
  phases[name] = phase;
  report('express', name, phase);
  return bodies;
}

// concurrency posts each of ROUNDS new keys CONC times at once.
async function concurrency(work) {
  const name = `c concurrent same key, work ${work}ms`;
  const tally = { ranBusinessLogic: 0, conflict409: 0, replayed200: 0, otherErrors: 0 };
  let perKeyMin = Infinity;
  let perKeyMax = 0;
  const us = [];
  const before = await commandStats();
  for (let r = 0; r < knobs.rounds; r++) {
    const id = `${run}-conc-${work}-${r}`;
    const executedBefore = await executions();
    const answers = await Promise.all(
      Array.from({ length: knobs.conc }, async () => {
        const start = process.hrtime.bigint();
        const a = await request('POST', '/payments', { id, work });
        us.push(since(start));
        return a;
      }),
    );
    const executed = (await executions()) - executedBefore;
    perKeyMin = Math.min(perKeyMin, executed);
    perKeyMax = Math.max(perKeyMax, executed);
    tally.ranBusinessLogic += executed;
    for (const a of answers) {
      if (a.status === 409) tally.conflict409++;
      else if (a.status === 200 && a.replayed) tally.replayed200++;
      else if (a.status !== 200) tally.otherErrors++;
    }
  }
  await sleep(50);
  const phase = {
    ...percentiles(us),
    keys: knobs.rounds,
    invocationsPerKey: knobs.conc,
    workMs: work,
    ...tally,
    executionsPerKeyMin: perKeyMin,
    executionsPerKeyMax: perKeyMax,
    ...commandsPerRequest(before, await commandStats(), knobs.conc * knobs.rounds),
  };
  phases[name] = phase;
  report('express', name, phase);
}

// autocannonReplay replays keys with CONC connections through autocannon.
async function autocannonReplay(keys) {
  const name = `autocannon replay c=${knobs.conc}`;
  let i = 0;
  const before = await commandStats();
  const r = await autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: knobs.conc,
    amount: knobs.thrN,
    requests: [
      {
        method: 'POST',
        path: '/payments',
        setupRequest: (req) => {
          const id = keys[i++ % keys.length];
          return { ...req, headers: { 'content-type': 'application/json', 'idempotency-key': id }, body: JSON.stringify({ id, amount: 1000, currency: 'EUR' }) };
        },
      },
    ],
  });
  const phase = {
    rps: r.requests.average,
    requests: r.requests.total,
    latencyMs: { p50: r.latency.p50, p99: r.latency.p99, max: r.latency.max },
    non2xx: r.non2xx,
    ...commandsPerRequest(before, await commandStats(), r.requests.total),
  };
  phases[name] = phase;
  report('express', name, phase);
}

try {
  // Warm-up, not measured: JIT, the connections, every route.
  const warm = ids('warm', knobs.warmup);
  await drive('', '/payments', warm, 1, { record: false });
  await drive('', '/payments', warm, 1, { record: false });
  await drive('', '/payments-plain', ids('warmplain', knobs.warmup), 1, { record: false });

  await drive('0 no-idempotency baseline (HTTP)', '/payments-plain', ids('base', knobs.n), 1);
  const a = ids('a', knobs.n);
  const first = await drive('a first-time (unique keys)', '/payments', a, 1);
  await drive('b replay', '/payments', a, 1, { want: first });
  await drive(`0 baseline c=${knobs.conc}`, '/payments-plain', ids('tbase', knobs.thrN), knobs.conc);
  const t = ids('t', knobs.thrN);
  await drive(`a first-time c=${knobs.conc}`, '/payments', t, knobs.conc);
  await drive(`b replay c=${knobs.conc}`, '/payments', t, knobs.conc);
  await autocannonReplay(t);
  await concurrency(0);
  await concurrency(20);
} finally {
  agent.destroy();
  server.kill('SIGTERM');
}
writeResults('express.json', { peer: 'express-ioredis', n: knobs.n, phases });
