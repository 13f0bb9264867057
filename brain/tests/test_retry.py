"""A unit of work that loses a lock race (deadlock, serialisation failure) runs again."""

import threading

import pytest
from django.contrib.auth.models import User
from django.db import IntegrityError, OperationalError, connection, transaction

from brain.db import retry

MESSAGES = {
    retry.DEADLOCK_DETECTED: "deadlock detected",
    retry.SERIALIZATION_FAILURE: "could not serialize access due to concurrent update",
}


def _lose_a_race(sqlstate: str = retry.DEADLOCK_DETECTED) -> None:
    """Make the server end this transaction with ``sqlstate``, as it does to a race's loser."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"DO $$ BEGIN RAISE EXCEPTION '{MESSAGES[sqlstate]}' USING ERRCODE = '{sqlstate}'; "
            "END $$"
        )


@pytest.fixture
def pauses(monkeypatch) -> list[float]:
    taken: list[float] = []
    monkeypatch.setattr(retry.time, "sleep", taken.append)
    return taken


@pytest.mark.django_db(transaction=True)
def test_two_units_that_deadlock_on_each_others_rows_both_commit():
    first = User.objects.create(username="first")
    second = User.objects.create(username="second")
    both_hold_one, attempts, errors = threading.Barrier(2, timeout=10), [], []

    @retry.retry_transaction
    def rename(lock_first: User, then: User, name: str) -> None:
        attempts.append(name)
        with transaction.atomic():
            User.objects.select_for_update().get(pk=lock_first.pk)
            if attempts.count(name) == 1:
                both_hold_one.wait()
            User.objects.filter(pk=then.pk).update(first_name=name)

    def writer(*args) -> None:
        try:
            rename(*args)
        except Exception as error:  # the test reports it below
            errors.append(error)
        finally:
            connection.close()

    threads = [
        threading.Thread(target=writer, args=(first, second, "a")),
        threading.Thread(target=writer, args=(second, first, "b")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert errors == []
    assert len(attempts) == 3  # the deadlock's loser ran once more
    assert sorted(User.objects.values_list("first_name", flat=True)) == ["a", "b"]


@pytest.mark.parametrize("sqlstate", [retry.DEADLOCK_DETECTED, retry.SERIALIZATION_FAILURE])
@pytest.mark.django_db(transaction=True)
def test_a_unit_that_loses_a_race_once_runs_again_and_writes_once(sqlstate, pauses):
    attempts = []

    @retry.retry_transaction
    def sign_up() -> User:
        attempts.append(1)
        with transaction.atomic():
            user = User.objects.create(username="once")
            if len(attempts) == 1:
                _lose_a_race(sqlstate)
            return user

    user = sign_up()

    assert len(attempts) == 2
    assert list(User.objects.values_list("pk", flat=True)) == [user.pk]
    assert len(pauses) == 1


@pytest.mark.django_db(transaction=True)
def test_after_every_attempt_lost_the_last_error_is_raised_and_nothing_is_written(pauses):
    attempts = []

    @retry.retry_transaction
    def sign_up() -> None:
        attempts.append(1)
        with transaction.atomic():
            User.objects.create(username="never")
            _lose_a_race()

    with pytest.raises(OperationalError, match="deadlock detected") as raised:
        sign_up()

    assert retry.is_retryable(raised.value)
    assert len(attempts) == retry.ATTEMPTS
    assert not User.objects.exists()
    assert len(pauses) == retry.ATTEMPTS - 1
    assert all(0 <= pause <= retry.MAX_PAUSE_S for pause in pauses)


@pytest.mark.django_db
def test_inside_an_outer_atomic_block_the_error_is_raised_at_once(pauses):
    attempts = []

    @retry.retry_transaction
    def sign_up() -> None:
        attempts.append(1)
        with transaction.atomic():
            _lose_a_race()

    with transaction.atomic(), pytest.raises(OperationalError):
        sign_up()

    assert len(attempts) == 1
    assert pauses == []


@pytest.mark.django_db(transaction=True)
def test_other_database_errors_are_raised_at_once(pauses):
    User.objects.create(username="taken")
    attempts = []

    @retry.retry_transaction
    def sign_up() -> None:
        attempts.append(1)
        with transaction.atomic():
            User.objects.create(username="taken")

    with pytest.raises(IntegrityError) as raised:
        sign_up()

    assert not retry.is_retryable(raised.value)
    assert len(attempts) == 1
    assert pauses == []


def test_pauses_grow_to_a_bound_and_are_jittered():
    for attempt in range(2, 12):
        ceiling = min(retry.MAX_PAUSE_S, retry.FIRST_PAUSE_S * 2 ** (attempt - 2))
        assert all(0 <= retry.pause_before(attempt) <= ceiling for _ in range(50))
    assert len({retry.pause_before(5) for _ in range(20)}) > 1
