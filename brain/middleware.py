from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import resolve_url
from django.template.loader import render_to_string
from django.utils.http import urlencode
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from brain import api_errors, htmx, workers


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
    """A write that lost its lock race on every attempt (``brain.db.retry``), or the database or
    the broker not answering, is a 503 — "busy, nothing saved, send it again", "brain is
    restarting" — never a 500: the pages' side of the API's 503 (``brain.api_errors.
    unavailable`` tells them apart), for every view at once. htmx swaps nothing on a 503, so the
    answer raises a toast; a full page gets ``503.html``. Either way ``Retry-After``. What fails
    before a view runs (the session, the sign-in) is answered the same way by the 500 handler
    (``brain.views.server_error``)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        answer = api_errors.unavailable(exception)
        return None if answer is None else unavailable_answer(request, answer)


def unavailable_answer(request: HttpRequest, answer: api_errors.Unavailable) -> HttpResponse:
    """The 503 for ``answer``: JSON for the API, a toast for htmx, else the plain ``503.html``,
    rendered without the request's context (which reads the database that may be away)."""
    if request.path.startswith(API_PATH_PREFIX):
        response: HttpResponse = JsonResponse({"detail": answer.message}, status=503)
    elif request.headers.get("HX-Request") == "true":
        response = HttpResponse(answer.message, status=503, content_type="text/plain")
        response = htmx.raise_toast(response, htmx.Toast(answer.message, "warning"))
    else:
        page = render_to_string("503.html", {"message": answer.message, "heading": answer.heading})
        response = HttpResponse(page, status=503)
    response["Retry-After"] = str(answer.retry_after)
    return response


API_PATH_PREFIX = "/api/"
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
