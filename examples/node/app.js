'use strict';
// A minimal HTTP app guarded by the ratelimit extension.
//
// Every GET spends one request of the client's allowance in zone
// 'example_api' (examples/setup.sql): 200 while the zone allows it, 429 once
// it refuses, with the headers rl_headers() computes for the decision either
// way; 503 while the database cannot decide (down, refusing the login, no
// zone), and the app keeps running.
//
//     PGUSER=app node app.js [PORT]
//
// The database connection comes from libpq's environment variables (PGHOST,
// PGPORT, PGDATABASE, PGUSER, PGPASSWORD or ~/.pgpass, PGSSLMODE,
// PGCONNECT_TIMEOUT), which node-postgres reads as psql does.  The app
// listens on HOST (default 127.0.0.1) and on the port given as its argument,
// else PORT, else 8000; RL_ZONE names the zone (default example_api).
const http = require('node:http');
const { Pool } = require('pg');

const zone = process.env.RL_ZONE || 'example_api';
const host = process.env.HOST || '127.0.0.1';
const port = Number(process.argv[2] || process.env.PORT || 8000);

// The limiter: one round trip decides and returns the response headers.
// Each pool.query runs outside a transaction block, so it commits (and takes
// its token) at once.  The pool connects when a query needs a connection: a
// failed connection is no reason to exit, the request gets a 503 and the
// next one tries again.  node-postgres waits forever for an unanswered
// connection unless told otherwise (libpq's PGCONNECT_TIMEOUT, in seconds).
const pool = new Pool({ connectionTimeoutMillis: 1000 * Number(process.env.PGCONNECT_TIMEOUT || 5) });
pool.on('error', (err) => console.error('idle connection lost:', err.message));
const LIMIT = 'SELECT r.allowed, rl_headers(r) AS headers FROM rl_limit($1, $2) r';

function reply(res, status, headers, body) {
  res.writeHead(status, { ...headers, 'Content-Type': 'text/plain; charset=utf-8' });
  res.end(body);
}

const server = http.createServer(async (req, res) => {
  if (req.method !== 'GET') return reply(res, 405, { Allow: 'GET' }, 'GET only\n');
  // The key is the TCP peer's address, which the client cannot choose.
  // X-Forwarded-For is not read: a header is only the client's word (anyone
  // can send a new value with each request and get a fresh allowance),
  // unless a proxy you trust sets it.  Behind such a proxy, key by the entry
  // it appends: rl_client_address() reads it.
  const key = 'ip:' + req.socket.remoteAddress;
  let row;
  try {
    ({ rows: [row] } = await pool.query(LIMIT, [zone, key]));
  } catch (err) {
    console.error('rate limiter:', err.message);
    return reply(res, 503, {}, 'the rate limiter is unavailable\n');
  }
  // Every header rl_headers returns (RateLimit-*, Retry-After when refused),
  // whatever their names.
  if (row.allowed) reply(res, 200, row.headers, 'hello\n');
  else reply(res, 429, row.headers, 'too many requests\n');
});

server.listen(port, host, () => {
  console.log(`listening on http://${host}:${port}/ (zone ${zone})`);
  // Say at once when the database is out of reach, rather than at the first
  // request.
  pool.query('SELECT 1').catch((err) => console.error('database unavailable, answering 503 until it is:', err.message));
});
