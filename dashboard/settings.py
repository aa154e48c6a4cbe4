"""Settings for the DRA Dashboard, read only from DASHBOARD_* environment variables."""

from __future__ import annotations

from pathlib import Path

from dashboard.env import (
    ConfigError,
    check_redis_url,
    check_secret_key,
    env_bool,
    env_int,
    env_list,
    env_networks,
    env_queue_name,
    env_str,
    parse_database_url,
    pooled,
    private_dir,
    private_sqlite_file,
    read_oidc,
    refuse_placeholder,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))
# The SQLite database, its WAL files and a generated secret key live here: owner only (0700).
if VAR_DIR.exists() or not env_str("DATABASE_URL", ""):
    private_dir(VAR_DIR)

DEBUG = env_bool("DEBUG", False)
# A configured key, or one generated once per installation into VAR_DIR; never a public default.
SECRET_KEY = check_secret_key(env_str("SECRET_KEY", ""), var_dir=VAR_DIR)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# Behind a TLS-terminating proxy (the in-cluster deployment): secure cookies, X-Forwarded-Proto.
SECURE_COOKIES = env_bool("SECURE_COOKIES", False)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_COOKIES
if env_bool("TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True
# Peers (IPs or CIDR blocks) whose X-Forwarded-For/-Proto count; from anyone else those headers
# are dropped before Django sees them (dashboard.security.ProxyHeaders). Empty: no proxy headers.
TRUSTED_PROXIES = env_networks("TRUSTED_PROXIES")
# HTTP request bodies over this are refused with 413 before they are read (what-if input and
# snapshot imports must fit). Django's own in-memory cap for form data follows it.
MAX_REQUEST_BYTES = env_int("MAX_REQUEST_BYTES", 10 * 1024 * 1024, minimum=1024)
# Snapshot files an operator imports (`manage.py import_snapshot`): a 5,000-node cluster's JSON
# is about 120 MB, past the 64 MiB that bounds input from the network.
IMPORT_MAX_BYTES = env_int("IMPORT_MAX_BYTES", 512 * 1024 * 1024, minimum=1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BYTES
# Failed sign-ins per (username, client address) before that pair is locked out, per client
# address whatever the usernames (password spraying), and for how long (dashboard.throttle).
LOGIN_MAX_FAILURES = env_int("LOGIN_MAX_FAILURES", 5, minimum=1)
LOGIN_MAX_ADDRESS_FAILURES = env_int("LOGIN_MAX_ADDRESS_FAILURES", 30, minimum=1)
LOGIN_LOCKOUT_SECONDS = env_int("LOGIN_LOCKOUT_SECONDS", 900, minimum=1)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "channels",
    "django_celery_beat",
    "dashboard",
    "inventory",
    "claims",
    "console",
    "demo",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Everything after reads and writes one cluster's rows.
    "inventory.middleware.ClusterScopeMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "dashboard.security.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Innermost: a shared live refresh still gets the outer middlewares' headers.
    "dashboard.fragments.SharedFragmentMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"
ASGI_APPLICATION = "console.asgi.application"

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
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL", "")
# PostgreSQL connections one process keeps in its pool (0: none, one connection per thread).
DATABASE_POOL_SIZE = env_int("DATABASE_POOL_SIZE", 10, minimum=0)
if DATABASE_URL:
    DATABASES = {"default": pooled(parse_database_url(DATABASE_URL), size=DATABASE_POOL_SIZE)}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(VAR_DIR / "dashboard.sqlite3"),
            # IMMEDIATE: writers take the lock up front instead of failing with "database is
            # locked" when a read transaction upgrades (watcher threads write concurrently).
            "OPTIONS": {
                "timeout": 30,
                "init_command": "PRAGMA journal_mode=WAL;",
                "transaction_mode": "IMMEDIATE",
            },
        }
    }
_database = DATABASES["default"]
if _database["ENGINE"] == "django.db.backends.sqlite3" and _database["NAME"] != ":memory:":
    private_sqlite_file(Path(str(_database["NAME"])))
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# redis://:PASSWORD@host:6379/0; DASHBOARD_REDIS_URL_FILE reads it from a mounted secret. A
# server off this host must require a password; placeholders are refused (check_redis_url).
REDIS_URL = check_redis_url(env_str("REDIS_URL")) if env_str("REDIS_URL") else ""
# Nothing read back from Redis is unpickled: a writer to Redis must not run code here. The cache
# stores JSON (dashboard.cache), the channel layer msgpack, Celery JSON.
# Longer than the channel layer's blocking pop (channels_redis' brpop_timeout, 5 s).
LIVE_REDIS_READ_SECONDS = 15
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # redis-py caps a pool at 100 connections and fails past it: 100 pages opening
                # their live sockets together (each joining its groups) made handshakes fail
                # with "Too many connections" (bench_live). Commands are short; the cap only
                # bounds bursts.
                # A live socket waits in BZPOPMIN for 5 s (the layer's brpop_timeout); redis-py 8
                # reads with a 5 s socket timeout by default, so an idle socket's receive raced
                # the server's empty reply and failed with "Timeout reading from" (channels_redis
                # #422), closing the page's socket. The read waits out the pop, and a dead
                # Redis is still noticed.
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "max_connections": 1000,
                        "socket_timeout": LIVE_REDIS_READ_SECONDS,
                    }
                ],
                "serializer_format": "msgpack",
            },
        }
    }
    CACHES = {"default": {"BACKEND": "dashboard.cache.JSONRedisCache", "LOCATION": REDIS_URL}}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # In the process: bounded by bytes (what-if answers are its largest values).
    CACHES = {
        "default": {
            "BACKEND": "dashboard.cache.JSONLocMemCache",
            "OPTIONS": {"MAX_BYTES": 32 * 1024 * 1024},
        }
    }

# Celery: JSON only (never pickle on the broker); without Redis, tasks run inline.
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = REDIS_URL or "cache+memory://"
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_EAGER", not REDIS_URL)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# The beat schedule and the task queues are what the apps register (`dashboard.registry`, read
# by `dashboard.celery`).

# The cluster: a kubeconfig path and context, or the in-cluster service account.
KUBECONFIG = env_str("KUBECONFIG", "")
KUBE_CONTEXT = env_str("KUBE_CONTEXT", "")
KUBE_IN_CLUSTER = env_bool("KUBE_IN_CLUSTER", False)
WATCH_TIMEOUT_SECONDS = env_int("WATCH_TIMEOUT_SECONDS", 290, minimum=1)
# Objects per page when a watcher lists a kind (the `limit` of each list request).
LIST_PAGE_SIZE = env_int("LIST_PAGE_SIZE", 500, minimum=1)
# A Celery watcher holds its kind's lease in Redis this long unless it renews it (every third of
# it): a worker killed with -9 loses its leases after this, and every worker checks for free ones
# every half of it. Minimum 2: renewing every 0.6 s is the least that is sane.
WATCH_LEASE_SECONDS = env_int("WATCH_LEASE_SECONDS", 30, minimum=2)
# The Celery queue the watchers are sent to; a worker adopts free leases only while it consumes
# this queue, so an operator pins the watchers to the workers started with it in `--queues`.
WATCH_QUEUE = env_queue_name("WATCH_QUEUE", "watchers")
# Namespaced objects are shown to a person only for the namespaces their Kubernetes identity may
# list (asked with SubjectAccessReviews); off: every signed-in person sees everything.
# On by default whenever there is a cluster to ask; a snapshot without one has no RBAC to ask.
RBAC_VISIBILITY = env_bool("RBAC_VISIBILITY", bool(KUBECONFIG) or KUBE_IN_CLUSTER)
# How long one person's answers are kept, and for how many people at most.
RBAC_CACHE_SECONDS = env_int("RBAC_CACHE_SECONDS", 60, minimum=0)
RBAC_CACHE_SIZE = env_int("RBAC_CACHE_SIZE", 1000, minimum=1)

PUBLIC_READ = env_bool("PUBLIC_READ", False)
# Run the watchers and periodic jobs inside the web process (bin/run's single-process mode).
EMBEDDED_SYNC = env_bool("EMBEDDED_SYNC", False)
EMBEDDED_JOB_SECONDS = env_int("EMBEDDED_JOB_SECONDS", 60, minimum=5)

# Sign-in with the organisation's OpenID provider (dashboard.oidc, DASHBOARD_OIDC_*): None when
# no DASHBOARD_OIDC_* variable is set; half a configuration is refused.
OIDC = read_oidc()
# Local username/password accounts (the embedded default's admin). Off (0) in production behind
# OIDC: then only the provider signs people in.
LOCAL_ACCOUNTS = env_bool("LOCAL_ACCOUNTS", True)
if not LOCAL_ACCOUNTS and OIDC is None:
    raise ConfigError(
        "DASHBOARD_LOCAL_ACCOUNTS=0 leaves no way to sign in: set DASHBOARD_OIDC_ISSUER too"
    )
# The OIDC backend answers only the provider's callback; it is inert while OIDC is off.
AUTHENTICATION_BACKENDS = [
    *(["dashboard.throttle.ThrottledModelBackend"] if LOCAL_ACCOUNTS else []),
    "dashboard.oidc.KubernetesIdentityBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"

# Mail, for password reset only: without DASHBOARD_EMAIL_HOST the reset pages answer 404.
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 587, minimum=1)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = refuse_placeholder("EMAIL_HOST_PASSWORD", env_str("EMAIL_HOST_PASSWORD", ""))
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "dra-dashboard@localhost")
PASSWORD_RESET_ENABLED = bool(EMAIL_HOST)
if not PASSWORD_RESET_ENABLED:
    EMAIL_BACKEND = "django.core.mail.backends.dummy.EmailBackend"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
# WhiteNoise serves from the finders in development; an absent root only makes it warn.
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first: a bad token then answers 401 with WWW-Authenticate, not 403.
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["dashboard.permissions.ReadOnlyViewer"],
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_RENDERER_CLASSES": [
        "dashboard.renderers.FastJSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
        "dashboard.renderers.KubeYAMLRenderer",
    ],
    "DEFAULT_PAGINATION_CLASS": "dashboard.pagination.Cursor",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "dashboard.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "DRA Dashboard API",
    "DESCRIPTION": (
        "Devices managed by Kubernetes Dynamic Resource Allocation, the ResourceClaims that hold"
        " them, and what-if."
    ),
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and docs follow the API's own rule: signed-in users, or everyone with PUBLIC_READ.
    "SERVE_PERMISSIONS": ["dashboard.permissions.ReadOnlyViewer"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LOG_JSON = env_bool("LOG_JSON", False)
LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
# The object_context filter adds kind/namespace/name of the Kubernetes object a line is about.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "object_context": {"()": "dashboard.logging.ObjectContextFilter"},
        "redact_path": {"()": "dashboard.access_log.RedactPathFilter"},
    },
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s%(object_suffix)s"},
        "json": {"()": "dashboard.logging.JsonFormatter"},
    },
    "handlers": {
        "stderr": {
            "class": "logging.StreamHandler",
            "formatter": "json" if LOG_JSON else "plain",
            "filters": ["object_context", "redact_path"],
        }
    },
    "root": {"handlers": ["stderr"], "level": LOG_LEVEL},
    "loggers": {
        "kubernetes": {"level": "WARNING"},
        "urllib3": {"level": "WARNING"},
        # Django's defaults give these plain-text handlers of their own (DEBUG-only, runserver).
        "django": {"handlers": [], "propagate": True},
        "django.server": {"handlers": [], "propagate": True},
    },
}
# Applies LOGGING, then sends Python warnings and uncaught exceptions through it as well.
LOGGING_CONFIG = "dashboard.logging.configure"
# Celery workers and beat log through LOGGING above (JSON when asked) instead of Celery's format.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Operations: /readyz fails when a served kind's watcher heartbeat is older than this (0: never);
# /metrics answers a matching `Authorization: Bearer <token>`, a signed-in user, or anyone with
# PUBLIC_READ on.
# Budgets of the allocation search, in seconds of CPU time of the thread answering (so a loaded
# machine does not cut answers short): an interactive what-if, a what-if job, and each distinct
# pending claim spec the diagnosis run asks about. Past a budget the answer is partial and says so.
WHATIF_BUDGET_SECONDS = env_int("WHATIF_BUDGET_SECONDS", 5, minimum=1)
WHATIF_JOB_BUDGET_SECONDS = env_int("WHATIF_JOB_BUDGET_SECONDS", 120, minimum=1)
DIAGNOSIS_BUDGET_SECONDS = env_int("DIAGNOSIS_BUDGET_SECONDS", 2, minimum=1)
# Unfinished what-if jobs one user may have at a time (more: 429).
WHATIF_JOBS_PER_USER = env_int("WHATIF_JOBS_PER_USER", 3, minimum=1)
# Without a Celery worker (no Redis), threads of the web process that run what-if jobs; the
# request that queues one is answered at once. 0: jobs run inline, in that request.
WHATIF_JOB_THREADS = env_int("WHATIF_JOB_THREADS", 2, minimum=0)
# A finished job keeps its answer for an hour: at most this many bytes of JSON (longer lists cut).
WHATIF_JOB_RESULT_MAX_BYTES = env_int("WHATIF_JOB_RESULT_MAX_BYTES", 2 * 1024 * 1024, minimum=65536)
READY_MAX_WATCH_AGE = env_int("READY_MAX_WATCH_AGE", 120, minimum=0)
# Events (events.k8s.io) about ResourceClaims and the pods that use them: the newest this
# many are kept per object, none older than the TTL (kube-apiserver's --event-ttl defaults to
# one hour).
EVENTS_PER_OBJECT = env_int("EVENTS_PER_OBJECT", 20, minimum=1)
EVENTS_TTL_SECONDS = env_int("EVENTS_TTL_SECONDS", 3600, minimum=60)
# Leaks: an allocated claim reserved for nobody for longer than this is reported as leaked.
LEAK_UNRESERVED_SECONDS = env_int("LEAK_UNRESERVED_SECONDS", 600, minimum=0)
METRICS_TOKEN = refuse_placeholder("METRICS_TOKEN", env_str("METRICS_TOKEN", ""))
# Series per pool (devices, pool status, counters, capacity) grow with the cluster (8.9 MB a scrape
# at 5,000 nodes): off by default, per-class series say what alerts and dashboards need.
METRICS_PER_POOL = env_bool("METRICS_PER_POOL", False)
