"""The worker program: serves a memory's model calls on a model only this machine can reach.

``python -m brain.worker --server URL --token T --model NAME`` (or ``brain worker …``) long-polls
the brain server for a call, runs it on a local model (Ollama's API or any OpenAI-compatible
one) and posts the answer back. The worker always opens the connection: the machine it runs on
needs no open port. It sees only what a call carries — a system prompt, a prompt, a schema, the
texts to embed — never the memory.

Rules of this package: the standard library only, and no import of Django, of any app or of
brain.settings, so it runs on a machine with nothing but Python 3.10+ and this folder
(requirements-worker.txt lists what it needs: nothing). Nothing newer than Python 3.10 either
(``__main__.MIN_PYTHON``). brain/tests/test_worker_program.py
imports it in an isolated interpreter to hold it to that.

Modules: ``transport`` (JSON over HTTP, one place for urllib), ``server`` (the wire protocol of
/api/worker/), ``local`` (the local model's two API shapes), ``runner`` (the loop: leases,
heartbeats, backoff, signals) and ``__main__`` (the command line).
"""
