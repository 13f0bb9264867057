"""brain's settings: one file, every value read from the environment with a sensible default.

docs/CONFIGURATION.md lists each variable; README.md repeats the ones a newcomer meets.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from brain import embedded
from brain.env import env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = embedded.VAR_DIR

DEBUG = env_bool("DJANGO_DEBUG", True)


def _secret_key() -> str:
    """DJANGO_SECRET_KEY, or one generated once and kept in var/ so sessions survive restarts."""
    configured = env_str("DJANGO_SECRET_KEY")
    if configured:
        return configured
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        key_file.touch(mode=0o600)
        key_file.write_text(secrets.token_urlsafe(50))
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    # Django's admin, its modules found when the URLs or the checks need them (brain/apps.py).
    "brain.apps.AdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",  # pgvector's HnswIndex needs it on Django 6.1
    "django_htmx",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "brain",
    "knowledge",
    "memory",
    "review",
    "agent",
    "surfaces",
    "bench",  # `make bench` (bench/management/commands/bench.py)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # A worker token opens /api/worker/ and nothing else (brain/workers.py).
    "brain.middleware.WorkerTokenOnlyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Bad input is a 4xx naming the field, before anything reads it (brain/inputs.py).
    "brain.inputs.InputMiddleware",
    # A page's chosen memory, remembered in the session (knowledge/current.py: memory_of).
    "knowledge.current.CurrentMemoryMiddleware",
    # What each person may read is looked up once a request, and Read as
    # (knowledge/visibility.py).
    "knowledge.visibility.ReadingMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "brain.middleware.HtmxLoginRedirectMiddleware",
    "brain.middleware.NotPermittedToastMiddleware",
    "brain.middleware.BusyWriteMiddleware",
]

ROOT_URLCONF = "brain.urls"
WSGI_APPLICATION = "brain.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "surfaces.navigation.navigation",
                "knowledge.access.context",
                "knowledge.current.context",
                "knowledge.visibility.context",
            ],
        },
    },
]

# Database: DATABASE_URL when set, else the embedded PostgreSQL under var/postgres.
DATABASES: dict[str, dict[str, Any]]
if env_str("DATABASE_URL"):
    import dj_database_url

    DATABASES = {"default": dict(dj_database_url.config(conn_max_age=60, conn_health_checks=True))}
else:
    DATABASES = {
        "default": {
            "ENGINE": "brain.db.embedded",
            **embedded.postgres.connection_settings(),
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
    }
# Every statement has a ceiling, so nothing (a pass included) waits on the database for ever.
DATABASES["default"].setdefault("OPTIONS", {})["options"] = (
    f"-c statement_timeout={env_int('BRAIN_STATEMENT_TIMEOUT_MS', 30_000, minimum=100)}"
)
DATABASES["default"]["TEST"] = {"NAME": env_str("BRAIN_TEST_DATABASE", "test_brain")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = env_str("BRAIN_TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on every request otherwise
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}

MESSAGE_TAGS = {50: "error", 40: "error"}

# Content-Security-Policy on every response: scripts and styles come from our own static files
# only (no inline script, event handler or style attribute, no eval), so text that slipped into a
# page as markup could run nothing. htmx is configured (base.html) not to inject its indicator
# style nor to evaluate attributes; the admin needs nothing more.
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
    "form-action": [CSP.SELF],
}

# Production hardening (DJANGO_DEBUG=0). Behind a TLS proxy, which is how brain is deployed.
if not DEBUG:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", True)
    # Browsers never send a Secure cookie back over plain http: `make run` (loopback, no TLS)
    # sets DJANGO_SECURE_COOKIES=0, and the redirect and HSTS off, unless they are set.
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", True)
    if not ALLOWED_HOSTS:
        raise ImproperlyConfigured(
            "DJANGO_ALLOWED_HOSTS is empty: with DJANGO_DEBUG=0 every request would be refused; "
            "set it to the host names people use, comma-separated."
        )
    # Django's own bar for a key (check security.W009): 50 characters, 5 different ones.
    if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is too weak for DJANGO_DEBUG=0 (Django asks for 50+ characters, "
            "5+ different): set one from `python -c 'import secrets; "
            "print(secrets.token_urlsafe(50))'`, or unset it to use var/secret_key."
        )

# Broker: REDIS_URL when set, else the embedded Valkey under var/valkey.
BROKER_URL = env_str("REDIS_URL") or embedded.valkey.url(0)
CELERY_BROKER_URL = BROKER_URL
CELERY_RESULT_BACKEND = BROKER_URL
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A consolidation pass has a 480 s deadline of its own; these are the backstops above it.
CELERY_TASK_SOFT_TIME_LIMIT = env_int("BRAIN_TASK_SOFT_TIME_LIMIT", 540, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("BRAIN_TASK_TIME_LIMIT", 600, minimum=1)
# Compiling a source runs on a queue of its own, which `make run` gives a worker of its own
# (brain/run.py): one memory's upload never holds back another's filing pass. It works in turns
# of at most BRAIN_COMPILE_TURN_S seconds, so sources compile side by side (memory/compiling.py).
CELERY_TASK_ROUTES = {"memory.tasks.compile_source": {"queue": "compile"}}
BRAIN_COMPILE_TURN_S = env_int("BRAIN_COMPILE_TURN_S", 60, minimum=1)
CELERY_RESULT_EXPIRES = 24 * 3600
CELERY_TIMEZONE = TIME_ZONE
# Redis redelivers an unacknowledged message after this long; it must exceed the time limit.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
# Each entry runs every "schedule" seconds, or at the times a "crontab" names (celery's crontab's
# keyword arguments): brain/celery.py makes those crontabs, so loading the settings does not
# load Celery (a third of a second of every terminal command, which sends no task).
CELERY_BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    "worker-heartbeat": {"task": "brain.tasks.heartbeat", "schedule": 60.0},
    # The daily filing pass, early in the morning when nobody is editing.
    "memory-daily-pass": {
        "task": "memory.tasks.consolidate_daily",
        "crontab": {
            "hour": env_int("BRAIN_DAILY_PASS_HOUR", 3, minimum=0, maximum=23),
            "minute": 30,
        },
    },
    # This morning's brief, written before people are up.
    "memory-brief": {
        "task": "memory.tasks.write_briefs",
        "crontab": {"hour": env_int("BRAIN_BRIEF_HOUR", 7, minimum=0, maximum=23), "minute": 0},
    },
    # Restarts a pass whose worker died or whose start message was lost.
    "memory-sweep": {"task": "memory.tasks.sweep_consolidations", "schedule": 120.0},
    # The same for a reflection over a conversation.
    "memory-reflection-sweep": {"task": "memory.tasks.sweep_reflections", "schedule": 120.0},
    # And for compiling a source into facts on pages.
    "memory-compile-sweep": {"task": "memory.tasks.sweep_compiles", "schedule": 120.0},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# Django's own ceiling on a body read into memory: the largest a view allows (a whole
# conversation, memory/conversations.py MAX_POST_BYTES). Every other view is held to 1 MiB by
# brain.inputs before its body is read.
DATA_UPLOAD_MAX_MEMORY_SIZE = 8 * 1024 * 1024

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "brain.api_errors.exception_handler",
    # JSON within brain's limits (size, depth) and cleaned of what cannot be stored.
    "DEFAULT_PARSER_CLASSES": [
        "brain.inputs.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "brain API",
    "DESCRIPTION": "Long-term memory a person can read, correct and trust.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # DRF views are exempt from LoginRequiredMiddleware (they answer 401/403 themselves), and
    # the schema view allows anyone by default: it asks for a sign-in or a token like the API.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # One name per choice set, whatever the field is called. A queued item's confidence and a
    # finding's severity are the same set (high/medium/low, labelled alike): one name for both.
    # What a client sends as a confidence lists the bare words, a set of its own.
    "ENUM_NAME_OVERRIDES": {
        "LevelEnum": "memory.models.Confidence",
        "ConfidenceEnum": ["high", "medium", "low"],
        "SettledEnum": "review.models.Finding.Settled",
        "ResolutionEnum": "knowledge.models.Conflict.Resolution",
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("BRAIN_LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

BRAIN_ADMIN_USERNAME = env_str("BRAIN_ADMIN_USERNAME", "admin")

# What a signed-in person may do in a memory where nobody granted them anything
# (knowledge/access.py): none, read, teach (the default: a household member tells brain
# things) or curate.
BRAIN_DEFAULT_PERMISSION = env_str("BRAIN_DEFAULT_PERMISSION", "teach")

# A consolidation pass rewrites the whole document plus the voice distillate; past this many
# seconds it stops and writes nothing. Each model call gets the time that is left.
BRAIN_CONSOLIDATION_DEADLINE_S = env_int("BRAIN_CONSOLIDATION_DEADLINE_S", 480, minimum=5)

# --- LLM gateway (brain/llm) -----------------------------------------------------------------
# Every model call goes through brain.llm.complete. With no key, brain runs on its offline
# heuristics. Callers pass their own timeout (the time left in their deadline); retries of a
# transient failure (429, 5xx, overloaded, no connection) stay inside that deadline too.
ANTHROPIC_API_KEY = env_str("ANTHROPIC_API_KEY")
ANTHROPIC_BASE_URL = env_str("ANTHROPIC_BASE_URL")  # empty: the SDK's default endpoint
BRAIN_LLM_MODEL = env_str("BRAIN_LLM_MODEL", "claude-sonnet-5-5")
# The small model for short calls made often (the reflection after every conversation).
BRAIN_LLM_CHEAP_MODEL = env_str("BRAIN_LLM_CHEAP_MODEL", "claude-haiku-4-5")
BRAIN_LLM_MAX_RETRIES = env_int("BRAIN_LLM_MAX_RETRIES", 1, minimum=0, maximum=5)
# How long a worker holds a model call without a heartbeat before it is handed out again
# (brain/workers.py).
BRAIN_WORKER_LEASE_S = env_int("BRAIN_WORKER_LEASE_S", 60, minimum=1, maximum=600)
# Who judges a new fact against what is known: "offline" (rules, free) or "anthropic" (the
# model above, one call per write). An agent may always pass its own verdict.
BRAIN_GATE_JUDGE = env_str("BRAIN_GATE_JUDGE", "offline")
if BRAIN_GATE_JUDGE not in ("offline", "anthropic"):
    raise ImproperlyConfigured(f"BRAIN_GATE_JUDGE={BRAIN_GATE_JUDGE!r}: use offline or anthropic.")

# --- Embeddings (knowledge/embedding.py) -----------------------------------------------------
# Which embedder turns facts into vectors: "minilm" (all-MiniLM-L6-v2, int8 ONNX, shipped in
# PyPI packages, offline) or "hash" (stdlib character n-grams: lexical, the tests' default).
# "minilm" without its packages installed falls back to "hash" with one logged warning.
BRAIN_EMBEDDER = env_str("BRAIN_EMBEDDER", "minilm")

# --- Entity registry (knowledge/registry.py) -------------------------------------------------
# The house's rooms, devices and people as subjects. With both set, the beat syncs them from
# Home Assistant's REST API (GET {HA_URL}/api/states) every 15 minutes; `brain entities sync-ha`
# does it now. HA_TOKEN is a long-lived access token from a Home Assistant user profile.
HA_URL = env_str("HA_URL")
HA_TOKEN = env_str("HA_TOKEN")
# Health notes and judgements expire, facts about entities gone 30+ days are deleted: hourly.
CELERY_BEAT_SCHEDULE["knowledge-expiry"] = {
    "task": "knowledge.tasks.apply_expiry",
    "schedule": 3600.0,
}
CELERY_BEAT_SCHEDULE["knowledge-home-assistant-sync"] = {
    "task": "knowledge.tasks.sync_home_assistant",
    "schedule": 15 * 60.0,
}
# Guesses expire and wake, fixes that held close: daily.
CELERY_BEAT_SCHEDULE["review-tend"] = {
    "task": "review.tasks.tend",
    "crontab": {"hour": 4, "minute": 15},
}
# What the house's own events show (review/insight.py): guesses about what is done by hand at a
# regular time, findings through the inbox. Daily, after tending and before the brief; events
# past their keeping are removed first.
CELERY_BEAT_SCHEDULE["review-insight"] = {
    "task": "review.tasks.insight_every_memory",
    "crontab": {"hour": 5, "minute": 0},
}
# Deep review of every learning memory, as the Knowledge tab's button starts it: weekly, since it
# reads everything known and what it finds changes slowly.
CELERY_BEAT_SCHEDULE["review-deep-review"] = {
    "task": "review.tasks.deep_review_every_memory",
    "crontab": {"hour": 5, "minute": 30, "day_of_week": "mon"},
}
# Stale vectors are re-embedded in the background: after a change of BRAIN_EMBEDDER or of a
# memory's embed route, and facts stored without one while its worker was away.
CELERY_BEAT_SCHEDULE["knowledge-reembed"] = {
    "task": "knowledge.tasks.reembed_facts",
    "schedule": 600.0,
}
CELERY_BEAT_SCHEDULE["knowledge-memory-indexes"] = {
    "task": "knowledge.tasks.keep_memory_indexes",
    "schedule": 600.0,
}

# --- Agent memory (agent/) -----------------------------------------------------------------------
# The sleep pass for every memory, hourly: distil the episodes agents recorded, then decay and
# prune. A session's end asks for one at once (the SessionEnd hook); this one catches sessions
# that ended without it, and keeps decay going in memories no agent is using any more.
CELERY_BEAT_SCHEDULE["agent-sleep"] = {
    "task": "agent.tasks.sleep_every_memory",
    "schedule": 3600.0,
}
