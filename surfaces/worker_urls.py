"""/api/worker/: the worker protocol's addresses (``brain.worker_urls``).

A worker's answer is checked against the pydantic model its call asked for, looked up among the
modules the process taking the answer has loaded (``brain.workers``): these are the modules
whose model calls ask for one, so every answer is checked as the gateway will check it
(``brain/tests/test_import_graph.py`` fails when a module that names an answer class is missing).
"""

from agent import distiller
from brain import worker_urls
from knowledge import gate, labeller
from memory import ask, compiling, reflection, study
from memory.composers import claude
from review import deep_review, insight

ASKING_FOR_A_SHAPE = (
    distiller,
    gate,
    labeller,
    ask,
    compiling,
    reflection,
    study,
    claude,
    deep_review,
    insight,
)

urlpatterns = worker_urls.urlpatterns
