"""Is brain able to work? The database (with pgvector), the broker and the worker, checked live."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from brain.models import WorkerHeartbeat

BROKER_TIMEOUT = 2.0  # seconds; a health check must answer quickly even when a part is down
WORKER_STALE_AFTER = timedelta(minutes=3)


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: dict

    def as_json(self) -> dict:
        return {"status": "ok" if self.ok else "down", **self.detail}


def check_database() -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('server_version')")
            server_version = cursor.fetchone()[0]
            cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            row = cursor.fetchone()
    except Exception as error:
        return Check(False, {"error": _one_line(error)})
    if row is None:
        return Check(
            False,
            {
                "postgresql": server_version,
                "error": "the pgvector extension is not installed: run migrate",
            },
        )
    return Check(True, {"postgresql": server_version, "pgvector": row[0]})


def check_broker() -> Check:
    from brain.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=BROKER_TIMEOUT)
            conn.default_channel.client.ping()
    except Exception as error:
        return Check(False, {"url": _redacted(app.conf.broker_url), "error": _one_line(error)})
    return Check(True, {"url": _redacted(app.conf.broker_url)})


def worker_status() -> dict:
    """Informational only: a worker may legitimately be absent (a web-only deployment)."""
    latest = WorkerHeartbeat.objects.order_by("-seen_at").first()
    if latest is None:
        return {"status": "unknown", "last_seen": None}
    fresh = timezone.now() - latest.seen_at < WORKER_STALE_AFTER
    return {
        "status": "ok" if fresh else "stale",
        "last_seen": latest.seen_at.isoformat(),
        "hostname": latest.hostname,
    }


def record_heartbeat(*, hostname: str) -> None:
    WorkerHeartbeat.objects.update_or_create(
        hostname=hostname, defaults={"seen_at": timezone.now()}
    )


def _one_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".strip().rstrip(":")


def _redacted(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"
    return url
