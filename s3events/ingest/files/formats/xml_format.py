"""XML objects: one record per `rowTag` element, shaped as Spark 4's XML source shapes it, then parsed as
JSON by the line path (`records` cuts the object; `json_format.parse_lines` types the records, so schema
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

import io
import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from xml.etree import ElementTree
from xml.etree.ElementTree import Element, ParseError

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
    rows = list(_rows(data, options))
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


def _rows(data: bytes, options: XmlOptions) -> Iterator[dict[str, Any]]:
    depth, inside = 0, 0
    is_row: dict[Any, bool] = {}  # tag -> whether its local name is rowTag (a file has few tags)
    try:
        for event, element in _events(data):
            depth += 1 if event == "start" else -1
            tag = element.tag
            row = is_row.get(tag)
            if row is None:
                row = is_row[tag] = _local(tag) == options.row_tag
            if not row:
                continue
            if event == "start":
                inside = inside or depth
            elif depth + 1 == inside:
                yield _record(element, options)
                inside = 0
                element.clear()  # its rows are out: keep memory to one record
    except defusedxml.DefusedXmlException as exc:
        raise CorruptData(f"XML refused, entity expansion is off: {exc}") from exc
    except ParseError as exc:
        raise CorruptData(f"not well-formed XML: {exc}") from exc


def _events(data: bytes) -> Iterator[tuple[str, Any]]:
    """The start and end events of the document's elements; by defusedxml's parser where a DTD may be."""
    if _without_dtd(data):
        return ElementTree.iterparse(io.BytesIO(data), events=("start", "end"))
    return safe_xml.iterparse(
        io.BytesIO(data), events=("start", "end"), forbid_dtd=False, forbid_entities=True
    )


def _without_dtd(data: bytes) -> bool:
    """Whether the document surely holds no DTD, hence no entity declaration."""
    if b"<!DOCTYPE" in data or b"\x00" in data:
        return False
    declared = _DECLARED.match(data.removeprefix(b"\xef\xbb\xbf"))
    return declared is None or declared.group(1).strip().lower() in _ASCII_BASED


@lru_cache(maxsize=4096)  # a file has few distinct tags, met once per element
def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _record(element: Element, options: XmlOptions) -> dict[str, Any]:
    out: dict[str, Any] = {
        options.attribute_prefix + _local(name): _typed(value, options)
        for name, value in element.attrib.items()
    }
    arrays: set[str] = set()
    for child in element:
        if not isinstance(child.tag, str):
            continue  # a comment or processing instruction
        name, value = _local(child.tag), _value(child, options)
        if name not in out:
            out[name] = value
        elif name in arrays:
            out[name].append(value)
        else:  # a repeated element: an array
            out[name] = [out[name], value]
            arrays.add(name)
    text = (element.text or "") + "".join(child.tail or "" for child in element)
    if text.strip():
        out[options.value_tag] = _typed(text, options)
    return out


def _value(element: Element, options: XmlOptions) -> Any:
    if element.attrib or (len(element) and any(isinstance(c.tag, str) for c in element)):
        return _record(element, options)
    text = element.text or ""
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
