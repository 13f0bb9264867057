"""Not collected on its own (the name is not test_*): brain/tests/test_interrupted_runs.py runs
this file in a pytest of its own, stops that run in the middle of the transactional test below,
and runs it again on the same reused test database.

The test commits a person named sarah, as the suite's transactional tests commit rows; when
BRAIN_HANG_AFTER_COMMIT names a file, it writes that file once the row is committed and waits
there to be stopped, before the flush that would have removed the row."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model


@pytest.mark.django_db(transaction=True)
def test_a_person_is_committed_as_transactional_tests_commit_rows():
    get_user_model().objects.create_user(username="sarah", password="not used")
    committed = os.environ.get("BRAIN_HANG_AFTER_COMMIT")
    if committed:
        Path(committed).write_text("committed")
        time.sleep(600)
