"""The connection to the API server: raw JSON over the official client's transport.

Everything goes through `ApiClient.param_serialize` + `call_api`, which hand back the undecoded
urllib3 response; bodies are parsed into plain dicts by `loads` (orjson, or json for integers
past 64 bits and what orjson refuses).
Typed models are never used: they drop fields newer than the client and one drifted object
would kill a whole stream.
The same two calls serve any group/version, including ones the client has no classes for
(v1alpha2, v1alpha3).
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import orjson
import urllib3

from dralib.kube.bounds import integers_fit_orjson

if TYPE_CHECKING:
    from kubernetes import client as kube_client

JSON = dict[str, Any]
Query = Mapping[str, str | int | bool]

CONNECT_TIMEOUT = 5.0
REQUEST_TIMEOUT = 60.0


class KubeError(Exception):
    """Talking to the API server failed; the watch loop backs off and tries again."""


class TransportError(KubeError):
    """No usable answer: connection refused or dropped, read timeout, a broken body."""


class ApiStatusError(KubeError):
    """The API server answered with an error status (a metav1.Status body, usually)."""

    def __init__(
        self,
        *,
        status: int,
        reason: str,
        message: str,
        path: str,
        retry_after: float | None = None,
        causes: tuple[str, ...] = (),
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.path = path
        self.retry_after = retry_after
        self.causes = causes
        super().__init__(f"HTTP {status} {reason} from {path}: {message}")

    @property
    def gone(self) -> bool:
        """410 Gone / Expired: the requested resourceVersion or continue token is too old."""
        return self.status == 410

    @property
    def version_too_large(self) -> bool:
        return "ResourceVersionTooLarge" in self.causes


class ConfigError(KubeError):
    """No usable cluster configuration (kubeconfig or service account)."""


def _retry_after(header: str | None, details: Mapping[str, Any]) -> float | None:
    for value in (header, details.get("retryAfterSeconds")):
        if value in (None, ""):
            continue
        try:
            return max(float(value), 0.0)
        except (TypeError, ValueError):
            continue
    return None


def loads(data: bytes) -> Any:
    """Decode JSON, every integer exactly whatever its size.

    orjson is several times faster on list pages and watch lines, but reads an integer past 64
    bits as a float without a word, and a RawExtension (a driver's opaque config, device data)
    carries whatever JSON its writer sent: the dashboard keeps objects as sent. So text with a
    run of 20 digits, or of 19 after a minus, is decoded by the json module, whose integers are
    exact Python ints (a 20-digit string or fraction takes that path too, only more slowly), as
    is what orjson refuses (escaped lone surrogates). Raises ValueError when neither decodes
    it; the json module also refuses integers over 4,300 digits (Python's conversion limit).
    """
    if integers_fit_orjson(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)


def status_error(status: int, body: bytes, *, path: str, retry_after: str | None) -> ApiStatusError:
    """An ApiStatusError from a non-2xx answer, reading the Status body when there is one."""
    try:
        parsed = loads(body) if body else {}
    except ValueError:
        parsed = {}
    if not isinstance(parsed, dict):
        parsed = {}
    return _error_from_status(parsed, status=status, path=path, retry_after=retry_after)


def _error_from_status(
    parsed: Mapping[str, Any], *, status: int, path: str, retry_after: str | None = None
) -> ApiStatusError:
    details = parsed.get("details") if isinstance(parsed.get("details"), dict) else {}
    assert isinstance(details, dict)
    causes = tuple(
        str(c.get("reason", "")) for c in details.get("causes") or [] if isinstance(c, dict)
    )
    return ApiStatusError(
        status=int(parsed.get("code") or status),
        reason=str(parsed.get("reason") or ""),
        message=str(parsed.get("message") or "").strip()[:500],
        path=path,
        retry_after=_retry_after(retry_after, details),
        causes=causes,
    )


def error_from_watch_status(obj: Mapping[str, Any], *, path: str) -> ApiStatusError:
    """The error an `ERROR` watch event carries (its object is a metav1.Status)."""
    return _error_from_status(obj, status=int(obj.get("code") or 500), path=path)


class WatchStream:
    """One open watch response: iterate for decoded events, `close()` from any thread to end it."""

    def __init__(self, response: urllib3.BaseHTTPResponse, *, path: str) -> None:
        self._response = response
        self._path = path
        self._closed = threading.Event()

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        # shutdown() unblocks a reader sitting in recv() on another thread.
        for action in (self._response.shutdown, self._response.close):
            # Closing a socket that is already dead may fail in any way; it is closed either way.
            with contextlib.suppress(Exception):
                action()

    @property
    def path(self) -> str:
        return self._path

    def __iter__(self) -> Iterator[JSON]:
        for line in self.lines():
            yield decode_event(line, path=self._path)

    def lines(self) -> Iterator[bytes]:
        """The events as the server wrote them, one JSON line each, not decoded.

        For a reader that holds events before using them (a watch list's initial state): it
        keeps the bytes it was sent instead of decoding them now and encoding them again.
        """
        buffer = b""
        try:
            for chunk in self._response.stream(amt=None, decode_content=True):
                # One JSON event per line; a partial line waits for the rest of it. One split
                # per chunk: a backlog arrives in chunks of many lines.
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        yield line
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            if self._closed.is_set():
                return
            raise TransportError(f"watch {self._path} broke: {exc}") from exc
        if buffer.strip() and not self._closed.is_set():
            yield buffer


def decode_event(line: bytes, *, path: str) -> JSON:
    """One watch event from its line; TransportError when the line is not a JSON object."""
    try:
        event = loads(line)
    except ValueError as exc:
        raise TransportError(f"watch {path} sent a line that is not JSON") from exc
    if not isinstance(event, dict):
        raise TransportError(f"watch {path} sent a line that is not an object")
    return event


class KubeClient:
    """Raw GET, watch and create requests against one API server, through the official client."""

    def __init__(
        self,
        api_client: kube_client.ApiClient,
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
        request_timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self.api_client = api_client
        self.connect_timeout = connect_timeout
        self.request_timeout = request_timeout

    @property
    def host(self) -> str:
        return str(self.api_client.configuration.host)

    def _send(
        self,
        path: str,
        query: Query | None,
        *,
        read_timeout: float,
        method: str = "GET",
        body: JSON | None = None,
    ) -> urllib3.BaseHTTPResponse:
        # Imported by the first request: a client exists, so the package is loaded already.
        from kubernetes.client import ApiException

        params = [(k, _query_value(v)) for k, v in (query or {}).items()]
        header_params = {"Accept": "application/json"}
        if body is not None:
            header_params["Content-Type"] = "application/json"
        method, url, headers, data, _ = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            query_params=params,
            header_params=header_params,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api_client.call_api(
                method,
                url,
                header_params=headers,
                body=data,
                _request_timeout=(self.connect_timeout, read_timeout),
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransportError(f"{method} {path} failed: {_reason(exc)}") from exc
        except ApiException as exc:
            raise TransportError(f"{method} {path} failed: {exc.reason}") from exc
        raw: urllib3.BaseHTTPResponse = response.response
        if not 200 <= raw.status < 300:
            try:
                answer = raw.read()
            except (urllib3.exceptions.HTTPError, OSError):
                answer = b""
            finally:
                raw.release_conn()
            raise status_error(
                raw.status, answer, path=path, retry_after=raw.headers.get("Retry-After")
            )
        return raw

    def _json_object(self, raw: urllib3.BaseHTTPResponse, what: str) -> JSON:
        """Read a whole answer and decode it as one JSON object; `what` is "GET <path>"."""
        try:
            answer = raw.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TransportError(f"{what}: body broke off: {_reason(exc)}") from exc
        finally:
            raw.release_conn()
        try:
            parsed = loads(answer)
        except ValueError as exc:
            raise TransportError(f"{what}: the body is not JSON ({len(answer)} bytes)") from exc
        if not isinstance(parsed, dict):
            raise TransportError(f"{what}: the body is not a JSON object")
        return parsed

    def get(self, path: str, query: Query | None = None) -> JSON:
        """GET `path` and return the decoded JSON object; raises KubeError subclasses."""
        raw = self._send(path, query, read_timeout=self.request_timeout)
        return self._json_object(raw, f"GET {path}")

    def create(self, path: str, body: JSON) -> JSON:
        """POST `body` to `path` (a create, such as a SubjectAccessReview) and return the
        decoded answer; raises KubeError subclasses, ApiStatusError for a refusal."""
        raw = self._send(path, None, read_timeout=self.request_timeout, method="POST", body=body)
        return self._json_object(raw, f"POST {path}")

    def watch(self, path: str, query: Query, *, read_timeout: float) -> WatchStream:
        """Open a watch on `path`; silence longer than `read_timeout` breaks the stream."""
        return WatchStream(self._send(path, query, read_timeout=read_timeout), path=path)


def _query_value(value: str | int | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason or exc)


def load_client(
    *,
    kubeconfig: str | Path | None = None,
    context: str | None = None,
    in_cluster: bool = False,
) -> KubeClient:
    """A KubeClient from the service account, a kubeconfig file, or the default kubeconfig."""
    # The official client is imported here, by the processes that talk to an API server: a web
    # process that never does (no identity to check) is spared its import (0.16 s of CPU).
    from kubernetes import client as kube_client
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    configuration = kube_client.Configuration()
    try:
        if in_cluster:
            kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            kube_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig) if kubeconfig else None,
                context=context or None,
                client_configuration=configuration,
                persist_config=False,
            )
    except (ConfigException, OSError, ValueError) as exc:
        where = (
            "the in-cluster service account" if in_cluster else f"kubeconfig {kubeconfig or '~'}"
        )
        raise ConfigError(f"cannot load {where}: {exc}") from exc
    # The watch loop owns retries and backoff; hidden urllib3 retries would hide faults from it.
    configuration.retries = False
    return KubeClient(kube_client.ApiClient(configuration=configuration))
