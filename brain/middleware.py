from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render, resolve_url
from django.utils.http import urlencode
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from brain import htmx, workers
from brain.db import retry


class HtmxLoginRedirectMiddleware:
    """An htmx request whose session has expired sends the whole page to the login form.

    Without this, htmx would follow the redirect and swap the login page into a fragment.
    After signing in, the person lands back on the page they were using.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        htmx: HtmxDetails | None = getattr(request, "htmx", None)  # set by django-htmx's middleware
        if not htmx or response.status_code != 302:
            return response
        login_path = resolve_url(settings.LOGIN_URL)
        if urlsplit(response.get("Location", "")).path != login_path:
            return response
        current = htmx.current_url_abs_path or "/"
        return HttpResponseClientRedirect(f"{login_path}?{urlencode({'next': current})}")


class NotPermittedToastMiddleware:
    """A refusal (``PermissionDenied``, e.g. ``knowledge.access.NotPermitted``) answered to an
    htmx request is a 403 that raises a toast with its message; htmx swaps nothing on a 403,
    so without the toast the button would seem to do nothing. Full pages get ``403.html``."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, PermissionDenied) or not getattr(request, "htmx", False):
            return None
        response = HttpResponse(str(exception), status=403, content_type="text/plain")
        return htmx.raise_toast(response, htmx.Toast(str(exception), "error"))


class BusyWriteMiddleware:
    """A write that lost its lock race on every attempt (``brain.db.retry``) is a 503 saying
    "busy, nothing saved, send it again", never a 500 — the pages' side of the API's 503
    (``brain.api_errors``), for every view at once. htmx swaps nothing on a 503,
    so the answer raises a toast; a full page gets ``503.html``. Either way ``Retry-After``."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not retry.is_retryable(exception):
            return None
        if getattr(request, "htmx", False):
            response = HttpResponse(retry.BUSY_MESSAGE, status=503, content_type="text/plain")
            response = htmx.raise_toast(response, htmx.Toast(retry.BUSY_MESSAGE, "warning"))
        else:
            response = render(request, "503.html", {"message": retry.BUSY_MESSAGE}, status=503)
        response["Retry-After"] = str(retry.BUSY_RETRY_AFTER_S)
        return response


WORKER_PATH_PREFIX = "/api/worker/"
WORKER_ONLY_MESSAGE = "A worker token may only take and answer model calls."


class WorkerTokenOnlyMiddleware:
    """A worker token opens ``/api/worker/`` and nothing else: any other address — pages, every
    other API endpoint, the export, the admin, the schema — answers 403 with one sentence when
    the request carries one, before sessions, sign-in or any view runs. A worker's machine holds
    its token in plain sight, so the token must be worth nothing beyond taking and answering its
    memory's model calls. Recognised by its ``bw_`` prefix in ``Authorization`` under any scheme
    (``Bearer``, ``Token``), known or not: a forged one is refused the same way."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if _carries_worker_token(request) and not request.path.startswith(WORKER_PATH_PREFIX):
            return JsonResponse({"detail": WORKER_ONLY_MESSAGE}, status=403)
        return self.get_response(request)


def _carries_worker_token(request: HttpRequest) -> bool:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    return any(part.startswith(workers.KEY_PREFIX) for part in header.split())
