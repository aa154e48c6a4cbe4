"""Exact Kubernetes ``resource.Quantity`` arithmetic, parsing and formatting.

The semantics follow ``k8s.io/apimachinery/pkg/api/resource`` (written from its documented and
tested behaviour, not copied):

* Parsing accepts ``[+-]<digits>[.<digits>]<suffix>`` where the suffix is a decimal SI suffix
  (``n u m "" k M G T P E``), a binary SI suffix (``Ki Mi Gi Ti Pi Ei``) or a decimal exponent
  (``e3``, ``E-3``). Values are rounded up (away from zero) to the nearest nano unit; binary values
  above 2^63-1 are clamped to it, as upstream does.
* Upstream keeps a quantity either as a small ``int64Amount`` (value * 10^scale, both fitting
  int64/int32) or as an arbitrary precision decimal. That choice is observable through
  ``AsInt64`` (and therefore CEL's ``isInteger()``/``asInteger()``): a decimal-backed quantity
  never converts, and an int64 amount with a negative scale ("1000m") does not either. This
  module tracks the same representation so those answers match upstream.
* ``str()`` gives upstream's canonical form in the quantity's format (BinarySI, DecimalSI or
  DecimalExponent), including upstream's habit of returning the original text when the fast
  parser found it already canonical.

Deviations (documented, only reachable with absurd inputs): a decimal SI value beyond the ``E``
suffix is printed with ``E`` and a larger mantissa (upstream prints a wrong, suffix-less number),
a binary value beyond ``Ei`` is printed with ``Ei``, and decimal exponents above 4096 are rejected
instead of building enormous numbers.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from functools import lru_cache, total_ordering
from typing import Final

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "Quantity",
    "QuantityError",
    "exact_amount",
    "is_quantity",
    "parse_quantity",
    "stored_form",
]

DECIMAL_EXPONENT: Final = "DecimalExponent"
BINARY_SI: Final = "BinarySI"
DECIMAL_SI: Final = "DecimalSI"

_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_NANO: Final = -9
# Upstream's int64Amount fast path only applies when this many decimal digits fit in an int64.
_MAX_INT64_FACTORS: Final = 18
# Exponents beyond this would build huge integers for no realistic quantity.
_MAX_EXPONENT: Final = 4096

_DECIMAL_SUFFIXES: Final = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9}
_DECIMAL_SUFFIXES.update({"T": 12, "P": 15, "E": 18})
_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT: Final = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT: Final = {0: "", **{v // 10: k for k, v in _BINARY_SUFFIXES.items()}}
_SUFFIX_CHARS: Final = frozenset("eEinumkKMGTP")
_DIGITS: Final = frozenset("0123456789")

_FORMAT_WRONG: Final = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
_NUMERIC: Final = "unable to parse quantity's numeric part"
_SUFFIX: Final = "unable to parse quantity's suffix"


class QuantityError(ValueError):
    """A string that is not a valid Kubernetes quantity."""


def _fits_int64(value: int) -> bool:
    return _INT64_MIN <= value <= _INT64_MAX


def _scan(text: str) -> tuple[bool, str, str, str]:
    """Split ``text`` into sign, integer digits, fraction digits and suffix like upstream's
    scanner: leading zeros are dropped and a lone sign or "." scans as zero."""
    positive = True
    pos = 0
    end = len(text)
    if text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(f"{text!r}: {_FORMAT_WRONG}")
    return positive, num, denom, text[suffix_start:]


def _interpret_suffix(text: str, suffix: str) -> tuple[int, int, str]:
    """Return (base, exponent, format) for a suffix, as upstream's suffixer does."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if not body or not set(body) <= _DIGITS:
            raise QuantityError(f"{text!r}: {_SUFFIX}")
        parsed = int(digits)
        if not _fits_int64(parsed):
            raise QuantityError(f"{text!r}: {_SUFFIX}")
        # Upstream narrows the exponent to int32 with wrap-around.
        exponent = ((parsed + (1 << 31)) % (1 << 32)) - (1 << 31)
        return 10, exponent, DECIMAL_EXPONENT
    raise QuantityError(f"{text!r}: {_SUFFIX}")


def _round_up_to_nano(mantissa: int, exponent: int) -> tuple[int, int]:
    """Round |value| up to a multiple of 10^-9, keeping the sign (upstream's inf.RoundUp)."""
    if exponent >= _NANO or mantissa == 0:
        return mantissa, exponent
    divisor = 10 ** (_NANO - exponent)
    quotient, remainder = divmod(abs(mantissa), divisor)
    if remainder:
        quotient += 1
    return (quotient if mantissa > 0 else -quotient), _NANO


_PARSED_LIMIT = 65_536
_PARSED: dict[str, Quantity] = {}


@total_ordering
class Quantity:
    """An immutable Kubernetes quantity: exact value, format and upstream representation."""

    __slots__ = ("_exponent", "_format", "_int64", "_mantissa", "_text", "_value")

    def __init__(
        self, *, mantissa: int, exponent: int, fmt: str, int64: bool, text: str | None = None
    ) -> None:
        self._mantissa = mantissa
        self._exponent = exponent
        self._format = fmt
        # True when upstream would hold this value as an int64Amount(mantissa, exponent).
        self._int64 = int64
        self._text = text
        if exponent >= 0:
            self._value = Fraction(mantissa * 10**exponent)
        else:
            self._value = Fraction(mantissa, 10**-exponent)

    # Construction -------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Parse ``text`` like ``resource.ParseQuantity``; raise QuantityError when invalid."""
        # Quantities are immutable and clusters repeat the same few strings on thousands of
        # devices, so each distinct text is parsed once.
        if cls is Quantity and isinstance(text, str):
            cached = _PARSED.get(text)
            if cached is not None:
                return cached
            quantity = cls._parse_uncached(text)
            if len(_PARSED) >= _PARSED_LIMIT:
                _PARSED.clear()
            _PARSED[text] = quantity
            return quantity
        return cls._parse_uncached(text)

    @classmethod
    def _parse_uncached(cls, text: str) -> Quantity:
        if not isinstance(text, str):
            raise QuantityError(f"quantity must be a string, not {type(text).__name__}")
        if not text:
            raise QuantityError(f"{text!r}: {_FORMAT_WRONG}")
        if text == "0":
            return cls(mantissa=0, exponent=0, fmt=DECIMAL_SI, int64=True, text="0")
        positive, num, denom, suffix = _scan(text)
        base, exponent, fmt = _interpret_suffix(text, suffix)
        if exponent > _MAX_EXPONENT:
            raise QuantityError(f"{text!r}: exponent {exponent} is too large")
        quantity = cls._parse_int64(
            text, positive=positive, num=num, denom=denom, exponent=exponent, fmt=fmt
        )
        if quantity is not None:
            return quantity
        return cls._parse_exact(
            text, positive=positive, num=num, denom=denom, base=base, exponent=exponent, fmt=fmt
        )

    @classmethod
    def _parse_int64(
        cls, text: str, *, positive: bool, num: str, denom: str, exponent: int, fmt: str
    ) -> Quantity | None:
        """Upstream's int64 fast path; None when the value needs the exact path."""
        if fmt == BINARY_SI:
            if denom:
                return None
            precision = 15 - len(num) - int(exponent * 3 / 10) - 1
            multiplier, scale = 1 << exponent, 0
        else:
            precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
            multiplier, scale = 1, exponent
        if precision < 0:
            return None
        scale -= len(denom)
        if scale < _NANO:
            return None
        shifted = num + denom
        value = int(shifted)
        result = value * multiplier
        if not _fits_int64(result):
            return None
        if not positive:
            result = -result
        # Upstream remembers the input text when it is already canonical (or looks so).
        if fmt == BINARY_SI:
            cached = exponent % 10 == 0 and value & 0x07 != 0
        else:
            cached = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
        return cls(
            mantissa=result, exponent=scale, fmt=fmt, int64=True, text=text if cached else None
        )

    @classmethod
    def _parse_exact(
        cls,
        text: str,
        *,
        positive: bool,
        num: str,
        denom: str,
        base: int,
        exponent: int,
        fmt: str,
    ) -> Quantity:
        """Upstream's arbitrary precision path: exact decimal, rounded up to nano."""
        mantissa = int(num + denom)
        scale = -len(denom)
        if base == 10:
            scale += exponent
        else:
            mantissa <<= exponent
        if scale < _NANO - 64 and mantissa:
            # Far below a nano unit: rounding up always gives exactly one nano unit.
            mantissa, scale = 1, _NANO
        mantissa, scale = _round_up_to_nano(mantissa, scale)
        if fmt == BINARY_SI:
            value = Fraction(mantissa) * Fraction(10) ** scale
            if value > _INT64_MAX:
                mantissa, scale = _INT64_MAX, 0
            elif 0 < value < 1:
                fmt = DECIMAL_SI
        if not positive:
            mantissa = -mantissa
        return cls(mantissa=mantissa, exponent=scale, fmt=fmt, int64=False)

    @classmethod
    def from_int(cls, value: int, fmt: str = DECIMAL_SI) -> Quantity:
        """Like ``resource.NewQuantity``: an int64 amount with scale 0."""
        if not _fits_int64(value):
            return cls(mantissa=value, exponent=0, fmt=fmt, int64=False)
        return cls(mantissa=value, exponent=0, fmt=fmt, int64=True)

    # Accessors ----------------------------------------------------------------------------

    @property
    def format(self) -> str:
        """BinarySI, DecimalSI or DecimalExponent."""
        return self._format

    @property
    def exact(self) -> Fraction:
        """The exact value."""
        return self._value

    @property
    def int64_amount(self) -> bool:
        """Whether upstream holds the value as an ``int64Amount`` (not an ``inf.Dec``)."""
        return self._int64

    @property
    def scale(self) -> int:
        """The decimal exponent of the representation (``int64Amount.scale``)."""
        return self._exponent

    @classmethod
    def from_representation(
        cls, value: Fraction, *, int64: bool, scale_nonnegative: bool
    ) -> Quantity:
        """A quantity of this exact value held the way upstream would roughly hold it.

        Only whether it is an int64 amount and the sign of its scale are known; the most
        compact such representation is chosen, which decides ``isInteger()`` and the arithmetic
        representation rules exactly except for int64 overflow right at the limits.
        """
        if int64 and scale_nonnegative and value.denominator == 1:
            mantissa, scale = value.numerator, 0
            while mantissa and mantissa % 10 == 0:
                mantissa, scale = mantissa // 10, scale + 1
            return cls(mantissa=mantissa, exponent=scale, fmt=DECIMAL_SI, int64=True)
        places = 1
        while (value * 10**places).denominator != 1 and places < -_NANO:
            places += 1
        mantissa = int(value * 10**places) if int64 else int(value * 10**-_NANO)
        scale = -places if int64 else _NANO
        return cls(mantissa=mantissa, exponent=scale, fmt=DECIMAL_SI, int64=int64)

    def sign(self) -> int:
        """-1, 0 or 1."""
        return (self._mantissa > 0) - (self._mantissa < 0)

    def is_zero(self) -> bool:
        """True for any representation of zero."""
        return self._mantissa == 0

    def as_int64(self) -> int | None:
        """Upstream ``AsInt64``: the value when it is an int64 amount that converts exactly."""
        if not self._int64:
            return None
        if self._exponent == 0:
            return self._mantissa
        if self._exponent < 0:
            return None
        result = self._mantissa * 10**self._exponent
        return result if _fits_int64(result) else None

    def is_integer(self) -> bool:
        """CEL ``isInteger()``: whether ``as_int64`` succeeds."""
        return self.as_int64() is not None

    def scaled_value(self, scale: int) -> int:
        """The value in units of 10^scale, rounded up away from zero (exact, never wraps)."""
        scaled = self._value / Fraction(10) ** scale
        magnitude = -(-abs(scaled.numerator) // scaled.denominator)
        return magnitude if scaled >= 0 else -magnitude

    def value_int(self) -> int:
        """Upstream ``Value()``: the integer value rounded up away from zero."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """Upstream ``MilliValue()``: the value in thousandths, rounded up away from zero."""
        return self.scaled_value(-3)

    def as_approximate_float(self) -> float:
        """Upstream ``AsApproximateFloat64``."""
        try:
            return float(self._value)
        except OverflowError:
            return float("inf") if self._mantissa > 0 else float("-inf")

    def normalized(self) -> str:
        """A canonical exact decimal text of the value, equal for equal values ("1.5", "-2")."""
        normal = Decimal(f"{self._mantissa}e{self._exponent}").normalize()
        return format(normal, "f")

    # Arithmetic ---------------------------------------------------------------------------

    def add(self, other: Quantity) -> Quantity:
        """``q.Add(other)`` on a copy of ``q``: format and representation rules of upstream."""
        fmt = self._format
        if self._int64 and other._int64:
            if self._mantissa == 0:
                fmt = other._format
            summed = _int64_add(self._mantissa, self._exponent, other._mantissa, other._exponent)
            if summed is not None:
                return Quantity(mantissa=summed[0], exponent=summed[1], fmt=fmt, int64=True)
        elif self.is_zero():
            fmt = other._format
        return self._exact_result(self._value + other._value, fmt)

    def sub(self, other: Quantity) -> Quantity:
        """``q.Sub(other)`` on a copy of ``q``."""
        fmt = other._format if self.is_zero() else self._format
        if self._int64 and other._int64:
            summed = _int64_add(self._mantissa, self._exponent, -other._mantissa, other._exponent)
            if summed is not None:
                return Quantity(mantissa=summed[0], exponent=summed[1], fmt=fmt, int64=True)
        return self._exact_result(self._value - other._value, fmt)

    @staticmethod
    def _exact_result(value: Fraction, fmt: str) -> Quantity:
        # Sums of nano-scale values are nano-scale, so the denominator divides 10^9.
        mantissa = value.numerator * (10**9 // value.denominator)
        return Quantity(mantissa=mantissa, exponent=_NANO, fmt=fmt, int64=False)

    def neg(self) -> Quantity:
        """The negated value, same format."""
        return Quantity(
            mantissa=-self._mantissa, exponent=self._exponent, fmt=self._format, int64=self._int64
        )

    def cmp(self, other: Quantity) -> int:
        """-1, 0 or 1 comparing exact values."""
        a, b = _common_scale(self, other)
        return (a > b) - (a < b)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        a, b = _common_scale(self, other)
        return a == b

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        a, b = _common_scale(self, other)
        return a < b

    def __hash__(self) -> int:
        return hash(self._value)

    # Formatting ---------------------------------------------------------------------------

    def __str__(self) -> str:
        if self._text is not None:
            return self._text
        if self._mantissa == 0:
            return "0"
        fmt = self._format
        if fmt == BINARY_SI:
            if -1024 < self._value < 1024 or self._value.denominator != 1:
                fmt = DECIMAL_SI
            else:
                return _binary_canonical(int(self._value))
        return _decimal_canonical(self._mantissa, self._exponent, fmt)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


def _common_scale(a: Quantity, b: Quantity) -> tuple[int, int]:
    """Both values as integers of one power of ten (value = mantissa * 10**exponent): exact, and
    the counter checks of a search compare tens of thousands of amounts, where comparing the
    Fractions (their ABC checks and cross products) was most of the search's time."""
    a_exp, b_exp = a._exponent, b._exponent
    if a_exp == b_exp:
        return a._mantissa, b._mantissa
    if a_exp > b_exp:
        return a._mantissa * 10 ** (a_exp - b_exp), b._mantissa
    return a._mantissa, b._mantissa * 10 ** (b_exp - a_exp)


def _int64_add(a_value: int, a_scale: int, b_value: int, b_scale: int) -> tuple[int, int] | None:
    """Upstream ``int64Amount.Add``: None when an int64 overflows on the way."""
    if b_value == 0:
        return a_value, a_scale
    if a_value == 0:
        return b_value, b_scale
    if a_scale == b_scale:
        total = a_value + b_value
        scale = a_scale
    elif a_scale > b_scale:
        scaled = a_value * 10 ** (a_scale - b_scale)
        if not _fits_int64(scaled):
            return None
        total = scaled + b_value
        scale = b_scale
    else:
        scaled = b_value * 10 ** (b_scale - a_scale)
        if not _fits_int64(scaled):
            return None
        total = a_value + scaled
        scale = a_scale
    return (total, scale) if _fits_int64(total) else None


def _decimal_canonical(mantissa: int, exponent: int, fmt: str) -> str:
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    shift = exponent % 3
    mantissa *= 10**shift
    exponent -= shift
    if fmt == DECIMAL_EXPONENT:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    if exponent > 18:
        mantissa *= 10 ** (exponent - 18)
        exponent = 18
    return f"{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"


def _binary_canonical(value: int) -> str:
    power = 0
    while power < 6 and value % 1024 == 0:
        value //= 1024
        power += 1
    return f"{value}{_BINARY_BY_EXPONENT[power]}"


def stored_form(text: str) -> str:
    """The text the API server keeps for a quantity that a client sent as ``text``.

    The server decodes every Quantity (``ParseQuantity``) and encodes it again (``String()``),
    which keeps the client's text only when it is already canonical for the format the parse
    gives it: a plain number is DecimalSI, a binary suffix BinarySI, an exponent
    DecimalExponent. So the scheduler's ``"5000000000"`` (a BinarySI amount no power of 1024
    divides, which Go prints without a suffix) is stored and shown as ``"5G"``, while ``"4Gi"``
    and ``"1500m"`` stay. Text that is not a quantity is returned unchanged.
    """
    try:
        return str(Quantity.parse(text))
    except QuantityError:
        return text


def parse_quantity(text: str) -> Quantity:
    """Parse ``text``; raise QuantityError when it is not a valid quantity."""
    return Quantity.parse(text)


def is_quantity(text: object) -> bool:
    """Whether ``text`` is a string that parses as a quantity."""
    if not isinstance(text, str):
        return False
    try:
        Quantity.parse(text)
    except QuantityError:
        return False
    return True


@lru_cache(maxsize=4096)
def exact_amount(text: object) -> Fraction | None:
    """The exact value of a quantity spelling, or None when it is not one (lenient readers).

    Pages and metrics read amounts the sync already stored and must not fail on one malformed
    value; clusters repeat a handful of spellings thousands of times, so each is parsed once.
    """
    if isinstance(text, bool) or not isinstance(text, str | int):
        return None
    try:
        return Quantity.parse(str(text).strip()).exact
    except (QuantityError, ValueError):
        return None
