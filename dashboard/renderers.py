"""`?format=yaml`: Kubernetes-style YAML of the original objects.

A list endpoint renders `apiVersion: v1, kind: List, items: [...]` with the page's objects as the
API server sent them (the cursor of the next page goes in `metadata.continue`, as kubectl would
page); a detail endpoint renders the one object; errors render their body unchanged.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import yaml
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.utils import encoders

# libyaml's emitter when PyYAML has it: several times faster on long lists.
_Base: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_Base):  # type: ignore[misc]
    """Block-style YAML that keeps key order, as `kubectl get -o yaml` prints."""

    def ignore_aliases(self, data: Any) -> bool:
        # No `&id001`/`*id001` for a value met twice: the dashboard's readers refuse anchors, and
        # YAML copied from here must paste back into the what-if.
        return True


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    # libyaml's emitter takes exact str only; DRF hands over ErrorDetail (a str subclass).
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(value), style=style)


_Dumper.add_representer(str, _str_representer)
# DRF hands over subclasses (ReturnDict, ReturnList, ErrorDetail): represent them as their base.
_Dumper.add_multi_representer(str, _str_representer)
_Dumper.add_multi_representer(dict, yaml.SafeDumper.represent_dict)
_Dumper.add_multi_representer(list, yaml.SafeDumper.represent_list)


def _continue_token(next_url: str | None) -> str:
    if not next_url:
        return ""
    return (parse_qs(urlsplit(next_url).query).get("cursor") or [""])[0]


class KubeYAMLRenderer(BaseRenderer):
    """Renders raw Kubernetes objects as YAML; registered for `?format=yaml`."""

    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: dict[str, Any] | None = None,
    ) -> bytes:
        if data is None:
            return b""
        context = renderer_context or {}
        response = context.get("response")
        view = context.get("view")
        failed = response is not None and response.status_code >= 400
        if not failed and getattr(view, "action", None) == "list":
            data = self._as_list(data)
        text = yaml.dump(
            data, Dumper=_Dumper, default_flow_style=False, sort_keys=False, allow_unicode=True
        )
        return text.encode(self.charset)

    @staticmethod
    def _as_list(data: Any) -> dict[str, Any]:
        items = data.get("results", []) if isinstance(data, dict) else list(data)
        metadata: dict[str, Any] = {}
        if isinstance(data, dict):
            token = _continue_token(data.get("next"))
            if token:
                metadata["continue"] = token
        return {"apiVersion": "v1", "kind": "List", "metadata": metadata, "items": list(items)}


class FastJSONRenderer(JSONRenderer):
    """DRF's JSONRenderer, with orjson for the compact form it renders by default.

    A what-if answer over 1,000 nodes is over a megabyte of JSON; the standard library's
    encoder took longer to write it than the what-if took to compute after a cluster change.
    orjson writes the same JSON (compact, UTF-8); datetimes, Decimals, lazy strings and anything
    else it does not know natively go through DRF's own encoder, so values look exactly as
    before. An indented or ASCII-only rendering (the browsable API's `?indent=`) and anything
    orjson refuses (integers beyond 64 bits, say) fall back to DRF's renderer.
    """

    _encoder = encoders.JSONEncoder()

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Any = None,
    ) -> bytes:
        if data is None:
            return b""
        if self.get_indent(accepted_media_type or "", renderer_context or {}) or self.ensure_ascii:
            return super().render(data, accepted_media_type, renderer_context)
        try:
            out = orjson.dumps(
                data, default=self._encoder.default, option=orjson.OPT_PASSTHROUGH_DATETIME
            )
        except (orjson.JSONEncodeError, TypeError, ValueError):
            return super().render(data, accepted_media_type, renderer_context)
        # As DRF does: U+2028/U+2029 are valid JSON but end a line in older JavaScript.
        return out.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
