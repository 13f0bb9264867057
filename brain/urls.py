from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

import brain.celery  # noqa: F401  the app the tasks a request sends bind to (brain/apps.py)
from brain import views
from brain.apps import discover_admin

discover_admin()

# What an error no view caught is answered with: never a traceback, a 503 while the database
# or the broker is away (brain/views.py).
handler500 = "brain.views.server_error"


@login_not_required
def favicon(request: HttpRequest) -> HttpResponse:
    """What a browser asks for on a page that names no icon (JSON, the API's pages)."""
    return redirect(static("img/brain.svg"))


urlpatterns = [
    path("healthz", views.healthz, name="healthz"),
    path("favicon.ico", favicon, name="favicon"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("", include("surfaces.urls")),
    path("api/", include("surfaces.api_urls")),
    path("api/worker/", include("surfaces.worker_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
]
