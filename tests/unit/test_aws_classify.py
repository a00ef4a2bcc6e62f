"""botocore errors become fatal or transient in one line (`aws.classify`)."""

from __future__ import annotations

import botocore.exceptions

from s3events.errors import FatalError, TransientError
from s3events.infra import aws

# What botocore makes of an XML error answer to a JSON-protocol call (SQS): no code, the body as message.
_UNPARSED = (
    '<?xml version="1.0" encoding="utf-8"?>\n<ErrorResponse><Errors><Error><Code>InvalidClientTokenId</Code>'
    "<Message>The security token included in the request is invalid.</Message><Type>Sender</Type></Error>"
    "</Errors></ErrorResponse>"
)


def _client_error(code: str, message: str, status: int) -> botocore.exceptions.ClientError:
    response = {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return botocore.exceptions.ClientError(response, "ReceiveMessage")  # type: ignore[arg-type]


def test_an_error_body_botocore_could_not_parse_is_read_for_its_code_and_said_in_one_line():
    error = aws.classify(_client_error("403", _UNPARSED, 403), action="receiving from q")
    assert isinstance(error, FatalError)
    assert str(error) == (
        "receiving from q: the access key is not valid (InvalidClientTokenId: The security token included "
        "in the request is invalid.)"
    )


def test_a_multi_line_message_is_said_in_one_line():
    error = aws.classify(_client_error("ServiceUnavailable", "down\nfor a\nmoment", 503), action="x")
    assert isinstance(error, TransientError) and "\n" not in str(error)
