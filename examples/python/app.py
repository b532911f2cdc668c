#!/usr/bin/env python3
"""A minimal HTTP app guarded by the ratelimit extension.

Every GET spends one request of the client's allowance in zone 'api'
(examples/setup.sql): 200 while the zone allows it, 429 once it refuses,
with the headers rl_headers() computes for the decision either way.

    PGDATABASE=mydb PGUSER=app python3 app.py [PORT]

The database connection comes from libpq's environment (PGHOST, PGPORT,
PGDATABASE, PGUSER, PGPASSWORD, PGSSLMODE, ...), as for psql.  The app
listens on HOST (default 127.0.0.1) and on the port given as its argument,
else PORT, else 8000; RL_ZONE names the zone (default api).
"""
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg

ZONE = os.environ.get("RL_ZONE", "api")
HOST = os.environ.get("HOST", "127.0.0.1")
PORT = int(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PORT", "8000"))

# The limiter: one round trip decides and returns the response headers.
# One connection in autocommit (each call commits, so takes its token, at
# once), shared by the server's threads in turn.  A request that finds it
# broken (server restarted) gets a 503; the next one connects again.
LIMIT = "SELECT r.allowed, rl_headers(r) FROM rl_limit(%s, %s) r"
lock = threading.Lock()
conn = psycopg.connect(autocommit=True)  # fail at start, not at the first request


def limit(key):
    """(allowed, headers) for one request of key."""
    global conn
    with lock:
        if conn.broken:
            conn = psycopg.connect(autocommit=True)
        return conn.execute(LIMIT, (ZONE, key)).fetchone()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        # The key is the TCP peer's address, which the client cannot choose.
        # X-Forwarded-For is not read: a header is only the client's word
        # (anyone can send a new value with each request and get a fresh
        # allowance), unless a proxy you trust sets it.  Behind such a
        # proxy, key by the entry it appends: rl_client_address() reads it.
        key = "ip:" + self.client_address[0]
        try:
            allowed, headers = limit(key)
        except psycopg.Error as e:
            self.log_error("rate limiter: %s", e)
            return self.reply(503, {}, b"the rate limiter is unavailable\n")
        # Every header rl_headers returns (RateLimit-*, Retry-After when
        # refused), whatever their names.
        if allowed:
            self.reply(200, headers, b"hello\n")
        else:
            self.reply(429, headers, b"too many requests\n")

    def reply(self, status, headers, body):
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, str(value))
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    server = ThreadingHTTPServer((HOST, PORT), Handler)
    print(f"listening on http://{HOST}:{PORT}/ (zone {ZONE})", flush=True)
    server.serve_forever()
