"""XML is parsed by the standard library's C parser only where no DTD can be, hence no entity to expand;
defusedxml parses every other file. Either gives the same records."""

from __future__ import annotations

import pytest

from s3events.ingest.files.formats import xml_format
from s3events.ingest.files.lines import CorruptData

_OPTIONS = xml_format.XmlOptions("row")
_BOMB = '<!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]><r><row>&b;</row></r>'
_DOCUMENT = (
    '<rows xmlns:p="urn:p"><!-- c --><row id="1"><p:name>A</p:name><n>007</n><t k="v">x</t><t>y</t>'
    "<e/><s>a &amp; b &#233;</s></row>\n<row><![CDATA[<raw>]]><row>inner</row></row></rows>"
)


def _records(data: bytes) -> list[str]:
    return [record for _, record in xml_format.records(data, options=_OPTIONS)]


@pytest.mark.parametrize(
    "prolog",
    [
        '<?xml version="1.0"?>',
        '<?xml version="1.0" encoding="UTF-8"?>',
        '<?xml version="1.0" encoding="ISO-8859-1"?>',
    ],
)
def test_a_document_gives_the_same_records_with_a_dtd_or_without(prolog: str) -> None:
    encoding = "latin-1" if "8859" in prolog else "utf-8"
    plain = (prolog + _DOCUMENT).encode(encoding)
    with_dtd = (prolog + "<!DOCTYPE rows>" + _DOCUMENT).encode(encoding)
    assert _records(plain) == _records(with_dtd)
    assert len(_records(plain)) == 2


@pytest.mark.parametrize(
    "data",
    [
        _BOMB.encode(),
        _BOMB.encode("utf-16"),  # "<!DOCTYPE" in other bytes: defusedxml all the same
        _BOMB.encode("utf-16-le"),
        b'<?xml version="1.0" encoding="cp500"?>' + _BOMB.encode("cp500"),
        b'<?xml version="1.0" encoding="UTF-16"?>' + _BOMB.encode("utf-16-le"),
    ],
    ids=["utf-8", "utf-16", "utf-16 without bom", "ebcdic", "utf-16 declared"],
)
def test_an_entity_is_never_expanded_whatever_the_encoding(data: bytes) -> None:
    assert not xml_format._without_dtd(data)
    with pytest.raises(CorruptData):
        _records(data)


def test_only_ascii_based_documents_without_a_doctype_take_the_c_parser() -> None:
    assert xml_format._without_dtd(b"<r/>")
    assert xml_format._without_dtd(b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?><r/>')
    assert not xml_format._without_dtd(b'<?xml version="1.0" encoding="latin-1"?><r/>')
    assert not xml_format._without_dtd(b"<!DOCTYPE r><r/>")


@pytest.mark.parametrize("prolog", ["", '<?xml version="1.0"?><!DOCTYPE rows>'])
def test_a_record_nested_past_the_depth_limit_is_corrupt_data_not_a_stack_overflow(prolog: str) -> None:
    # 50,000 levels exhausted Python's stack while the record was built: the batch failed at every retry
    options = xml_format.XmlOptions(row_tag="r")
    for depth in (xml_format.MAX_DEPTH, 50_000):
        nested = b"<n>" * depth + b"x" + b"</n>" * depth
        with pytest.raises(CorruptData, match="nested deeper than 256 elements"):
            list(
                xml_format.records(prolog.encode() + b"<rows><r>" + nested + b"</r></rows>", options=options)
            )
    fits = b"<n>" * (xml_format.MAX_DEPTH - 1) + b"x" + b"</n>" * (xml_format.MAX_DEPTH - 1)
    assert len(list(xml_format.records(b"<rows><r>" + fits + b"</r></rows>", options=options))) == 1
