"""gunicorn's settings for brain's web process: `make run` with DJANGO_DEBUG=0 and the systemd
unit in docs/DEPLOY.md both start ``gunicorn --config python:brain.gunicorn_conf``.

- Worker processes: BRAIN_WEB_WORKERS, by default one per core plus one, at most 8. A request
  is mostly Python on the CPU (Django, the gate, an embedding), and the GIL lets one thread of a
  process run Python at a time: one process a core keeps every core busy, the extra one covers
  a core whose process is waiting. More only compete for the cores: in `make bench`'s load test
  on two cores, 3 processes answered 11 writes/s where 5 answered 9, at lower latency. Each
  process holds Django and the embedding models (~320 MB after that test with the float model
  alone; the 8-bit one for questions adds about 40 MB), hence the cap.
- Threads: BRAIN_WEB_THREADS (4) per process, gthread workers. Threads overlap the waits on
  PostgreSQL, keep browsers' connections alive, and a slow client never holds a whole process,
  which matters because `make run` serves without a buffering proxy in front. Each thread keeps
  its own database connection (CONN_MAX_AGE): workers × threads (12 on two cores) stays well
  under PostgreSQL's 100.
- worker_connections 2 × threads: a process takes no more connections than it can start on
  soon; the rest wait in the kernel's queue for whichever process frees up first. With
  gunicorn's default (1000) one busy process hoarded connections while others served theirs,
  and a few requests waited 17 s behind its queue.
- timeout 60 s: a process whose main loop is silent that long is stuck, and replaced. Above the
  30 s statement timeout, so a slow query ends with its own error, not a killed process.
- graceful_timeout 10 s: on stop, requests in flight get this long to finish.
- keepalive 5 s: a browser's next request usually follows within that.
- backlog 2048 (gunicorn's default, stated here because it matters): connections beyond the
  busy threads wait in the kernel's queue instead of being reset.
- Each process tells the apps it is starting to serve (``post_worker_init``, the signal
  ``brain.serving.serving_started``): the knowledge app loads the embedding models then, on a
  thread, or a process's first question would wait about a second for them, and a session hook
  gives up after two (``agent/hooks.py``).
"""

from __future__ import annotations

import os

from brain.env import env_int, env_str

wsgi_app = "brain.wsgi:application"
bind = env_str("BRAIN_BIND", "127.0.0.1:8000")
workers = env_int("BRAIN_WEB_WORKERS", min((os.cpu_count() or 1) + 1, 8), minimum=1)
worker_class = "gthread"
threads = env_int("BRAIN_WEB_THREADS", 4, minimum=1, maximum=64)
worker_connections = 2 * threads
timeout = 60
graceful_timeout = 10
keepalive = 5
backlog = 2048
accesslog = "-"
errorlog = "-"
access_log_format = '%(h)s "%(r)s" %(s)s %(b)s %(M)sms'
# No `gunicornc` control socket: brain does not use it, and its default path in $HOME would be
# shared by every gunicorn of this user (two `make run` checkouts, a benchmark).
control_socket_disable = True


def post_worker_init(worker) -> None:
    """gunicorn calls it in each worker process once the app is loaded: apps start what a
    process should have ready before its first request (``brain.serving``)."""
    from brain.serving import serving_started

    serving_started.send(sender=None)
