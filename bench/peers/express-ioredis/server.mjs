// The Idempotency-Key middleware of many express tutorials, on ioredis:
//   SET idempotency:<key> STARTED NX EX 60
//   taken: GET; STARTED -> 409, a stored response -> replayed with Idempotent-Replayed: true
//   after a successful response: SET idempotency:<key> <response> EX 86400, not awaited
// POST /payments goes through it, POST /payments-plain (the baseline) does not; GET /stats
// counts the business logic's executions.
import express from 'express';
import Redis from 'ioredis';

const port = Number(process.env.PORT ?? 3091);
const redis = new Redis({ host: '127.0.0.1', port: Number(process.env.REDIS_PORT ?? 6391) });
let executions = 0;

async function idempotencyKey(req, res, next) {
  const key = req.get('Idempotency-Key');
  if (!key) return res.status(400).json({ error: 'Idempotency-Key header required' });
  const redisKey = `idempotency:${key}`;
  try {
    if (!(await redis.set(redisKey, 'STARTED', 'EX', 60, 'NX'))) {
      const stored = await redis.get(redisKey);
      if (stored === 'STARTED') return res.status(409).json({ error: 'a request with this key is in progress' });
      if (stored !== null) {
        const { statusCode, body } = JSON.parse(stored);
        res.set('Idempotent-Replayed', 'true');
        return res.status(statusCode).json(body);
      }
      // Expired between SET NX and GET: the pattern runs the request.
    }
  } catch (err) {
    return next(err);
  }
  const json = res.json.bind(res);
  res.json = (body) => {
    if (res.statusCode < 400) {
      redis.set(redisKey, JSON.stringify({ statusCode: res.statusCode, body }), 'EX', 86400).catch(() => {});
    }
    return json(body);
  };
  next();
}

async function createPayment(req, res) {
  executions++;
  const work = Number(req.query.work ?? 0);
  if (work > 0) await new Promise((r) => setTimeout(r, work));
  res.status(200).json({ id: req.body.id, status: 'accepted', amount: req.body.amount ?? 0 });
}

const app = express();
app.use(express.json());
app.post('/payments', idempotencyKey, createPayment);
app.post('/payments-plain', createPayment);
app.get('/stats', (_req, res) => res.json({ executions }));

await redis.ping();
const server = app.listen(port, '127.0.0.1', () => console.log(`listening on 127.0.0.1:${port}`));
const stop = () => server.close(() => redis.quit().finally(() => process.exit(0)));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
