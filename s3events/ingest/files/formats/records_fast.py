"""The fast path of formats whose records span lines and are typed by from_json on the line path: XML
(`xml_format.records`) and multi-line JSON (`records.json_records`; a top-level array by numpy in
`json_elements` where that cuts the same). The task cuts an object into records as the line path does
and hands them, one JSON object a line, to the JSON fast path's parser
(`json_format.parse_json_lines`), whose exactness checks against from_json apply unchanged. No JVM pass
over the records, no schema-inference job.

A file that cannot be cut, or that the JSON parser declines, is read by the line path, which records
its error row (such a file is cut twice: rare, and the error stays the line path's). A batch that adds
columns and holds a declined file takes the line path whole: its inference over every record could
type a column the declined file disagrees on otherwise (struct vs string). `_source_line` is the
record's 0-based index, as on the line path (JSON lines count from 1).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

import pyarrow as pa
import pyarrow.compute as pc

from s3events.ingest.files.formats import json_elements, json_format, records, xml_format
from s3events.ingest.files.formats.base import ParsedFile, known_columns
from s3events.ingest.files.formats.json_format import JsonParser, fast_path_supports
from s3events.ingest.files.lineage import LINEAGE
from s3events.ingest.files.lines import CorruptData
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec

_LINE = LINEAGE.index("_source_line")
_END = "\x00"  # no JSON record holds it raw (not in a string, nor outside one): records' separator
_FOLD = bytes.maketrans(b"\r\n\x00", b"  \n")

Text = Callable[[bytes], bytes]  # an object's bytes -> its records one a line (CorruptData if it cannot)


@dataclass(frozen=True, slots=True)
class RecordsParser:
    json: JsonParser
    text: Text

    @property
    def known(self) -> pa.Schema:
        return self.json.known

    @property
    def schema_from_every_file(self) -> bool:
        return True  # see the module's docstring

    @property
    def new_columns_sorted(self) -> bool:
        return True  # from_json's inference, as for JSON lines

    def keeps_type(self, t: pa.DataType) -> bool:
        return self.json.keeps_type(t)

    def parse(
        self, data: bytes, file: FileRef, etag: str | None, hints: dict[str, pa.DataType]
    ) -> ParsedFile:
        try:
            text = self.text(data)
        except CorruptData as exc:
            return ParsedFile(None, exc.reason)
        parsed = self.json.parse(text, file, etag, hints)
        if parsed.table is None:
            return parsed
        numbers = pc.subtract(parsed.table.column(_LINE), 1)  # a record's index, not a line number
        return ParsedFile(parsed.table.set_column(_LINE, parsed.table.field(_LINE), numbers))


def records_parser(
    target: TargetSpec, declared: pa.Schema | None, existing: pa.Schema | None, text: Text
) -> RecordsParser | None:
    """None when the target's reader options hold one besides those that cut records (the JSON parser
    takes none) or its columns have types the JSON parser does not reproduce."""
    known = known_columns(declared, existing)
    if records.line_options(target.format, target.reader_options) or not fast_path_supports(known):
        return None
    return RecordsParser(JsonParser(known, declared is not None), text)


def json_fast_parser(
    target: TargetSpec, *, declared: pa.Schema | None, existing: pa.Schema | None
) -> JsonParser | RecordsParser | None:
    """JSON's fast parser: of JSON lines, or of a document or top-level array (`multiLine=true`)."""
    if not records.multi_line(target.reader_options):
        return json_format.fast_parser(target, declared=declared, existing=existing)
    return records_parser(target, declared, existing, _json_text)


def _one_a_line(records: Iterator[str]) -> bytes:
    """The records one a line: a line break in one is whitespace (JSON strings hold none raw), folded
    to a space over the whole text at once (per record, a translation cost more than the cutting)."""
    return _END.join(records).encode().translate(_FOLD)


def _json_text(data: bytes) -> bytes:
    """A top-level array's elements by `json_elements` (numpy), else as the line path cuts them."""
    text = json_elements.one_a_line(data)
    if text is not None:
        return text
    split = records.splitter("json", {"multiLine": "true"})
    assert split is not None
    return _one_a_line(record for _, record in split(data))


def xml_fast_parser(
    target: TargetSpec, *, declared: pa.Schema | None, existing: pa.Schema | None
) -> RecordsParser | None:
    """XML's fast parser: `xml_format.records` gives each record as one line of JSON already."""
    options = xml_format.XmlOptions.of(target.reader_options)
    return records_parser(target, declared, existing, partial(_xml_text, options=options))


def _xml_text(data: bytes, *, options: xml_format.XmlOptions) -> bytes:
    return _one_a_line(record for _, record in xml_format.records(data, options=options))
