import sys
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, HttpResponseServerError, JsonResponse
from django.template.loader import render_to_string
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from brain import api_errors, health, middleware

SERVER_ERROR = (
    "Something went wrong on brain's side; what happened is in its log. Try again in a moment."
)


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


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: what an error no view caught is answered with, wherever it was raised
    (a view, or a middleware before it: the session, the sign-in). The database or the broker
    away, or a lock race lost, is the 503 every view gives (``brain.middleware``); anything else
    a plain 500 — JSON for the API, ``500.html`` for a page, never a traceback. Rendered
    without the request's context, which reads the database."""
    answer = api_errors.unavailable(sys.exc_info()[1])
    if answer is not None:
        return middleware.unavailable_answer(request, answer)
    if request.path.startswith(middleware.API_PATH_PREFIX):
        return JsonResponse({"detail": SERVER_ERROR}, status=500)
    return HttpResponseServerError(render_to_string("500.html"))
