"""Node selection: which nodes a ResourceSlice or device serves (upstream NodeMatches).

A core/v1 NodeSelector is parsed once; its terms are ORed, the requirements of a term ANDed, an
empty term selects nothing, and only `metadata.name` is a field. Parse errors surface when the
selector is used, as upstream's do.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from dralib.allocator.types import JSON, AllocationError, ScenarioError

_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


@dataclass(frozen=True)
class NodeInfo:
    """The parts of a core/v1 Node that node selection looks at."""

    name: str
    labels: dict[str, str]

    @classmethod
    def from_object(cls, node: JSON | None) -> NodeInfo:
        """Read name and labels from a Node object."""
        if node is None:
            return cls(name="", labels={})
        if not isinstance(node, dict):
            raise ScenarioError("node: expected a Node object")
        metadata = node.get("metadata") or {}
        labels = metadata.get("labels") or {}
        if not isinstance(labels, dict):
            raise ScenarioError(f"node {metadata.get('name', '')}: metadata.labels must be a map")
        return cls(name=str(metadata.get("name") or ""), labels=dict(labels))


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_DECIMAL = re.compile(r"[+-]?[0-9]+")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _parse_int(text: str) -> int | None:
    """Go's strconv.ParseInt(text, 10, 64): sign and ASCII digits only, within int64."""
    if not _DECIMAL.fullmatch(text):
        return None
    value = int(text)
    return value if _INT64_MIN <= value <= _INT64_MAX else None


def _label_key_errors(key: str) -> list[str]:
    """apimachinery's IsLabelKey: optional DNS-subdomain prefix, '/', then a name of <= 63."""
    parts = key.split("/")
    if len(parts) > 2:
        return ["a valid label key must be a name with an optional DNS subdomain prefix and '/'"]
    errors = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            errors.append("prefix part must be a lowercase RFC 1123 subdomain")
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _LABEL_NAME.fullmatch(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character"
        )
    return errors


def _label_value_errors(value: str) -> list[str]:
    """apimachinery's IsLabelValue: empty, or a name of at most 63 characters."""
    errors = []
    if len(value) > 63:
        errors.append("must be no more than 63 characters")
    if value and not _LABEL_NAME.fullmatch(value):
        errors.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character"
        )
    return errors


class NodeSelector:
    """A parsed core/v1 NodeSelector: terms are ORed, requirements within a term ANDed."""

    def __init__(self, raw: JSON) -> None:
        self.raw = raw
        self.error = ""
        errors: list[str] = []
        # Each term: (label requirements, field requirements); empty terms select nothing.
        self.terms: list[tuple[list[tuple[str, str, tuple[str, ...]]], list[tuple[str, str, str]]]]
        self.terms = []
        for t_index, term in enumerate(raw.get("nodeSelectorTerms") or []):
            expressions = term.get("matchExpressions") or []
            match_fields = term.get("matchFields") or []
            if not expressions and not match_fields:
                continue
            labels: list[tuple[str, str, tuple[str, ...]]] = []
            field_reqs: list[tuple[str, str, str]] = []
            path = f"nodeSelectorTerms[{t_index}]"
            for index, req in enumerate(expressions):
                key, op = req.get("key", ""), req.get("operator", "")
                values = tuple(req.get("values") or [])
                where = f"{path}.matchExpressions[{index}]"
                # labels.NewRequirement checks key and values whatever the operator.
                invalid = [
                    f"{where}.key: Invalid value: {key!r}: {e}" for e in _label_key_errors(key)
                ]
                invalid += [
                    f"{where}.values[{key}]: Invalid value: {v!r}: {e}"
                    for v in values
                    for e in _label_value_errors(v)
                ]
                if invalid:
                    errors.extend(invalid)
                elif op not in _LABEL_OPERATORS:
                    errors.append(f"{where}.operator: Unsupported value: {op!r}")
                elif op in ("In", "NotIn") and not values:
                    errors.append(
                        f"{where}.values: for 'in', 'notin' operators, values set can't be empty"
                    )
                elif op in ("Exists", "DoesNotExist") and values:
                    errors.append(
                        f"{where}.values: values set must be empty for exists and does not exist"
                    )
                elif op in ("Gt", "Lt") and (len(values) != 1 or _parse_int(values[0]) is None):
                    errors.append(
                        f"{where}.values: for 'Gt', 'Lt' operators, exactly one integer value "
                        "is required"
                    )
                else:
                    labels.append((key, op, values))
            for index, req in enumerate(match_fields):
                op = req.get("operator", "")
                field_values = list(req.get("values") or [])
                where = f"{path}.matchFields[{index}]"
                if op not in ("In", "NotIn"):
                    errors.append(f"{where}.operator: Unsupported value: {op!r}")
                elif len(field_values) != 1:
                    errors.append(f"{where}.values: must have one element")
                else:
                    field_reqs.append((req.get("key", ""), op, field_values[0]))
            self.terms.append((labels, field_reqs))
        if errors:
            self.error = "; ".join(errors)

    def matches(self, node: NodeInfo) -> bool:
        """True if any term matches the node's labels and fields."""
        node_labels = node.labels
        for labels, field_reqs in self.terms:
            if all(_label_matches(node_labels, *req) for req in labels) and (
                not node.name or all(_field_matches(node.name, *req) for req in field_reqs)
            ):
                return True
        return False


def _label_matches(labels: dict[str, str], key: str, op: str, values: tuple[str, ...]) -> bool:
    has = key in labels
    if op == "In":
        return has and labels[key] in values
    if op == "NotIn":
        return not has or labels[key] not in values
    if op == "Exists":
        return has
    if op == "DoesNotExist":
        return not has
    if not has:
        return False
    actual = _parse_int(labels[key])
    if actual is None:
        return False
    wanted = int(values[0])
    return actual > wanted if op == "Gt" else actual < wanted


def _field_matches(node_name: str, key: str, op: str, value: str) -> bool:
    actual = node_name if key == "metadata.name" else ""
    return actual == value if op == "In" else actual != value


def node_matches(
    node: NodeInfo, *, node_name: str, all_nodes: bool, selector: NodeSelector | None
) -> bool:
    """Upstream NodeMatches: nodeName, then allNodes, then a node selector; nothing set: no."""
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        if selector.error:
            raise AllocationError(
                f"failed to parse node selector {json.dumps(selector.raw)}: {selector.error}"
            )
        return selector.matches(node)
    return False
