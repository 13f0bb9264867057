from django.urls import path

from memory import learning_api

app_name = "learning-api"

urlpatterns = [
    path("study/", learning_api.start_study, name="study"),
    path("study/<int:pk>", learning_api.study_session, name="study-session"),
]
