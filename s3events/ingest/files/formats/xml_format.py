"""XML objects: one record per `rowTag` element, shaped as Spark 4's XML source shapes it, then parsed as
JSON by the line path (`records` cuts the object; `json_lines.parse_lines` types the records, so schema
inference, evolution and error rows are JSON's).

Spark's shape: an attribute is a field named `attributePrefix` + name (`_id`), an element's text beside
attributes or children is `valueTag` (`_VALUE`), a child element with neither is its value, a repeated
child is an array, an empty one null. Values are typed as Spark infers them: integers (up to 18 digits)
long, other numbers double, true/false boolean, anything else string; surrounding spaces are dropped.
Where s3events differs: dates and timestamps stay strings (a schema or a transform types them), namespace
prefixes are dropped (local names), a rowTag element inside another one is part of the outer record, and
a file that is not well-formed XML is one error row (Spark's PERMISSIVE keeps the rows before the fault).

Entity expansion is off: a file declaring an entity (the "billion laughs" bomb) or naming an external
one is one error row, and no DTD is fetched (defusedxml). Entities are declared only in a DTD: a file
that holds no `<!DOCTYPE` in an encoding where those bytes would spell it (UTF-8 or ASCII, as declared or
by default; no NUL byte, which UTF-16 and UTF-32 text has) has none to expand and is parsed by the
standard library's C parser; defusedxml's pure-Python one, about half as fast, parses every other file.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from xml.etree import ElementTree
from xml.etree.ElementTree import ParseError

import defusedxml
import defusedxml.ElementTree as safe_xml

from s3events.ingest.files.lines import CorruptData

OPTIONS = {"rowtag", "attributeprefix", "valuetag", "ignoresurroundingspaces"}  # lower-cased
Path = tuple[str, ...]  # an element's place in a record, array items at their array's
_INTEGER = re.compile(r"[+-]?\d{1,18}")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_NUMBER_STARTS = frozenset("+-.0123456789")
_DECLARED = re.compile(rb"<\?xml[^>]*?encoding\s*=\s*[\"']([^\"']*)")  # an XML declaration's encoding
_ASCII_BASED = {b"utf-8", b"utf8", b"us-ascii", b"ascii"}  # "<!DOCTYPE" is these bytes in them
# Elements open at once inside a record: a record is built (and later read) recursively, and a deeper one
# would exhaust Python's stack in the task and fail its batch at every retry.
MAX_DEPTH = 256


@dataclass(frozen=True, slots=True)
class XmlOptions:
    row_tag: str
    attribute_prefix: str = "_"
    value_tag: str = "_VALUE"
    strip: bool = True

    @classmethod
    def of(cls, options: Mapping[str, str] | None) -> XmlOptions:
        lower = {k.lower(): v for k, v in (options or {}).items()}
        return cls(
            row_tag=lower.get("rowtag", ""),
            attribute_prefix=lower.get("attributeprefix", "_"),
            value_tag=lower.get("valuetag", "_VALUE"),
            strip=lower.get("ignoresurroundingspaces", "true").strip().lower() != "false",
        )


def records(data: bytes, *, options: XmlOptions) -> Iterator[tuple[int, str]]:
    """Each `rowTag` element as a JSON object, with its 0-based index among the file's records.

    An element that is a struct (or repeated) in one record is one in every record of the file, as
    Spark's inference merges them: a lone `<title>Emma</title>` beside `<title lang="en">` becomes
    {"_VALUE": "Emma"}, a single `<tag>` beside repeated ones an array of one."""
    rows = _rows(data, options)
    structs: set[Path] = set()
    arrays: set[Path] = set()
    for row in rows:
        _shapes(row, (), structs, arrays)
    flat = structs == {()} and not arrays  # no field is a struct or an array anywhere: nothing to reshape
    encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
    for index, row in enumerate(rows):
        yield index, encode(row if flat else _reshaped(row, (), structs, arrays, options.value_tag))


def _shapes(value: Any, path: Path, structs: set[Path], arrays: set[Path]) -> None:
    if isinstance(value, list):
        arrays.add(path)
        for item in value:
            _shapes(item, path, structs, arrays)
    elif isinstance(value, dict):
        structs.add(path)
        for name, child in value.items():
            if isinstance(child, (dict, list)):  # a scalar adds no shape: the common case, skipped
                _shapes(child, (*path, name), structs, arrays)


def _reshaped(value: Any, path: Path, structs: set[Path], arrays: set[Path], value_tag: str) -> Any:
    if value is None:
        return None
    if path in arrays:
        items = value if isinstance(value, list) else [value]
        return [_item(v, path, structs, arrays, value_tag) for v in items]
    return _item(value, path, structs, arrays, value_tag)


def _item(value: Any, path: Path, structs: set[Path], arrays: set[Path], value_tag: str) -> Any:
    if isinstance(value, dict):
        return {k: _reshaped(v, (*path, k), structs, arrays, value_tag) for k, v in value.items()}
    if path in structs and value is not None:
        return {value_tag: value}
    return value


def _rows(data: bytes, options: XmlOptions) -> list[dict[str, Any]]:
    """The records, built from the parser's calls to `_Rows` (no element tree: cheaper than iterparse)."""
    builder = _Rows(options)
    try:
        if _without_dtd(data):
            parser: Any = ElementTree.XMLParser(target=builder)
        else:
            parser = safe_xml.DefusedXMLParser(target=builder, forbid_dtd=False, forbid_entities=True)
        parser.feed(data)
        parser.close()
    except defusedxml.DefusedXmlException as exc:
        raise CorruptData(f"XML refused, entity expansion is off: {exc}") from exc
    except ParseError as exc:
        raise CorruptData(f"not well-formed XML: {exc}") from exc
    return builder.rows


class _Rows:
    """The parser's target: builds each record from the parser's calls (no element tree, no events),
    by the rules `_record` states; an element outside any record is passed over."""

    def __init__(self, options: XmlOptions) -> None:
        self.options = options
        self.rows: list[dict[str, Any]] = []
        self._open: list[_Element] = []  # the record's elements now open, its root first
        self._is_row: dict[str, bool] = {}  # tag -> whether its local name is rowTag (few tags a file)

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        if not self._open:
            row = self._is_row.get(tag)
            if row is None:
                row = self._is_row[tag] = _local(tag) == self.options.row_tag
            if not row:
                return
        elif len(self._open) >= MAX_DEPTH:
            raise CorruptData(f"XML record nested deeper than {MAX_DEPTH} elements")
        self._open.append(_Element(tag, attrib))

    def data(self, text: str) -> None:
        if self._open:
            self._open[-1].text.append(text)

    def end(self, tag: str) -> None:
        if not self._open:
            return
        element = self._open.pop()
        if self._open:
            self._open[-1].children.append(element)
        else:
            self.rows.append(_record(element, self.options))

    def close(self) -> None:
        return None


@dataclass(slots=True)
class _Element:
    tag: str
    attrib: dict[str, str]
    text: list[str] = field(default_factory=list)  # its own text, around its children
    children: list[_Element] = field(default_factory=list)


def _without_dtd(data: bytes) -> bool:
    """Whether the document surely holds no DTD, hence no entity declaration."""
    if b"<!DOCTYPE" in data or b"\x00" in data:
        return False
    declared = _DECLARED.match(data.removeprefix(b"\xef\xbb\xbf"))
    return declared is None or declared.group(1).strip().lower() in _ASCII_BASED


@lru_cache(maxsize=4096)  # a file has few distinct tags, met once per element
def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _record(element: _Element, options: XmlOptions) -> dict[str, Any]:
    """Attributes as prefixed fields, child elements by local name (a repeated one an array), the
    element's own text as `valueTag` when it holds any."""
    out: dict[str, Any] = {
        options.attribute_prefix + _local(name): _typed(value, options)
        for name, value in element.attrib.items()
    }
    arrays: set[str] = set()
    for child in element.children:
        name, value = _local(child.tag), _value(child, options)
        if name not in out:
            out[name] = value
        elif name in arrays:
            out[name].append(value)
        else:  # a repeated element: an array
            out[name] = [out[name], value]
            arrays.add(name)
    text = "".join(element.text)
    if text.strip():
        out[options.value_tag] = _typed(text, options)
    return out


def _value(element: _Element, options: XmlOptions) -> Any:
    if element.attrib or element.children:
        return _record(element, options)
    text = "".join(element.text)
    return _typed(text, options) if text.strip() else None


def _typed(text: str, options: XmlOptions) -> Any:
    value = text.strip() if options.strip else text
    if value[:1] not in _NUMBER_STARTS:  # not a number: only a boolean is left to tell
        return value.lower() == "true" if value.lower() in ("true", "false") else value
    if _INTEGER.fullmatch(value):
        return int(value)
    if _NUMBER.fullmatch(value):
        number = float(value)
        return number if math.isfinite(number) else value
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value
