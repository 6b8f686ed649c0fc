// The client floor for bench/compare: single commands, sequential, on ioredis (the express
// middleware's client). Its last line is JSON: {"client": ..., "<command>": percentiles}.
import Redis from 'ioredis';
import { REDIS_HOST, REDIS_PORT, knobs, percentiles, since } from '../common/measure.mjs';

const redis = new Redis({ host: REDIS_HOST, port: REDIS_PORT });
const run = Date.now().toString(36);
const out = { client: 'ioredis' };
for (const [name, fn] of [
  ['PING', () => redis.ping()],
  ['SET NX EX (new key)', (i) => redis.set(`floorio:${run}:${i}`, 'x', 'EX', 60, 'NX')],
  ['GET', (i) => redis.get(`floorio:${run}:${i}`)],
]) {
  for (let i = 1; i <= 500; i++) await fn(-i); // warm-up, on keys of its own
  const us = new Array(knobs.floorN);
  for (let i = 0; i < knobs.floorN; i++) {
    const start = process.hrtime.bigint();
    await fn(i);
    us[i] = since(start);
  }
  out[name] = percentiles(us);
}
await redis.quit();
console.log(JSON.stringify(out));
