"""Spark's CSV typing of one column of strings, in pyarrow's compute kernels: the type its inference gives
a new column (and the values converted to it), or the values of a column whose type is fixed as from_csv
converts them. What cannot be told exactly here is a reason (the file then takes the line path).
`NewColumns` types a new column as the target's schema keys say: its `schema.hints` type, STRING
(`schema.infer.types=false`), or inferred.

`infer` reproduces Spark's inference where it is certain: integer or bigint (`[+-]?[0-9]+` within 64
bits, by range), double (plain decimals only: `5.`, `1e5`, `NaN` are inferred otherwise, and a number of
more than 18 characters may become a decimal), boolean (`true`/`false` in any case) or string (one value
that no typed parser of Spark's could take). A column whose values could be dates or timestamps (or
anything else Spark's lenient parsers might accept) is declined, unless one value is plainly a string.

Each check is one kernel over the whole column, the cheap ones first: the first values are probed in
Python for a plain string (a regex over a few values costs more to compile than to run), all-digit
columns are cast without a regex, numbers are told by Arrow's own cast where its syntax is the rule's
(then a byte search of the values' data rules out exponents, NaN and Inf), and a column's values are
converted once. Regexes run only over columns these cannot settle. The probes only save work: every
result is decided by the whole-column checks.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

INTEGERS = {pa.int8(), pa.int16(), pa.int32(), pa.int64()}
# pa.ChunkedArray types whose from_csv conversion `convert` reproduces exactly.
SUPPORTED = {*INTEGERS, pa.float64(), pa.bool_(), pa.string()}

INTEGER = r"^[+-]?[0-9]+$"
# What Java's BigDecimal reads, which from_csv gives a DECIMAL column (rounded half up to its scale: a value
# that would round, or exceed the precision, fails pyarrow's cast instead, and the line path decides).
DECIMAL = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"
DOUBLE = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"  # what Java's parseDouble reads
# An integer or a plain decimal (a scale above 0): a double under Spark's inference, unless all are integers.
NUMBER = r"^[+-]?(?:[0-9]+|[0-9]*\.[0-9]+)$"
# A value Spark's inference might type as something other than string: numbers in Java's syntax (whose
# integer parser takes any Unicode digit), NaN and Inf, booleans, and the lenient date and timestamp
# parsers (which start with a digit, a sign or T<digit>, after leading spaces or control characters).
MAYBE_TYPED = r"^[\x00-\x20]*(?:[+.\-]|\p{Nd}|[Tt]\p{Nd}|(?i:nan|inf)|(?i:true|false)$)"
_PROBE = 32  # leading values looked at for a plain string before any whole-column check
_LONGEST_DOUBLE = 18  # characters of a number Spark's inference surely types as double, not decimal
_CONTROL = "".join(map(chr, range(0x21)))  # what MAYBE_TYPED's leading [\x00-\x20]* skips
# The ASCII characters a MAYBE_TYPED value may start with (after _CONTROL): a value starting with
# another ASCII character (or with nothing) is plainly a string.
_TYPED_START = frozenset("+.-0123456789TtNnIiFf")
_NUMBER, _DOUBLE = re.compile(NUMBER.strip("^$")), re.compile(DOUBLE.strip("^$"))  # for fullmatch
_DIGITS = re.compile("[0-9]+")


def _every_case(word: str) -> list[str]:
    return ["".join(letters) for letters in itertools.product(*({c, c.upper()} for c in word))]


# `true` and `false` in every case (Scala's toBoolean): what ASCII lowering turns into either, as no
# other character lowers to their letters
_BOOLEANS = pa.array(sorted([*_every_case("true"), *_every_case("false")]))


def infer(values: pa.ChunkedArray) -> tuple[pa.DataType, pa.ChunkedArray] | str:
    """The type Spark's CSV inference gives a new column of these values (null when every value is
    null: Spark infers string, but another file or the table may type it first) with the values
    converted to it, or why it cannot be told here."""
    present = values.drop_null()
    if len(present) == 0:
        return pa.null(), pa.chunked_array([pa.nulls(len(values))])
    head = _head(present)
    if _plain_string_ahead(head):
        return pa.string(), values  # one plain string makes the column a string column
    if _all_digits(present, head):  # the commonest typed column, told without a regex
        return _integers(values)
    doubles = _plain_numbers(values, present, head)
    number = doubles is not None or _all_numbers(present, head, NUMBER)
    if number and not _holds(present, b"."):
        return _integers(_without_plus(values, present))
    if number:
        if _any(pc.greater(pc.binary_length(present), _LONGEST_DOUBLE)):  # ASCII: bytes are characters
            return "a number of more than 18 characters (Spark may infer a decimal)"
        return pa.float64(), values.cast(pa.float64()) if doubles is None else doubles
    booleans = _booleans(values, present, head)
    if booleans is not None:
        return pa.bool_(), booleans
    if not _all_match(present, MAYBE_TYPED):
        return pa.string(), values
    return "values Spark's inference may type otherwise (dates, timestamps, NaN, exponents, ...)"


def supported(t: pa.DataType) -> bool:
    """Whether `convert` reproduces from_csv's conversion to `t`."""
    return t in SUPPORTED or pa.types.is_decimal128(t)


def convert(values: pa.ChunkedArray, to: pa.DataType) -> pa.ChunkedArray | None:
    """`values` as from_csv converts them to `to`, or None when one would be malformed there."""
    if to == pa.string():
        return values
    if pa.types.is_null(to):
        return pa.chunked_array([pa.nulls(len(values))]) if values.null_count == len(values) else None
    present = values.drop_null()
    if to == pa.bool_():
        return _booleans(values, present, _head(present))
    if pa.types.is_decimal128(to):
        return _cast(values, to) if _all_match(present, DECIMAL) else None
    try:
        if to in INTEGERS:
            if _all_digits(present, _head(present)):
                return values.cast(to)
            return _without_plus(values, present).cast(to) if _all_match(present, INTEGER) else None
        if to == pa.float64():
            # Arrow's number syntax, NaN and Inf aside, is DOUBLE's (a failed cast costs a regex pass).
            head = _head(present)
            doubles = _cast(values, to) if all(map(_DOUBLE.fullmatch, head)) else None
            if doubles is not None and _all(pc.is_finite(doubles)):
                return doubles
            return values.cast(to) if _all_numbers(present, head, DOUBLE) else None
    except pa.ArrowInvalid:  # out of range
        return None
    return None


@dataclass(frozen=True, slots=True)
class NewColumns:
    """How a new column is typed: its `schema.hints` type, else STRING (`strings`), else inferred."""

    hints: dict[str, pa.DataType]
    strings: bool = False

    def typed(self, name: str, values: pa.ChunkedArray) -> tuple[pa.Field, pa.ChunkedArray] | str:
        hinted = self.hints.get(name)
        if hinted is not None:
            converted = convert(values, hinted) if supported(hinted) else None
            if converted is None:
                return f"column {name}: its values as the hinted {hinted} (the line path converts them)"
            return pa.field(name, hinted), converted
        if self.strings:
            return pa.field(name, pa.string()), values.cast(pa.string())
        inferred = infer(values)
        if isinstance(inferred, str):
            return f"column {name}: {inferred}"
        return pa.field(name, inferred[0]), inferred[1]


INFERRED = NewColumns({})  # no hints, inference on


def _integers(values: pa.ChunkedArray) -> tuple[pa.DataType, pa.ChunkedArray] | str:
    """Integers (digits, a leading '-') as Spark's inference types them: int32 when every one fits."""
    numbers = _cast(values, pa.int64())
    if numbers is None:
        return "an integer beyond 64 bits (Spark infers a decimal)"
    low, high = pc.min_max(numbers).values()
    if low.as_py() >= -(2**31) and high.as_py() < 2**31:
        return pa.int32(), numbers.cast(pa.int32())
    return pa.int64(), numbers


def _plain_numbers(
    values: pa.ChunkedArray, present: pa.ChunkedArray, head: list[str]
) -> pa.ChunkedArray | None:
    """The values as doubles when each is a NUMBER, told by Arrow's cast instead of a regex: the syntax
    it takes, less NaN and Inf (not finite), exponents and a trailing '.', is NUMBER's. Else None.
    A cast that fails costs ten that succeed: the first values are probed first."""
    if not all(map(_NUMBER.fullmatch, head)):
        return None
    doubles = _cast(values, pa.float64())
    if doubles is None or not _all(pc.is_finite(doubles)) or _any(pc.ends_with(present, ".")):
        return None
    return None if _holds(present, b"eE") else doubles


def _all_digits(present: pa.ChunkedArray, head: list[str]) -> bool:
    """Whether every value is ASCII digits (the first values looked at before the whole column)."""
    return all(map(_DIGITS.fullmatch, head)) and _all(pc.ascii_is_decimal(present))


def _cast(values: pa.ChunkedArray, to: pa.DataType) -> pa.ChunkedArray | None:
    try:
        return values.cast(to)
    except pa.ArrowInvalid:  # not a number of that type, or out of its range
        return None


def _all_numbers(present: pa.ChunkedArray, head: list[str], pattern: str) -> bool:
    """Whether every value matches `pattern` (NUMBER or DOUBLE, which take digits with at most one '.'
    and no sign: DOUBLE also after the last digit, NUMBER not). Such values are told without a regex;
    the pattern runs over the others only (signs, exponents), and over the first few before anything."""
    if not all(map((_NUMBER if pattern == NUMBER else _DOUBLE).fullmatch, head)):
        return False
    if pattern == NUMBER and _any(pc.ends_with(present, ".")):
        return False
    plain = pc.ascii_is_decimal(pc.replace_substring(present, ".", "", max_replacements=1))
    return _all(plain) or _all_match(present.filter(pc.invert(plain)), pattern)


def _booleans(values: pa.ChunkedArray, present: pa.ChunkedArray, head: list[str]) -> pa.ChunkedArray | None:
    """The values as booleans when each is `true` or `false` in any case (Scala's toBoolean), else None.
    Arrow's cast alone would also take `1` and `0`."""
    if not all(v.lower() in ("true", "false") for v in head) or not _all(pc.is_in(present, _BOOLEANS)):
        return None
    return pc.equal(pc.binary_length(values), len("true"))  # `true` or `false`: told by their length


def _without_plus(values: pa.ChunkedArray, present: pa.ChunkedArray) -> pa.ChunkedArray:
    """Arrow's integer parser takes no leading '+' (Java's does); a cheap byte search comes first."""
    if not _holds(present, b"+") or not _any(pc.starts_with(present, "+")):
        return values
    return pc.replace_substring_regex(values, r"^\+", "")


def _head(present: pa.ChunkedArray) -> list[str]:
    """The first values: one that fails a check the whole column must pass saves the pass."""
    return present.slice(0, _PROBE).to_pylist()


def _plain_string_ahead(head: list[str]) -> bool:
    """Whether one of the first values is plainly a string (matches no MAYBE_TYPED). Told in Python where
    its first character (after _CONTROL) is ASCII, by RE2 for the others."""
    undecided = []
    for value in head:
        rest = value.lstrip(_CONTROL)
        if rest == "" or (rest[0] < "\x80" and rest[0] not in _TYPED_START):
            return True
        if rest[0] >= "\x80":
            undecided.append(value)
    return bool(undecided) and not _all_match(pa.chunked_array([undecided], pa.string()), MAYBE_TYPED)


def _holds(present: pa.ChunkedArray, chars: bytes) -> bool:
    """Whether a value holds one of the ASCII `chars` (which UTF-8 keeps out of multi-byte characters):
    one numpy comparison per character over the values' data buffers, not a kernel call per value."""
    for chunk in present.chunks:
        offsets_type = {pa.string(): np.int32, pa.large_string(): np.int64}.get(chunk.type)
        if offsets_type is None:  # e.g. string_view
            if any(_any(pc.match_substring(chunk, chr(c))) for c in chars):
                return True
            continue
        _, offsets, data = chunk.buffers()
        ends = np.frombuffer(offsets, offsets_type)[[chunk.offset, chunk.offset + len(chunk)]]
        if data is None or ends[0] == ends[1]:
            continue
        octets = np.frombuffer(data, np.uint8)[ends[0] : ends[1]]
        if any(bool(np.any(octets == c)) for c in chars):
            return True
    return False


def _all_match(values: pa.ChunkedArray, pattern: str) -> bool:
    return _all(pc.match_substring_regex(values, pattern))


def _all(mask: pa.ChunkedArray) -> bool:
    return pc.all(mask).as_py() is not False  # true for no values


def _any(mask: pa.ChunkedArray) -> bool:
    return bool(pc.any(mask).as_py())
