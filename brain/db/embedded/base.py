"""The PostgreSQL backend, starting the embedded server the first time a connection is needed.

Used only when DATABASE_URL is not set. Any process (runserver, a manage.py command, the
Celery worker, pytest) that touches the database starts the shared server if it is not up.
"""

from django.db.backends.postgresql import base

from brain import embedded


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        embedded.postgres.ensure_running()
        return super().get_new_connection(conn_params)
