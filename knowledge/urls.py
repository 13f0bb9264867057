from django.urls import path

from knowledge import review_views, views

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
    path("review/", review_views.review_queue, name="review"),
    path("review/<int:pk>/labels", review_views.label_item, name="review-labels"),
    path("review/<int:pk>/leave", review_views.leave_item, name="review-leave"),
    path("passages/<int:pk>/labels", views.label_passage, name="label-passage"),
]
