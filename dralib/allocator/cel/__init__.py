"""CEL device selectors for the allocator, on top of ``cel_expr_python`` (cel-cpp).

This is the only module that imports ``cel_expr_python``. It mirrors the environment of
``k8s.io/dynamic-resource-allocation/cel`` (compile.go) for what a selector can observe:

* ``device.driver``, ``device.allowMultipleAllocations`` (false when the device does not set
  it), ``device.attributes[domain].name`` and ``device.capacity[domain].name``. Unqualified
  names belong to the driver's domain. Looking up a domain that the device does not have yields
  an empty map (upstream's map-with-default), so ``"x" in device.attributes["other"]`` is false
  and ``device.attributes["other"].x`` fails with "no such key". Any other field of ``device``
  is a compile error "undefined field", as upstream's typed device variable gives (see
  ``dralib.allocator.cel.checks``).
* Upstream's two environment types: the allocator compiles in StoredExpressions, which declares
  every field and function whatever the feature gates say (``device.allowMultipleAllocations``
  and ``includes()`` compile, and evaluate, with DRAConsumableCapacity or DRAListTypeAttributes
  off); ``CELOptions.new_expressions`` selects NewExpressions, the API server's environment for
  a new or changed selector, where a disabled feature's field or function is undeclared
  ("undefined field 'allowMultipleAllocations'", "undeclared reference to 'includes'"). The
  NewExpressions attribute type without DRAListTypeAttributes (upstream's ``any``, which
  rejects macros over an attribute at compile time) is not modelled: attributes are ``dyn``.
* Kubernetes' CEL libraries that cel-cpp lacks, as custom functions: quantity, semver, lists
  (``isSorted sum min max indexOf lastIndexOf``), regex (``find findAll``), the strings
  extension, sets, the lists extension and ``includes`` (see the environment types above).
  cel-cpp's own strings extension cannot be added: its ``indexOf``/``lastIndexOf`` would clash
  with the lists library's.
* Regular expressions are RE2 everywhere: cel-cpp's built-in ``matches`` already is, and
  ``find``/``findAll`` use ``google-re2``, so matching is linear in time. A constant pattern that
  RE2 rejects (backreferences, lookaround) is a compile error, as in cel-go, which compiles
  constant patterns with the program (see ``dralib.allocator.cel.checks``).
* The two-variable comprehensions (``all(i, v, P)``, ``exists``, ``existsOne``/``exists_one``,
  ``transformList``, ``transformMap``, ``transformMapEntry``, each over a list's indexes and
  values or a map's keys and values) and the lists extension's ``sortBy``, which are macros
  that this binding's parser cannot be taught: the expression is rewritten before compiling
  into cel.bind and the one-variable macros (see ``dralib.allocator.cel.macros``). Compile
  errors still point into the user's text. Differences: the iteration variables of the
  two-variable forms are ``dyn`` (upstream types them, so some type errors surface only at
  evaluation), and elements of ``sortBy``/``sort`` with equal keys keep their order. (cel-go's
  lists extension has no ``first``/``last``, so neither has this environment.)
* Kubernetes' IP and CIDR libraries (``ip()``, ``isIP``, ``ip.isCanonical``, ``cidr()``,
  ``isCIDR`` and their methods, ``string()`` of both), parsing and printing like Go's
  ``net/netip`` with its error messages (``dralib.allocator.cel.netaddr``, ``net_lib``).
  ``type(ip("..."))`` is a map type here, not ``net.IP``.
* Kubernetes' URL library (``url()``, ``isURL`` and the getters), parsing and printing like
  Go's ``net/url`` with its error messages (``dralib.allocator.cel.gourl``, ``url_lib``).
* The strings extension's ``format`` (cel-go's formatter before version 4, which Kubernetes'
  version 2 uses), with cel-go's output and messages for strings, ints, uints, bools, bytes,
  null, lists and maps and ``%s`` of doubles. ``%f``/``%e`` do not reproduce the en_US locale
  printer's digit grouping, and timestamps, durations and type values cannot be formatted (see
  ``dralib.allocator.cel.format_lib``).

Not available: Kubernetes' ``format.named()`` library (Kubernetes object name formats), which
DRA selectors have no use for. Selectors using it fail to compile with "undeclared reference".

Representation choices (cel_expr_python 0.1.3 cannot carry opaque Python values, and its runtime
dispatches overloads by value kind, not by full type):

* A Quantity is a CEL ``map(uint, dyn)`` holding ``{0u: <exact decimal value>, 1u: R, 2u: S}``
  where R and S record upstream's internal representation (int64 amount or not, scale sign) as
  ``0`` (yes) or ``0.0`` (no). CEL's heterogeneous equality makes ``0 == 0.0``, so equal values
  are equal maps and ``==`` behaves like upstream's ``Quantity.Equal``, while ``isInteger()``
  and ``asInteger()`` follow upstream's ``AsInt64`` (false for ``quantity("1000m")``).
* A semantic version is a CEL ``list(string)`` holding ``[<version without build metadata>]``,
  so ``==`` ignores build metadata like upstream's ``Semver.Equal``.
* The ``device`` variable is a ``map(string, dyn)``; the checks of the compiled expression give
  what upstream's object type ``kubernetes.DRADevice`` would reject (a misspelt field such as
  ``device.drivr``, ``device["driver"]``) its compile error.
* An IP is a CEL ``map(bool, string)``, a CIDR a ``map(int, string)`` and a URL a
  ``map(string, bool)``, each holding Go's canonical text: types nothing else uses, so the
  checker keeps them apart from each other and from quantities, and compile errors name them
  ``net.IP``, ``net.CIDR`` and ``kubernetes.URL`` as upstream does.
* The missing-domain default is implemented by rewriting ``device.attributes[X]`` and
  ``device.capacity[X]`` (and ``.X`` selections) into optional lookups
  ``device.attributes[?X].orValue({})`` before compiling; errors are reported against the
  original text. A map reached another way (``cel.bind(a, device.attributes, a["x"])``) does not
  get the default.

Threads: compiled selectors and the per-device values are shared by all threads. The CEL
activation built from a device's value is not: cel_expr_python binds it to the arena of the
thread that built it, so each thread keeps its own activations (see
``dralib.allocator.cel.device``, which builds the ``device`` variable).

Limits: expressions longer than ``MAX_EXPRESSION_LENGTH`` are rejected, and a static cost
estimate of the checked AST (see ``dralib.allocator.cel.cost``) rejects expressions whose
worst-case cost exceeds ``MAX_COST`` (upstream's ``CELSelectorExpressionMaxCost``) before they
run, because cel-cpp offers no runtime budget through this binding.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional

from dralib.allocator.cel import functions as fn
from dralib.allocator.cel.checks import device_type_errors, static_errors
from dralib.allocator.cel.cost import estimate_cost
from dralib.allocator.cel.device import (
    DeviceInput,
    activation,
    attribute_converts,
    device_data,
    device_domains,
    plain_domains,
)
from dralib.allocator.cel.macros import MacroError, public_message, rewrite_macros
from dralib.allocator.cel.projection import projection_of
from dralib.allocator.cel.rewrite import rewrite_domain_lookups

__all__ = [
    "MAX_COST",
    "MAX_EXPRESSION_LENGTH",
    "CELError",
    "CELOptions",
    "CompiledSelector",
    "DeviceInput",
    "attribute_converts",
    "compile_selector",
    "evaluations",
    "plain_domains",
]

MAX_EXPRESSION_LENGTH: Final = 10 * 1024  # resourceapi.CELSelectorExpressionMaxLength
MAX_COST: Final = 1_000_000  # resourceapi.CELSelectorExpressionMaxCost
# string(ip) and string(cidr) calls retargeted per compilation (one checker run each).
_MAX_RETARGETS: Final = 32


class CELError(Exception):
    """A selector that failed to compile or to evaluate; ``str()`` is the user-facing message."""

    def __init__(self, message: str, *, expression: str) -> None:
        super().__init__(message)
        self.expression = expression


@dataclass(frozen=True)
class CELOptions:
    """Feature switches and upstream's environment type.

    ``new_expressions`` False is StoredExpressions, where the switches change nothing (the
    scheduler's environment); True is NewExpressions, where a disabled feature's field or
    function is undeclared.
    """

    consumable_capacity: bool = True
    list_type_attributes: bool = True
    new_expressions: bool = False

    @property
    def declares_multiple_allocations(self) -> bool:
        """Whether ``device.allowMultipleAllocations`` is declared."""
        return self.consumable_capacity or not self.new_expressions

    @property
    def declares_includes(self) -> bool:
        """Whether ``includes()`` is declared."""
        return self.list_type_attributes or not self.new_expressions


# Results kept per selector for projected device parts (a bound against hostile variety).
_PROJECTED_RESULTS_MAX = 65_536
_evaluations = 0
_lock = threading.Lock()


def evaluations() -> int:
    """How many selector evaluations ran in this process (for throughput figures)."""
    return _evaluations


_DEVICE_TYPE: Final = cel.Type.Map(cel.Type.STRING, cel.Type.DYN)


@lru_cache(maxsize=4)
def _environment(options: CELOptions) -> Any:
    return cel.NewEnv(
        variables={"device": _DEVICE_TYPE},
        extensions=[
            ext_bindings.ExtBindings(),
            ext_optional.ExtOptional(),
        ],
        functions=fn.declarations(includes=options.declares_includes),
    )


def _clean_message(message: str) -> str:
    # cel-cpp appends the status code, e.g. " [INVALID_ARGUMENT]"; users do not need it.
    for prefix in ("INVALID_ARGUMENT: ", "NOT_FOUND: ", "UNKNOWN: ", "OUT_OF_RANGE: "):
        message = message.replace(prefix, "", 1) if message.startswith(prefix) else message
    if message.endswith("]") and " [" in message:
        message = message[: message.rindex(" [")]
    return message.strip()


# cel-cpp's missing-key error; cel-go says "no such key: <key>".
_NO_SUCH_KEY: Final = re.compile(r'Key not found in map : (?:"([^"\\]*)"|(\S+))')


def _runtime_message(raw: str) -> str:
    message = public_message(_clean_message(raw))
    return _NO_SUCH_KEY.sub(lambda m: f"no such key: {m[1] if m[1] is not None else m[2]}", message)


def _located(expression: str, error: MacroError) -> str:
    # The layout of cel-go's (and cel-cpp's) parse errors.
    before = expression[: error.offset]
    line = before.count("\n") + 1
    column = error.offset - (before.rfind("\n") + 1) + 1
    text = expression.split("\n")[line - 1]
    return f"ERROR: <input>:{line}:{column}: {error}\n | {text}\n | {'.' * (column - 1)}^"


class CompiledSelector:
    """A compiled device selector; ``matches`` evaluates it for one device."""

    __slots__ = ("_env", "_program", "_projection", "_projected", "cost", "expression", "options")

    def __init__(
        self, *, expression: str, options: CELOptions, env: Any, program: Any, cost: int
    ) -> None:
        self.expression = expression
        self.options = options
        self.cost = cost
        self._env = env
        self._program = program
        # Results per part of the device the expression reads (see projection.py).
        self._projection = projection_of(expression)
        self._projected: dict[tuple[Any, ...], bool | str] = {}

    def matches(self, device: DeviceInput) -> bool:
        """Whether the device satisfies the selector; CELError on runtime errors."""
        projection = self._projection
        if projection is not None:
            # Most devices: the key straight from the raw attributes, the device's CEL input
            # built only when no device with this key was evaluated yet.
            domains = device_domains(device)
            if domains is not None:
                result = self.known(device.driver, device.attributes, domains)
                if result is not None:
                    return result
        data = device_data(device, self.options)
        if data.error is not None:
            raise CELError(f"CEL runtime error: {data.error}", expression=self.expression)
        if projection is not None and data.value is not None:
            try:
                key, minimal = projection.project(data.value)
            except TypeError:
                return self._evaluate(activation(self._env, data))
            known = self._projected.get(key)
            if known is None:
                try:
                    known = self._evaluate(self._env.Activation(minimal))
                except CELError as exc:
                    known = str(exc)
                if len(self._projected) >= _PROJECTED_RESULTS_MAX:
                    self._projected.clear()
                self._projected[key] = known
            if isinstance(known, str):
                raise CELError(known, expression=self.expression)
            return known
        return self._evaluate(activation(self._env, data))

    @property
    def projected(self) -> bool:
        """Whether the selector reads only the driver and named attributes (see projection.py)."""
        return self._projection is not None

    def known(
        self, driver: str, attributes: Mapping[str, Any], domains: tuple[str, ...]
    ) -> bool | None:
        """The result for a device already evaluated in the part this selector reads, or None.

        For a device with `plain_domains` only. None also when the selector reads more than a
        projection covers, or when that part gave an error (`matches` raises it).
        """
        projection = self._projection
        if projection is None:
            return None
        key = projection.raw_key(driver, attributes, domains)
        if key is None:
            return None
        known = self._projected.get(key)
        return known if known is True or known is False else None

    def _evaluate(self, activation: Any) -> bool:
        global _evaluations
        with _lock:
            _evaluations += 1
        try:
            result = self._program.eval(activation)
        except Exception as exc:  # cel-cpp reports every failure as RuntimeError
            raise CELError(
                f"CEL runtime error: {_runtime_message(str(exc))}", expression=self.expression
            ) from exc
        value = result.value()
        if result.type() == cel.Type.ERROR or isinstance(value, BaseException):
            raise CELError(
                f"CEL runtime error: {_runtime_message(str(value))}", expression=self.expression
            )
        if value is True or value is False:
            return value
        # cel-go's TypeName(): "list", "map", not cel-cpp's "list<dyn>".
        type_name = result.type().name().lower().partition("<")[0]
        raise CELError(
            f"CEL result of type {type_name} could not be converted to bool",
            expression=self.expression,
        )

    def __repr__(self) -> str:
        return f"CompiledSelector({self.expression!r})"


def compile_selector(expression: str, *, options: CELOptions = CELOptions()) -> CompiledSelector:
    """Compile a selector (cached); raise CELError when it is invalid or too expensive."""
    if not isinstance(expression, str):
        raise CELError("CEL expression must be a string", expression=str(expression))
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CELError(
            f"CEL compile error: expression is too long: {len(expression)} characters "
            f"exceed the limit of {MAX_EXPRESSION_LENGTH}",
            expression=expression[:100],
        )
    return _compile_cached(expression, options)


@lru_cache(maxsize=1024)
def _compile_cached(expression: str, options: CELOptions) -> CompiledSelector:
    env = _environment(options)
    try:
        expanded = rewrite_macros(expression)
    except MacroError as exc:
        raise CELError(
            f"CEL compile error: compilation failed: {_located(expression, exc)}",
            expression=expression,
        ) from exc
    checked = None
    for _ in range(_MAX_RETARGETS):
        try:
            checked = env.compile(expanded.text)
            break
        except Exception as exc:
            retargeted = expanded.retarget_string(str(exc))
            if retargeted is None:
                message = expanded.remap_errors(_clean_message(str(exc)))
                raise CELError(
                    f"CEL compile error: compilation failed: {message}", expression=expression
                ) from exc
            expanded = retargeted
    if checked is None:
        raise CELError(
            "CEL compile error: compilation failed: too many string() conversions",
            expression=expression,
        )
    serialized = checked.serialize()
    reports = device_type_errors(
        serialized,
        text=expanded.text,
        multiple_allocations=options.declares_multiple_allocations,
    )
    if reports:
        # The checker's errors, as cel-go reports them all, in the user's text.
        message = expanded.remap_errors("\n".join(reports))
        raise CELError(f"CEL compile error: compilation failed: {message}", expression=expression)
    result_type = checked.return_type()
    if result_type != cel.Type.BOOL and result_type != cel.Type.DYN:
        raise CELError(
            "CEL compile error: must evaluate to bool or the unknown type, "
            f"not {result_type.name().lower()}",
            expression=expression,
        )
    problems = static_errors(serialized)
    if problems:
        raise CELError(
            f"CEL compile error: compilation failed: {problems[0]}", expression=expression
        )
    cost = estimate_cost(serialized)
    if cost > MAX_COST:
        raise CELError(
            f"CEL compile error: estimated cost {cost} exceeds the limit of {MAX_COST}: "
            "the expression may take too long or use too much memory",
            expression=expression,
        )
    program = checked
    rewritten = rewrite_domain_lookups(expanded.text)
    if rewritten != expanded.text:
        try:
            program = env.compile(rewritten)
        except Exception:  # keep the original program; only the missing-domain default is lost
            program = checked
    return CompiledSelector(
        expression=expression, options=options, env=env, program=program, cost=cost
    )
