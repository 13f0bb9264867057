from django.urls import path

from knowledge import views

app_name = "knowledge"

urlpatterns = [
    path("", views.sources, name="sources"),
    path("<int:pk>/", views.source, name="source"),
]
