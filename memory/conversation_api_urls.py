from django.urls import path

from memory import conversation_api

app_name = "conversations-api"

urlpatterns = [
    path("conversations/", conversation_api.new_conversation, name="conversations"),
    path("conversations/<int:pk>/", conversation_api.conversation_detail, name="conversation"),
]
