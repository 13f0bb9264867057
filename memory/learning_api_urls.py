from django.urls import path

from memory import learning_api

app_name = "learning-api"

urlpatterns = [
    path("ask", learning_api.ask_or_teach, name="ask"),
    path("study/", learning_api.start_study, name="study"),
    path("study/<int:pk>", learning_api.study_session, name="study-session"),
]
