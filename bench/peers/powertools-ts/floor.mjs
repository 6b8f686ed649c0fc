// The client floor for bench/compare: single commands, sequential, on @redis/client (the client
// Powertools' Redis layer uses). Its last line is JSON: {"client": ..., "<command>": percentiles}.
import { knobs, percentiles, since } from '../common/measure.mjs';
import { connect } from './handler.mjs';

const client = await connect();
const run = Date.now().toString(36);
const out = { client: '@redis/client' };
for (const [name, fn] of [
  ['PING', () => client.ping()],
  ['SET NX EX (new key)', (i) => client.set(`floor:${run}:${i}`, 'x', { EX: 60, NX: true })],
  ['GET', (i) => client.get(`floor:${run}:${i}`)],
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
await client.close();
console.log(JSON.stringify(out));
