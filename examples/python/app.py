#!/usr/bin/env python3
"""A minimal HTTP app guarded by the ratelimit extension.

Every GET spends one request of the client's allowance in zone
'example_api' (examples/setup.sql): 200 while the zone allows it, 429 once
it refuses, with the headers rl_headers() computes for the decision either
way; 503 while the database cannot decide (down, refusing the login, no
zone), and the app keeps running.

    PGUSER=app python3 app.py [PORT]

The database connection comes from libpq's environment (PGHOST, PGPORT,
PGDATABASE, PGUSER, PGPASSWORD or ~/.pgpass, PGSSLMODE, PGCONNECT_TIMEOUT,
...), as for psql.  The app listens on HOST (default 127.0.0.1) and on the
port given as its argument, else PORT, else 8000; RL_ZONE names the zone
(default example_api).
"""
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg

ZONE = os.environ.get("RL_ZONE", "example_api")
HOST = os.environ.get("HOST", "127.0.0.1")
PORT = int(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("PORT", "8000"))

# The limiter: one round trip decides and returns the response headers.
# One connection in autocommit (each call commits, so takes its token, at
# once), shared by the server's threads in turn.  A failed connection is
# no reason to exit: while the database is down or refuses the login, each
# request tries to connect, gets a 503, and the app recovers once it can
# connect.  A request that finds the connection broken (server restarted)
# gets a 503; the next one connects again.
LIMIT = "SELECT r.allowed, rl_headers(r) FROM rl_limit(%s, %s) r"
# libpq waits forever for an unanswered connection unless told otherwise.
CONNECT_TIMEOUT = os.environ.get("PGCONNECT_TIMEOUT", "5")
lock = threading.Lock()
conn = None


def connection():
    """The shared connection, (re)opened when it is missing or broken."""
    global conn
    if conn is None or conn.broken or conn.closed:
        conn = None
        conn = psycopg.connect(autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    return conn


def limit(key):
    """(allowed, headers) for one request of key."""
    with lock:
        return connection().execute(LIMIT, (ZONE, key)).fetchone()


def one_line(error):
    """libpq's message (which can span lines) on one log line."""
    return " ".join(str(error).split())


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
            self.log_error("rate limiter: %s", one_line(e))
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
    try:
        with lock:
            connection()
    except psycopg.Error as e:
        print(f"database unavailable, answering 503 until it is: {one_line(e)}",
              file=sys.stderr, flush=True)
    server.serve_forever()
