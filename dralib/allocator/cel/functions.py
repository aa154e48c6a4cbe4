"""Kubernetes CEL library functions that cel-cpp lacks, as cel_expr_python declarations.

Values (see the package docstring): a Quantity is ``{0: "<exact decimal>"}`` (CEL
``map(uint, string)``), a semantic version is ``["<version>"]`` (CEL ``list(string)``).
Implementations raise ``FunctionError``; cel_expr_python turns an exception raised by a Python
implementation into a CEL evaluation error carrying its message.

The functions live in themed modules (`quantity_lib`, `semver_lib`, `list_lib`, `string_lib`);
this module merges their overloads into one declaration per function name, because a name such
as ``compareTo`` or ``indexOf`` has overloads from more than one library.
"""

from __future__ import annotations

from typing import Any

from cel_expr_python import cel

from dralib.allocator.cel import (
    format_lib,
    list_lib,
    macro_lib,
    net_lib,
    quantity_lib,
    semver_lib,
    string_lib,
    url_lib,
)
from dralib.allocator.cel.library import QUANTITY, SEMVER, FunctionError, Overloads
from dralib.allocator.cel.quantity_lib import quantity_value
from dralib.allocator.cel.semver_lib import semver_value

__all__ = ["QUANTITY", "SEMVER", "FunctionError", "declarations", "quantity_value", "semver_value"]


def declarations(*, includes: bool) -> list[Any]:
    """All function declarations of the DRA selector environment."""
    merged: Overloads = {}
    libraries = (
        quantity_lib.overloads(),
        semver_lib.overloads(),
        list_lib.overloads(includes=includes),
        string_lib.overloads(),
        macro_lib.overloads(),
        net_lib.overloads(),
        url_lib.overloads(),
        format_lib.overloads(),
    )
    for library in libraries:
        for name, overloads in library.items():
            merged.setdefault(name, []).extend(overloads)
    return [cel.FunctionDecl(name, overloads) for name, overloads in merged.items()]
