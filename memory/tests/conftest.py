import pytest

from memory.tests.composers import ScriptedComposer


@pytest.fixture
def scripted(monkeypatch):
    """Swap the composer a pass uses for one whose answers the test writes."""

    def install(*answers) -> ScriptedComposer:
        composer = ScriptedComposer(list(answers))
        monkeypatch.setattr("memory.consolidator.get_composer", lambda memory=None: composer)
        return composer

    return install
