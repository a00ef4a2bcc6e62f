"""The configuration reference (docs/configuration.md), generated from the key declarations.

Regenerate after changing a key: `.venv/bin/python -m s3events.config.docs > docs/configuration.md`
"""

from __future__ import annotations

import sys
from typing import Any

from s3events.config.keys import COMMANDS, INGEST_TARGETS, REGISTRY
from s3events.config.registry import PLACEHOLDER, PREFIX, Key

REGENERATE = ".venv/bin/python -m s3events.config.docs > docs/configuration.md"

_INTRO = f"""\
# Configuration reference

<!-- Generated from s3events/config/keys.py; do not edit. Regenerate with:
     {REGENERATE} -->

Every command (`s3events capture|ingest|backfill|status`) reads a Java-style `.properties` file
(`--props FILE`) plus repeatable `--conf key=value` overrides; an override wins over the file.
`conf/s3events.properties` lists every key with its default.

- **Keys** all start with `{PREFIX}`. An unknown key is an error (with a did-you-mean), not ignored; so
  is a key set twice in one file.
- **Values** are trimmed. An empty value means *unset*: the default applies. Lists are comma-separated
  (items trimmed, empty items dropped). Booleans are `true`/`false` only. Choices ignore letter case.
- **Environment variables**: `${{VAR}}` is replaced by the variable (an unset variable is an error),
  `${{VAR:-default}}` by the variable or, when it is unset or empty, the default; `$${{` is a literal `${{`.
- **Per-target keys** `s3events.ingest.target.{PLACEHOLDER}.*` configure each name listed in
  `{INGEST_TARGETS.name}` (names match `[A-Za-z0-9_-]+`); a key for an unlisted name is an error.
- **Table paths** are `s3://bucket/prefix` or a local path. `s3a://` and other schemes are rejected:
  delta-rs writes the tables, not Spark.
- **Required for** names the commands that refuse to start without the key
  ({", ".join(f"`{command}`" for command in COMMANDS)}).
- **Credentials** are never read from properties files: they come from the AWS credential chain
  (environment variables, a profile, an instance or container role). Keys declared secret would be
  logged as `***`.
"""


def _cell(text: str) -> str:
    """Plain text in a table cell: no table breaks, no accidental HTML tags or emphasis."""
    text = text.replace("|", "\\|").replace("\n", " ")
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")


def _code(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`" if text else ""


def _default(key: Key[Any]) -> str:
    if key.default_text:
        return _code(key.default_text) + " (derived)"
    text = key.default_display()
    if text:
        return _code(text)
    if key.default == "":
        return '`""`'
    if key.default is not None:
        return "*(empty)*"
    return "*(unset)*"


def _row(key: Key[Any]) -> str:
    required = ", ".join(command for command in COMMANDS if command in key.required_for)
    cells = [
        _code(key.name),
        key.type.type_name,
        _default(key),
        _cell(key.allowed),
        required,
        _cell(key.doc) + (" *(secret: logged as `***`)*" if key.secret else ""),
    ]
    return "| " + " | ".join(cells) + " |"


def render_reference() -> str:
    """The Markdown reference: the rules above, then one table per key group, in declaration order."""
    groups: dict[str, list[Key[Any]]] = {}
    for key in REGISTRY:
        groups.setdefault(key.group, []).append(key)
    parts = [_INTRO]
    for group, members in groups.items():
        parts.append(f"\n## {group}\n\n")
        parts.append("| Key | Type | Default | Allowed | Required for | Description |\n")
        parts.append("|---|---|---|---|---|---|\n")
        parts.extend(_row(key) + "\n" for key in members)
    if REGISTRY.removed:
        parts.append(
            "\n## Removed keys\n\nSetting one fails at start-up (exit 2), naming the key and why.\n\n"
        )
        parts.append("| Key | Why it was removed |\n|---|---|\n")
        parts.extend(f"| {_code(gone.name)} | {_cell(gone.why)}. |\n" for gone in REGISTRY.removed)
    return "".join(parts)


def main() -> None:
    sys.stdout.write(render_reference())


if __name__ == "__main__":
    main()
