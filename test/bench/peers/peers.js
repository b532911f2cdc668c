'use strict';
// ratelimit beside what Node.js users pick today to rate-limit on
// PostgreSQL, in one Node process against one server (the PG* environment
// variables; test/bench/peers/peers.sh starts it):
//   select1      SELECT 1, the floor a round trip sets
//   rlf          rate-limiter-flexible's RateLimiterPostgres (its README's
//                way: storeClient a pg Pool, consume(key))
//   erl          express-rate-limit's PostgreSQL store,
//                @acpr/rate-limit-postgresql's PostgresStore (aggregated),
//                whose increment(key) is what the middleware calls per request
//   rl_table     SELECT (rl_limit('peers_table', $1)).allowed
//   rl_durable   the same on zone 'peers_durable' (durable => true: a logged
//                table, as both peers' tables are)
//   rl_shmem     the same on zone 'peers_shmem' (the shmem store)
//
//   node peers.js check
//       Correctness: on one fresh key per limiter, 16 workers make 5 calls
//       each (80) against a limit of 20 per hour: each limiter must admit
//       exactly 20.  Prints TAP lines.
//   node peers.js bench CLIENTS SECONDS ROUNDS
//       Decisions per second: for each client count of CLIENTS (e.g.
//       "1,4,16"), a pg Pool of that many connections and as many workers;
//       limits out of reach, so every call writes; random keys of 10,000,
//       and one hot key; the variants interleaved in slices of SECONDS,
//       ROUNDS rounds, the order turned round every other round.  Prints one
//       JSON line per slice, then a Markdown table of medians; with
//       PEERS_PLOT_DAT set, also writes the medians of the random-key runs
//       there, one line per client count (gnuplot's input).
const { Pool } = require('pg');
const { RateLimiterPostgres } = require('rate-limiter-flexible');
const { PostgresStore } = require('@acpr/rate-limit-postgresql');

const KEYS = 10000;
const VARIANTS = ['select1', 'rlf', 'erl', 'rl_table', 'rl_durable', 'rl_shmem'];

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// The limiters of one run: decide(key) resolves to true (admitted) or false.
async function makeLimiters(connections, points, windowSeconds, tag) {
  const pool = new Pool({ max: connections });
  const rlf = new RateLimiterPostgres({
    storeClient: pool,
    tableName: `peers_rlf_${tag}`,
    keyPrefix: tag,
    points,
    duration: windowSeconds,
    clearExpiredByTimeout: false,
  });
  // The table is created by the constructor's own promise: wait for it.
  for (let i = 0; i < 100 && !rlf.tableCreated; i++) await sleep(50);
  if (!rlf.tableCreated) throw new Error('rate-limiter-flexible did not create its table');

  const erl = new PostgresStore({ max: connections }, `peers_${tag}`);
  erl.init({ windowMs: windowSeconds * 1000 });
  // Its migrations run from the constructor, unawaited: wait for its function.
  for (let i = 0; i < 200; i++) {
    const r = await pool.query("SELECT to_regproc('rate_limit.agg_increment') IS NOT NULL AS ready");
    if (r.rows[0].ready) break;
    await sleep(50);
  }

  const zoneCall = (zone) => ({
    name: `rl_${zone}`,
    text: `SELECT (rl_limit('${zone}', $1)).allowed AS allowed`,
  });
  const table = zoneCall('peers_table');
  const durable = zoneCall('peers_durable');
  const shmem = zoneCall('peers_shmem');
  return {
    decide: {
      select1: async () => (await pool.query({ name: 'select1', text: 'SELECT 1' })).rowCount === 1,
      rlf: (key) => rlf.consume(key).then(
        () => true,
        (refusal) => {
          if (refusal instanceof Error) throw refusal;
          return false;
        }),
      erl: async (key) => (await erl.increment(key)).totalHits <= points,
      rl_table: async (key) => (await pool.query({ ...table, values: [key] })).rows[0].allowed,
      rl_durable: async (key) => (await pool.query({ ...durable, values: [key] })).rows[0].allowed,
      rl_shmem: async (key) => (await pool.query({ ...shmem, values: [key] })).rows[0].allowed,
    },
    close: async () => {
      await pool.end();
      await erl.pool.end();
    },
  };
}

async function check() {
  const limit = 20;
  const workers = 16;
  const calls = 5;
  const limiters = await makeLimiters(workers, limit, 3600, 'check');
  let n = 0;
  let failed = 0;
  for (const name of VARIANTS.filter((v) => v !== 'select1')) {
    const key = `check:${name}:${process.pid}:${Date.now()}`;
    let admitted = 0;
    await Promise.all(Array.from({ length: workers }, async () => {
      for (let i = 0; i < calls; i++) if (await limiters.decide[name](key)) admitted++;
    }));
    n++;
    const ok = admitted === limit;
    if (!ok) failed++;
    console.log(`${ok ? 'ok' : 'not ok'} ${n} - ${name}: ${workers} workers x ${calls} calls on one key, ` +
      `limit ${limit}: admitted exactly ${limit}${ok ? '' : ` (admitted ${admitted})`}`);
  }
  console.log(`1..${n}`);
  await limiters.close();
  return failed === 0;
}

async function slice(decide, workers, seconds, hot) {
  const end = Date.now() + seconds * 1000;
  let decisions = 0;
  let refused = 0;
  await Promise.all(Array.from({ length: workers }, async () => {
    while (Date.now() < end) {
      const key = hot ? 'hot' : `k${1 + Math.floor(Math.random() * KEYS)}`;
      if (!(await decide(key))) refused++;
      decisions++;
    }
  }));
  return { rate: decisions / seconds, refused };
}

function median(values) {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function bench(clientCounts, seconds, rounds) {
  const rates = {};
  const cases = [];
  for (const clients of clientCounts) cases.push({ clients, hot: false });
  cases.push({ clients: Math.max(...clientCounts), hot: true });
  for (const c of cases) {
    const label = `${c.clients}${c.hot ? ', one hot key' : ''}`;
    const limiters = await makeLimiters(c.clients, 1e9, 3600, `bench${c.clients}${c.hot ? 'hot' : ''}`);
    for (const v of VARIANTS) await limiters.decide[v]('warm');
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 ? [...VARIANTS].reverse() : VARIANTS;
      for (const v of order) {
        const { rate, refused } = await slice(limiters.decide[v], c.clients, seconds, c.hot);
        if (refused > 0) throw new Error(`${v} refused ${refused} calls with a limit out of reach`);
        (rates[label] ??= {})[v] ??= [];
        rates[label][v].push(rate);
        console.log(JSON.stringify({ clients: c.clients, hot: c.hot, round, variant: v, rate }));
      }
    }
    await limiters.close();
  }
  console.log('');
  const ratios = ['rl_table', 'rl_durable', 'rl_shmem'];
  console.log('| clients | ' + VARIANTS.join(' | ') + ' | ' + ratios.map((v) => `${v} / rlf`).join(' | ') + ' |');
  console.log('| --- |' + ' ---: |'.repeat(VARIANTS.length + ratios.length));
  const plot = [`# ${process.env.PEERS_PLOT_NOTE || ''}`, 'clients\t' + VARIANTS.join('\t')];
  for (const [label, byVariant] of Object.entries(rates)) {
    const m = Object.fromEntries(VARIANTS.map((v) => [v, median(byVariant[v])]));
    console.log(`| ${label} | ` + VARIANTS.map((v) => Math.round(m[v])).join(' | ') + ' | ' +
      ratios.map((v) => `${(m[v] / m.rlf).toFixed(2)}×`).join(' | ') + ' |');
    if (!label.includes('hot')) plot.push(label + '\t' + VARIANTS.map((v) => Math.round(m[v])).join('\t'));
  }
  if (process.env.PEERS_PLOT_DAT) require('fs').writeFileSync(process.env.PEERS_PLOT_DAT, plot.join('\n') + '\n');
}

async function main() {
  const [mode, clients = '1,4,16', seconds = '1', rounds = '5'] = process.argv.slice(2);
  if (mode === 'check') return (await check()) ? 0 : 1;
  if (mode === 'bench') {
    await bench(clients.split(',').map(Number), Number(seconds), Number(rounds));
    return 0;
  }
  console.error('usage: node peers.js check | bench CLIENTS SECONDS ROUNDS');
  return 2;
}

main().then((code) => process.exit(code), (err) => {
  console.error(err);
  process.exit(1);
});
