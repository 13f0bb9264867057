"""The House page at ``/``, mounted by brain/urls.py; its URL name stays ``home``."""

from django.urls import path

from review import views

urlpatterns = [path("", views.house, name="home")]
