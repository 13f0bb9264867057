"""Settings (``/settings/``), mounted by brain/urls.py: an operator's page for one memory."""

from django.urls import path

from agent import settings_page

app_name = "settings"

urlpatterns = [path("", settings_page.settings_page, name="page")]
