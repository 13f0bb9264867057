"""``/pages/``, mounted by brain/urls.py: where a person types the Pages tab's name; the pages
themselves live under /sources/pages/ (``knowledge:pages``)."""

from django.urls import path

from knowledge import views

urlpatterns = [
    path("", views.pages_elsewhere, name="pages-elsewhere"),
    path("<int:pk>/", views.page_elsewhere, name="page-elsewhere"),
]
