"""Capture: SQS → metadata Delta table. receive → parse → commit → delete, in that order."""
