from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from brain import health


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    database = health.check_database()
    broker = health.check_broker()
    ok = database.ok and broker.ok
    body: dict[str, Any] = {
        "status": "ok" if ok else "down",
        "database": database.as_json(),
        "broker": broker.as_json(),
        "worker": health.worker_status() if database.ok else {"status": "unknown"},
    }
    if not ok:
        body["down"] = [
            name for name, check in (("database", database), ("broker", broker)) if not check.ok
        ]
    return JsonResponse(body, status=200 if ok else 503)
