"""Make sure an administrator account exists, printing a generated password exactly once."""

import os
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the admin account if it is missing (password from BRAIN_ADMIN_PASSWORD)."

    def handle(self, *args, **options) -> None:
        User = get_user_model()
        username = settings.BRAIN_ADMIN_USERNAME
        if User.objects.filter(username=username).exists():
            self.stdout.write(f"Admin account: {username} (already set up)")
            return
        password = os.environ.get("BRAIN_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        if os.environ.get("BRAIN_ADMIN_PASSWORD"):
            self.stdout.write(
                f"Admin account created: {username} (password from BRAIN_ADMIN_PASSWORD)"
            )
        else:
            self.stdout.write(
                self.style.SUCCESS(
                    f"Admin account created: {username} / password: {password}  "
                    "(shown once; change it under Admin)"
                )
            )
