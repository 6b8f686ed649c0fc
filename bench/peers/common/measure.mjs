// What both peers' drivers share, with no dependency: the server's command counters, latency
// percentiles, the knobs bench/compare passes, and where results go.
import { mkdirSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export const REDIS_HOST = '127.0.0.1';
export const REDIS_PORT = Number(process.env.REDIS_PORT ?? 6391);

// The knobs, named and defaulted as bench/compare's flags.
export const knobs = {
  n: Number(process.env.N ?? 2000), // sequential requests per path
  warmup: Number(process.env.WARMUP ?? 2000), // requests per path before measuring
  conc: Number(process.env.CONC ?? 50), // in flight; simultaneous callers per key
  rounds: Number(process.env.ROUNDS ?? 20), // keys in the concurrency test
  thrN: Number(process.env.THR_N ?? 10000), // requests per throughput path
  floorN: Number(process.env.FLOOR_N ?? 10000), // requests per floor command
};

// commandStats returns calls per command from INFO commandstats, read on a connection of its own
// (plain RESP, so that the peer's client library adds no command of its own to the count).
export function commandStats() {
  return new Promise((resolve, reject) => {
    const sock = net.connect(REDIS_PORT, REDIS_HOST);
    let buf = Buffer.alloc(0);
    sock.setTimeout(10000, () => sock.destroy(new Error('INFO commandstats: no answer in 10 s')));
    sock.on('error', reject);
    sock.on('connect', () => sock.write('*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n'));
    sock.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      const eol = buf.indexOf('\r\n');
      if (eol < 0) return;
      if (buf[0] !== 0x24) return sock.destroy(new Error(`INFO commandstats: ${buf.toString()}`)); // '$'
      const len = Number(buf.subarray(1, eol).toString());
      if (buf.length < eol + 2 + len) return;
      sock.end();
      const stats = {};
      for (const line of buf.subarray(eol + 2, eol + 2 + len).toString().split('\r\n')) {
        const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line);
        if (m) stats[m[1]] = Number(m[2]);
      }
      resolve(stats);
    });
  });
}

// commandsPerRequest is the commands the server ran between two snapshots, per request, with the
// INFO of the measurement itself left out; breakdown reads "SET 1.00 + GET 1.00".
export function commandsPerRequest(before, after, n) {
  const commands = {};
  for (const [cmd, calls] of Object.entries(after)) {
    const d = calls - (before[cmd] ?? 0);
    if (cmd !== 'info' && d > 0) commands[cmd] = d;
  }
  const total = Object.values(commands).reduce((a, b) => a + b, 0);
  const breakdown = Object.entries(commands)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([c, v]) => `${c.toUpperCase()} ${(v / n).toFixed(2)}`)
    .join(' + ');
  return { cmdsPerReq: total / n, commands, breakdown };
}

// percentiles summarises latencies in microseconds by nearest rank, as bench/compare does.
export function percentiles(us) {
  const s = Float64Array.from(us).sort();
  const pick = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
  const mean = s.reduce((a, b) => a + b, 0) / s.length;
  return { n: s.length, p50: pick(50), p90: pick(90), p99: pick(99), max: s[s.length - 1], mean };
}

// since returns the microseconds since a process.hrtime.bigint() reading.
export const since = (start) => Number(process.hrtime.bigint() - start) / 1000;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// report prints one phase on a line for the log.
export function report(peer, name, p) {
  const lat = p.p50 === undefined ? '' : ` p50=${p.p50.toFixed(0)}us p99=${p.p99.toFixed(0)}us n=${p.n}`;
  const cmds = p.cmdsPerReq === undefined ? '' : ` redis/req=${p.cmdsPerReq.toFixed(2)} (${p.breakdown ?? ''})`;
  console.log(`[${peer}] ${name.padEnd(36)}${lat}${cmds}`);
}

// writeResults writes the phases to RESULTS_DIR/<file> (bench/compare reads them there), or to
// results/ beside the peers.
export function writeResults(file, results) {
  const dir = process.env.RESULTS_DIR ?? new URL('../results/', import.meta.url).pathname;
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, file), JSON.stringify({ ...results, date: new Date().toISOString() }, null, 2));
}
