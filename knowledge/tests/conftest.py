import pytest

from knowledge.models import Subject


@pytest.fixture
def office_lamp(home) -> Subject:
    office = Subject.objects.create(
        memory=home, kind="room", name="Office", aliases=["the upstairs back bedroom"]
    )
    return Subject.objects.create(
        memory=home,
        kind="device",
        name="Office lamp",
        entity_id="light.office_lamp",
        room=office,
        aliases=["the beacon"],
    )
