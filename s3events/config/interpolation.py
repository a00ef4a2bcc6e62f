"""`${VAR}` / `${VAR:-default}` references to environment variables inside property values.

- `${VAR}`: the variable's value (it must be set; an empty value is used as it is).
- `${VAR:-default}`: the variable's value, or `default` when it is unset or empty (as in the shell).
- `$${`: a literal `${`.
Anything else starting with `${` is an error, so a typo never reaches a value silently.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from s3events.errors import ConfigError

_TOKEN = re.compile(r"\$\$\{|\$\{(?P<body>[^}]*)\}|\$\{")
_BODY = re.compile(r"(?P<var>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>.*))?", re.DOTALL)


def interpolate(value: str, *, key: str, env: Mapping[str, str]) -> str:
    """Replace the environment references in `value` (the value of `key`, named in errors)."""

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "$${":
            return "${"
        body = match.group("body")
        if body is None:
            raise ConfigError(key, f"unterminated '${{' in {value!r}; write $${{ for a literal '${{'")
        parsed = _BODY.fullmatch(body)
        if parsed is None:
            raise ConfigError(
                key, f"bad reference {token!r}; use ${{VAR}} or ${{VAR:-default}} (VAR: letters, digits, _)"
            )
        var, default = parsed.group("var"), parsed.group("default")
        current = env.get(var)
        if default is not None:
            return current if current else default
        if current is None:
            raise ConfigError(
                key,
                f"environment variable {var} is not set (referenced as ${{{var}}}); set it, or give a "
                f"default with ${{{var}:-default}}",
            )
        return current

    return _TOKEN.sub(replace, value)
