"""Typed readers for DASHBOARD_* environment variables.

Every reader fails loudly on a malformed value instead of falling back silently, and reads a
secret from the file named by ``<NAME>_FILE`` when that variable is set (Docker/Kubernetes secrets).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

PREFIX = "DASHBOARD_"


class ConfigError(ValueError):
    """A DASHBOARD_* variable holds a value we cannot use."""


def _raw(name: str) -> str | None:
    key = PREFIX + name
    file_key = key + "_FILE"
    if os.environ.get(file_key):
        path = Path(os.environ[file_key])
        try:
            return path.read_text().strip()
        except OSError as exc:
            raise ConfigError(f"{file_key}: cannot read {path}: {exc}") from exc
    return os.environ.get(key)


def env_str(name: str, default: str = "") -> str:
    value = _raw(name)
    return default if value is None else value


def env_bool(name: str, default: bool = False) -> bool:
    value = _raw(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{PREFIX}{name}: expected a boolean (1/0, true/false), got {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    value = _raw(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError as exc:
        raise ConfigError(f"{PREFIX}{name}: expected an integer, got {value!r}") from exc
    if minimum is not None and number < minimum:
        raise ConfigError(f"{PREFIX}{name}: must be at least {minimum}, got {number}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = _raw(name)
    if value is None or value.strip() == "":
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


_QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}")


def env_queue_name(name: str, default: str) -> str:
    """A Celery queue name: letters, digits and `_.:-`, as one `--queues` item can carry it."""
    value = _raw(name)
    if value is None or value.strip() == "":
        return default
    value = value.strip()
    if not _QUEUE_NAME.fullmatch(value):
        raise ConfigError(
            f"{PREFIX}{name}: expected a queue name (letters, digits, '_.:-'), got {value!r}"
        )
    return value


def env_networks(name: str) -> list[str]:
    """A comma-separated list of IP addresses or CIDR blocks (`10.0.0.0/8,192.0.2.7`)."""
    values = env_list(name, [])
    for value in values:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError as exc:
            raise ConfigError(
                f"{PREFIX}{name}: {value!r} is not an IP address or CIDR block"
            ) from exc
    return values


# Connection parameters a postgres:// URL's query may name that Django keeps in fields of its own.
_URL_FIELDS = {
    "dbname": "NAME",
    "user": "USER",
    "password": "PASSWORD",
    "host": "HOST",
    "port": "PORT",
}


def _postgres_options(query: str, database: dict[str, object]) -> dict[str, str]:
    """libpq parameters from a URL's query (`?sslmode=verify-full&sslrootcert=/ca.pem`).

    Each goes to psycopg as it is, so TLS and timeouts set in the URL are kept, never dropped.
    Names libpq does not know, a name given twice, or a query naming what the URL already
    says (`?host=` beside a host) are refused. `options` keeps the JIT switched off.
    """
    options: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key in options or (key in _URL_FIELDS and database[_URL_FIELDS[key]]):
            raise ConfigError(f"{PREFIX}DATABASE_URL: {key!r} is given twice")
        if key in _URL_FIELDS:
            database[_URL_FIELDS[key]] = value
        options[key] = value
    from psycopg import ProgrammingError
    from psycopg.conninfo import make_conninfo

    try:
        make_conninfo("", **options)
    except ProgrammingError as exc:  # a name libpq does not know
        raise ConfigError(f"{PREFIX}DATABASE_URL: {exc}") from exc
    # JIT compilation costs more than it saves on the dashboard's aggregate queries.
    options["options"] = f"{options.get('options', '')} -c jit=off".strip()
    return {k: v for k, v in options.items() if k not in _URL_FIELDS}


def parse_database_url(url: str) -> dict[str, object]:
    """Turn ``postgres://user:pass@host:port/name?param=value`` or ``sqlite:///path`` into
    Django settings; a PostgreSQL URL's query parameters become psycopg's OPTIONS."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in {"postgres", "postgresql", "pgsql"}:
        database: dict[str, object] = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            "CONN_MAX_AGE": 60,
            "CONN_HEALTH_CHECKS": True,
        }
        database["OPTIONS"] = _postgres_options(parts.query, database)
        if not database["NAME"]:
            raise ConfigError(f"{PREFIX}DATABASE_URL: no database name in {url!r}")
        refuse_placeholder("DATABASE_URL", str(database["PASSWORD"]), what="its password")
        return database
    if scheme == "sqlite":
        if parts.query:
            raise ConfigError(
                f"{PREFIX}DATABASE_URL: SQLite URLs take no query options, got {parts.query!r}"
            )
        # sqlite:///relative/path and sqlite:////absolute/path, as SQLAlchemy spells them.
        raw_path = unquote(parts.path)
        path = raw_path[1:] if raw_path.startswith("//") else raw_path.lstrip("/")
        if not path:
            raise ConfigError(f"{PREFIX}DATABASE_URL: no file path in {url!r}")
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": path,
            "OPTIONS": {"timeout": 30},
        }
    raise ConfigError(
        f"{PREFIX}DATABASE_URL: unsupported scheme {scheme!r} (use postgres:// or sqlite:///)"
    )


_PLACEHOLDER_PREFIXES = ("change-me", "changeme", "insecure")


def pooled(database: dict[str, object], *, size: int) -> dict[str, object]:
    """`database` with its connections drawn from a pool of at most `size` per process, for
    PostgreSQL (0, or SQLite: unchanged).

    Django runs each ASGI request in a thread of its own, so a connection kept per thread
    (CONN_MAX_AGE) is never reused: every request paid a new connection (a third of the web
    process's CPU with 100 live pages refreshing, bench_live). From a pool, a thread's
    connection goes back when Django closes it, at the end of each request and wherever the
    long-lived loops close theirs; a request finding all `size` in use waits for one.
    """
    if size == 0 or database["ENGINE"] != "django.db.backends.postgresql":
        return database
    options = dict(database.get("OPTIONS") or {})  # type: ignore[call-overload]
    options["pool"] = {"min_size": min(2, size), "max_size": size, "timeout": 30}
    # Django keeps no connection past its thread's close when it pools (and refuses both).
    return {**database, "CONN_MAX_AGE": 0, "OPTIONS": options}


def is_placeholder(value: str) -> bool:
    """A value the shipped examples hold (`CHANGE-ME-...`): anyone who read them knows it."""
    return value.strip().lower().startswith(_PLACEHOLDER_PREFIXES)


def refuse_placeholder(name: str, value: str, *, what: str = "the value") -> str:
    """`value`, unless it is a placeholder from the examples (deploy/secret.yaml, .env.example)."""
    if is_placeholder(value):
        raise ConfigError(
            f"{PREFIX}{name}: {what} is the placeholder from the examples; set a random one"
        )
    return value


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_redis_url(url: str) -> str:
    """A Redis URL the dashboard may use: redis://, rediss:// or unix://, with a real password.

    Redis reached over the network must ask for a password: whoever can write to it can send
    the web processes' live events and queue Celery tasks. Only a server on this host (loopback,
    a unix socket: the test suite's, a sidecar's) may go without one. A password copied from the
    examples is refused everywhere.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in {"redis", "rediss", "unix"}:
        raise ConfigError(
            f"{PREFIX}REDIS_URL: expected redis://, rediss:// or unix://, got {url!r}"
        )
    try:
        password = unquote(parts.password or "") or dict(parse_qsl(parts.query)).get("password", "")
        host = parts.hostname or ""
    except ValueError as exc:
        raise ConfigError(f"{PREFIX}REDIS_URL: {exc}") from exc
    refuse_placeholder("REDIS_URL", password, what="the password")
    if not password and scheme != "unix" and not _loopback(host):
        raise ConfigError(
            f"{PREFIX}REDIS_URL: no password for Redis at {host or '?'}; a server off this "
            "host must require one (redis://:PASSWORD@host:6379/0)"
        )
    return url


def check_secret_key(value: str, *, var_dir: Path) -> str:
    """The configured secret key, or one generated once into `var_dir/secret_key`.

    A placeholder (CHANGE-ME...) or a short key is refused: sessions signed with a key anyone
    can read are forgeable.
    """
    if value:
        if is_placeholder(value) or len(value) < 32:
            raise ConfigError(
                f"{PREFIX}SECRET_KEY: set a random value of at least 32 characters "
                "(the placeholder from the examples is refused)"
            )
        return value
    path = var_dir / "secret_key"
    try:
        if not path.exists():
            private_dir(var_dir)
            import secrets

            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(50) + "\n")
        return path.read_text().strip()
    except FileExistsError:
        return path.read_text().strip()
    except OSError as exc:
        raise ConfigError(
            f"{PREFIX}SECRET_KEY is not set and {path} cannot be written ({exc}); "
            f"set {PREFIX}SECRET_KEY or {PREFIX}SECRET_KEY_FILE"
        ) from exc


# SQLite keeps recent writes in these beside the database; they hold the same data.
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def _drop_group_other(path: Path, private: int) -> None:
    try:
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            os.chmod(path, mode & private)
    except PermissionError:
        pass  # not ours (a mount owned by someone else): nothing we may change


def private_dir(path: Path) -> Path:
    """`path` as a directory only its owner can enter: created 0700, group/other bits dropped."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    _drop_group_other(path, 0o700)
    return path


def private_sqlite_file(path: Path) -> Path:
    """Create the SQLite database empty with mode 0600 before SQLite does, or tighten it.

    SQLite gives its -wal and -shm files the database file's own mode, so they follow; ones left
    by an earlier, looser run are tightened here too.
    """
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for candidate in (path, *(Path(f"{path}{suffix}") for suffix in SQLITE_COMPANIONS)):
        if candidate.exists():
            _drop_group_other(candidate, 0o600)
    return path


# Signing algorithms the dashboard accepts for ID tokens: asymmetric, verified with the keys the
# provider publishes at its jwks_uri (kube-apiserver's --oidc-signing-algs defaults to RS256).
OIDC_SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512")
_OIDC_ENDPOINTS = ("AUTHORIZATION_ENDPOINT", "TOKEN_ENDPOINT", "JWKS_URI")


@dataclass(frozen=True)
class OIDCSettings:
    """Sign-in with an OpenID provider, mapped to the identity kube-apiserver derives.

    `username_prefix` and `groups_prefix` are already resolved: the username prefix defaults as
    kube-apiserver's --oidc-username-prefix does (the issuer and "#" for any claim but email,
    "-" for none). Endpoints left empty are read from the issuer's discovery document.
    """

    issuer: str
    client_id: str
    client_secret: str
    provider_name: str = "OpenID Connect"
    scopes: str = "openid email profile"
    username_claim: str = "sub"
    username_prefix: str = ""
    groups_claim: str = "groups"
    groups_prefix: str = ""
    admin_groups: tuple[str, ...] = ()
    signing_algorithm: str = "RS256"
    ca_file: str = ""
    authorization_endpoint: str = ""
    token_endpoint: str = ""
    jwks_uri: str = ""
    end_session_endpoint: str = ""
    session_seconds: int = 8 * 3600
    timeout_seconds: int = 10

    @property
    def origins(self) -> tuple[str, ...]:
        """Origins the browser is sent to: the issuer's, and a configured end-session one's.

        The pages' Content-Security-Policy (form-action) lets the sign-out form's redirect go
        there and nowhere else.
        """
        urls = (self.issuer, self.end_session_endpoint)
        return tuple(dict.fromkeys(url_origin(url) for url in urls if url))


def url_origin(url: str) -> str:
    """`scheme://host[:port]` of a URL, as a Content-Security-Policy source names it."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def check_provider_url(name: str, url: str) -> str:
    """An https:// URL, or http:// to this host only (a provider beside the dashboard, tests).

    Tokens and the client secret travel to these URLs: plain HTTP off this host would hand them
    to anyone on the path.
    """
    parts = urlsplit(url)
    try:
        host = parts.hostname or ""
    except ValueError as exc:
        raise ConfigError(f"{PREFIX}{name}: {exc}") from exc
    if parts.scheme not in {"https", "http"} or not host:
        raise ConfigError(f"{PREFIX}{name}: expected an https:// URL, got {url!r}")
    if parts.scheme == "http" and not _loopback(host):
        raise ConfigError(f"{PREFIX}{name}: {url!r} is plain HTTP off this host; use https://")
    if parts.query or parts.fragment:
        raise ConfigError(f"{PREFIX}{name}: no query or fragment allowed, got {url!r}")
    return url


def read_oidc() -> OIDCSettings | None:
    """The DASHBOARD_OIDC_* settings, or None when OIDC sign-in is off (no variable set).

    Half a configuration is refused: a client id without an issuer signs nobody in, and
    silently falling back to local accounts would hide the mistake.
    """
    names = sorted(
        key[len(PREFIX) :].removesuffix("_FILE")
        for key, value in os.environ.items()
        if key.startswith(PREFIX + "OIDC_") and value
    )
    if not names:
        return None
    # Kept exactly as given: ID tokens must name it so, and the default username prefix is it.
    issuer = env_str("OIDC_ISSUER")
    client_id = env_str("OIDC_CLIENT_ID")
    secret = env_str("OIDC_CLIENT_SECRET")
    missing = [
        PREFIX + name
        for name, value in (
            ("OIDC_ISSUER", issuer),
            ("OIDC_CLIENT_ID", client_id),
            ("OIDC_CLIENT_SECRET", secret),
        )
        if not value
    ]
    if missing:
        present = ", ".join(PREFIX + name for name in dict.fromkeys(names))
        raise ConfigError(
            f"OIDC sign-in is half configured ({present} set): {', '.join(missing)} missing"
        )
    check_provider_url("OIDC_ISSUER", issuer)
    refuse_placeholder("OIDC_CLIENT_SECRET", secret, what="the client secret")
    endpoints = {name: env_str("OIDC_" + name) for name in _OIDC_ENDPOINTS}
    given = [name for name, value in endpoints.items() if value]
    if given and len(given) != len(endpoints):
        absent = [PREFIX + "OIDC_" + n for n in _OIDC_ENDPOINTS if n not in given]
        raise ConfigError(
            f"{PREFIX}OIDC_{given[0]}: endpoints are given all together or not at all "
            f"(read from the issuer's discovery document); {', '.join(absent)} missing"
        )
    end_session = env_str("OIDC_END_SESSION_ENDPOINT")
    for name, value in [*endpoints.items(), ("END_SESSION_ENDPOINT", end_session)]:
        if value:
            check_provider_url("OIDC_" + name, value)
    algorithm = env_str("OIDC_SIGNING_ALGORITHM", "RS256")
    if algorithm not in OIDC_SIGNING_ALGORITHMS:
        raise ConfigError(
            f"{PREFIX}OIDC_SIGNING_ALGORITHM: expected one of "
            f"{', '.join(OIDC_SIGNING_ALGORITHMS)}, got {algorithm!r}"
        )
    ca_file = env_str("OIDC_CA_FILE")
    if ca_file and not Path(ca_file).is_file():
        raise ConfigError(f"{PREFIX}OIDC_CA_FILE: {ca_file} is not a readable file")
    scopes = env_str("OIDC_SCOPES", "openid email profile")
    if "openid" not in scopes.split():
        raise ConfigError(f"{PREFIX}OIDC_SCOPES: must include openid, got {scopes!r}")
    username_claim = env_str("OIDC_USERNAME_CLAIM", "sub")
    groups_claim = env_str("OIDC_GROUPS_CLAIM", "groups")
    if not username_claim or not groups_claim:
        raise ConfigError(f"{PREFIX}OIDC_USERNAME_CLAIM and _GROUPS_CLAIM must not be empty")
    return OIDCSettings(
        issuer=issuer,
        client_id=client_id,
        client_secret=secret,
        provider_name=env_str("OIDC_PROVIDER_NAME", "OpenID Connect"),
        scopes=scopes,
        username_claim=username_claim,
        username_prefix=kubernetes_username_prefix(
            env_str("OIDC_USERNAME_PREFIX"), claim=username_claim, issuer=issuer
        ),
        groups_claim=groups_claim,
        groups_prefix=env_str("OIDC_GROUPS_PREFIX"),
        admin_groups=tuple(env_list("OIDC_ADMIN_GROUPS", [])),
        signing_algorithm=algorithm,
        ca_file=ca_file,
        authorization_endpoint=endpoints["AUTHORIZATION_ENDPOINT"],
        token_endpoint=endpoints["TOKEN_ENDPOINT"],
        jwks_uri=endpoints["JWKS_URI"],
        end_session_endpoint=end_session,
        session_seconds=env_int("OIDC_SESSION_SECONDS", 8 * 3600, minimum=60),
        timeout_seconds=env_int("OIDC_TIMEOUT_SECONDS", 10, minimum=1),
    )


def kubernetes_username_prefix(value: str, *, claim: str, issuer: str) -> str:
    """The prefix kube-apiserver puts before a username from `claim` (--oidc-username-prefix).

    Unset: the issuer URL and "#" for any claim but email, so that names from two issuers never
    clash; "-": no prefix at all.
    """
    if value == "-":
        return ""
    if value:
        return value
    return "" if claim == "email" else issuer + "#"
