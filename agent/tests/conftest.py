import pytest

from knowledge.models import Memory


@pytest.fixture
def home(db) -> Memory:
    return Memory.objects.default()
