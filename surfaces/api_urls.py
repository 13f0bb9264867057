"""/api/memory/: the memory app's endpoints, and the export of everything a memory holds."""

from django.urls import path

from memory import api_urls as memory_api_urls
from surfaces import api

app_name = "memory-api"

urlpatterns = [
    *memory_api_urls.urlpatterns,
    path("export", api.export, name="export"),
]
