"""The fast path of XML: the task cuts the object into records (`xml_format.records`, defusedxml, entity
expansion off, as on the line path) and hands them, one JSON object a line, to the JSON fast path's
parser (`json_format.parse_json_lines`), whose exactness checks against Spark's from_json apply
unchanged: the line path types XML records with the same from_json (line_path `_LINE_PARSERS`), so a
file the JSON parser takes gives the rows the line path would. No JVM pass over the records, no
schema-inference job.

A file that is not well-formed, or that the JSON parser declines, is read by the line path, which
records its error row (a refused file is cut twice: rare, and the error stays the line path's).
`_source_line` is the record's 0-based index, as on the line path (JSON lines count from 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from s3events.ingest.files.formats import xml_format
from s3events.ingest.files.formats.base import ParsedFile, known_columns
from s3events.ingest.files.formats.json_format import JsonParser, fast_path_supports
from s3events.ingest.files.formats.records import line_options
from s3events.ingest.files.lineage import LINEAGE
from s3events.ingest.files.lines import CorruptData
from s3events.ingest.model import FileRef
from s3events.ingest.target import TargetSpec

_LINE = LINEAGE.index("_source_line")


@dataclass(frozen=True, slots=True)
class XmlParser:
    json: JsonParser
    options: xml_format.XmlOptions

    @property
    def known(self) -> pa.Schema:
        return self.json.known

    @property
    def schema_from_every_file(self) -> bool:
        # A batch that adds columns and has a declined file takes the line path whole: its inference over
        # every record would type a column the declined file disagrees on otherwise (struct vs string).
        return True

    @property
    def new_columns_sorted(self) -> bool:
        return True  # from_json's inference, as for JSON

    def keeps_type(self, t: pa.DataType) -> bool:
        return self.json.keeps_type(t)

    def parse(
        self, data: bytes, file: FileRef, etag: str | None, hints: dict[str, pa.DataType]
    ) -> ParsedFile:
        try:
            lines = "\n".join(record for _, record in xml_format.records(data, options=self.options))
        except CorruptData as exc:
            return ParsedFile(None, exc.reason)
        parsed = self.json.parse(lines.encode(), file, etag, hints)
        if parsed.table is None:
            return parsed
        numbers = pc.subtract(parsed.table.column(_LINE), 1)  # a record's index, not a line number
        return ParsedFile(parsed.table.set_column(_LINE, parsed.table.field(_LINE), numbers))


def fast_parser(
    target: TargetSpec, *, declared: pa.Schema | None, existing: pa.Schema | None
) -> XmlParser | None:
    """The XML parser for the target, or None when its reader options hold one besides XML's own (the
    JSON parser takes none) or its columns have types the JSON parser does not reproduce."""
    known = known_columns(declared, existing)
    if line_options("xml", target.reader_options) or not fast_path_supports(known):
        return None
    return XmlParser(JsonParser(known, declared is not None), xml_format.XmlOptions.of(target.reader_options))
