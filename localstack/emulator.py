#!/usr/bin/env python3
"""Offline AWS emulator for the Likes local stack: moto's server app behind one lock.

    .venv/bin/python localstack/emulator.py [--host 127.0.0.1] [--port 0] [--parent-pid PID]

Prints exactly one line on stdout once the socket listens, then nothing more:

    LIKES_EMULATOR_READY http://127.0.0.1:<port>

Errors go to stderr, tersely; there is no per-request access log. SIGTERM and SIGINT
stop it cleanly, and with --parent-pid it also stops when that process is gone, so a
test run that crashes never leaves an emulator behind.
"""

import argparse
import io
import logging
import os
import signal
import sys
import threading
import time

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import make_server

READY = "LIKES_EMULATOR_READY"
PARENT_POLL_SECONDS = 0.5


class SerializedApp:
    """Runs every request, start to finish, under one global lock.

    Why: stock moto_server serves each request on its own thread, but its DynamoDB
    backend reads the item, parses and evaluates the ConditionExpression, then
    writes, with no lock around those steps. Two conditional writes on one key can
    therefore both pass the condition. Measured with moto 5.2.5: 16 threads racing
    the write path's conditional UpdateItem on one key got two winners (and a lost
    `op_id` bump) in 54 of 300 rounds against stock moto_server, and in 0 of 300
    behind this lock. DynamoDB guarantees exactly one winner, and both the write
    path's idempotency (conditional UpdateItem) and the aggregator's claims
    (TransactWriteItems) depend on it: without the lock their tests prove nothing.
    One lock for the whole app, not one per table, also makes a transaction atomic
    against every other request, as on AWS. It costs about 5% of throughput.

    The request body is read before taking the lock, so a slow or stalled client
    cannot block everyone else; the response body is iterated and closed under it,
    since a WSGI app may still be doing work while its body is consumed.
    """

    def __init__(self, app):
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ, start_response):
        length = environ.get("CONTENT_LENGTH")
        if length and not environ.get("wsgi.input_terminated"):
            environ["wsgi.input"] = io.BytesIO(environ["wsgi.input"].read(int(length)))
        with self._lock:
            body = self._app(environ, start_response)
            try:
                return [b"".join(body)]
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()


class QuietRequestHandler(MotoRequestHandler):
    """moto's handler (it keeps underscored S3 metadata headers), minus the access log."""

    def log_request(self, code="-", size="-"):
        pass


def watch_parent(pid):
    """Send ourselves SIGTERM once `pid` no longer exists (or became a zombie)."""

    def alive():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
        except OSError:
            return True  # no /proc: trust kill(0)

    while alive():
        time.sleep(PARENT_POLL_SECONDS)
    print(f"emulator: parent {pid} is gone, stopping", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGTERM)


def stop(signum, frame):
    # Raised in the main thread, this unwinds serve_forever(); main() closes the socket.
    raise SystemExit(0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--parent-pid", type=int, help="exit when this process is gone")
    args = parser.parse_args(argv)

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="emulator: %(levelname)s %(name)s: %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    app = SerializedApp(DomainDispatcherApplication(create_backend_app))
    server = make_server(args.host, args.port, app, threaded=True, request_handler=QuietRequestHandler)
    host, port = server.server_address[:2]
    # moto builds some URLs (SQS queue URLs, S3 redirects) from MOTO_PORT.
    os.environ["MOTO_PORT"] = str(port)

    if args.parent_pid:
        threading.Thread(target=watch_parent, args=(args.parent_pid,), name="parent-watchdog", daemon=True).start()

    # The socket already listens (make_server binds and activates it), so a client
    # that connects right after reading this line is queued, not refused.
    print(f"{READY} http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    except SystemExit:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
