from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import resolve_url
from django.utils.http import urlencode
from django_htmx.http import HttpResponseClientRedirect


class HtmxLoginRedirectMiddleware:
    """An htmx request whose session has expired sends the whole page to the login form.

    Without this, htmx would follow the redirect and swap the login page into a fragment.
    After signing in, the person lands back on the page they were using.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not getattr(request, "htmx", False) or response.status_code != 302:
            return response
        login_path = resolve_url(settings.LOGIN_URL)
        if urlsplit(response.get("Location", "")).path != login_path:
            return response
        current = request.htmx.current_url_abs_path or "/"
        return HttpResponseClientRedirect(f"{login_path}?{urlencode({'next': current})}")
