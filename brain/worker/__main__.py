"""``python -m brain.worker --server URL --token T --model NAME`` (``brain worker …``).

The token may come from ``BRAIN_WORKER_TOKEN`` instead of ``--token``, so it is not in the
process list for every user of the machine to read.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from urllib.parse import urlsplit

from brain.worker import local
from brain.worker.runner import DEFAULT_WAIT_S, Worker
from brain.worker.server import MAX_WAIT_S, BrainServer

# The oldest Python the worker runs on (brain itself needs 3.12): Debian 12 and Ubuntu 22.04
# ship 3.11 and 3.10, and a worker's machine is often one nobody wants to upgrade for it.
# brain/tests/test_worker_program.py parses the package as 3.10 and runs it on one when found.
MIN_PYTHON = (3, 10)


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="brain worker",
        description=(
            "Serve a memory's model calls on a local model: ask the brain server for calls, run "
            "them on the model at --endpoint, post the answers back. The connection is always "
            "opened from here; this machine needs no open port."
        ),
    )
    parse.add_argument(
        "--server", required=True, help="the brain server, e.g. https://brain.example.org"
    )
    parse.add_argument(
        "--token",
        default=os.environ.get("BRAIN_WORKER_TOKEN"),
        help="the worker token (bw_…); default: $BRAIN_WORKER_TOKEN",
    )
    parse.add_argument("--model", required=True, help="the local model's name, e.g. llama3.2")
    parse.add_argument(
        "--endpoint",
        default=local.DEFAULT_ENDPOINT,
        help=f"where the local model answers (default: {local.DEFAULT_ENDPOINT}, Ollama's)",
    )
    parse.add_argument(
        "--api",
        choices=sorted(local.APIS),
        help="the local model's API; default: found by asking the endpoint",
    )
    parse.add_argument(
        "--name",
        default=socket.gethostname(),
        help="how this worker is named on the server's worker page (default: the host name)",
    )
    parse.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT_S,
        help=f"seconds one request for a call waits on the server (0-{MAX_WAIT_S})",
    )
    return parse


def cleartext_warning(server: str) -> str | None:
    """A warning when ``server`` is plain http beyond this machine: the token (and every
    call's text) would cross the network readable by anyone on the way."""
    parts = urlsplit(server)
    host = (parts.hostname or "").lower()
    if parts.scheme != "http" or host in ("localhost", "::1") or host.startswith("127."):
        return None
    return (
        f"{server} is plain http: the worker token and every call's text cross the network "
        "unencrypted. Use the server's https:// address."
    )


def main(argv: list[str] | None = None) -> int:
    if sys.version_info < MIN_PYTHON:
        print(
            f"brain worker needs Python {'.'.join(map(str, MIN_PYTHON))} or newer; this is "
            f"{sys.version.split()[0]} ({sys.executable}).",
            file=sys.stderr,
        )
        return 2
    args = parser().parse_args(argv)
    if not args.token:
        parser().error("a worker token is needed: --token T or BRAIN_WORKER_TOKEN")
    if not args.server.startswith(("http://", "https://")):
        parser().error(f"--server must be an http:// or https:// address, not {args.server!r}")
    if not 0 <= args.wait <= MAX_WAIT_S:
        parser().error(f"--wait must be between 0 and {MAX_WAIT_S} seconds")
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s brain worker: %(message)s"
    )
    if warning := cleartext_warning(args.server):
        logging.getLogger("brain.worker").warning("%s", warning)
    worker = Worker(
        server=BrainServer(args.server, args.token),
        connect_model=lambda: local.connect(endpoint=args.endpoint, model=args.model, api=args.api),
        name=args.name,
        model=args.model,
        wait=args.wait,
    )
    return worker.run()


if __name__ == "__main__":
    sys.exit(main())
