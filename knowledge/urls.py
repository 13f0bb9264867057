from django.urls import path

from knowledge import views

app_name = "knowledge"

urlpatterns = [
    path("", views.sources, name="sources"),
    path("<int:pk>/", views.source, name="source"),
    path("<int:pk>/compiling", views.compile_status, name="compile-status"),
    path("<int:pk>/compile", views.compile_source, name="compile-source"),
    path("add", views.add_source, name="add-source"),
    path("pages/", views.page_list, name="pages"),
    path("pages/<int:pk>/", views.page, name="page"),
    path("read-as", views.read_as, name="read-as"),
    path("passages/<int:pk>/labels", views.label_passage, name="label-passage"),
]
