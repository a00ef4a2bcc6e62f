"""Commit notifications: one message per data commit of a target, at least once, in version order."""
