from django.urls import path

from agent import views

app_name = "agent"

urlpatterns = [
    path("core", views.save_core, name="core"),
]
