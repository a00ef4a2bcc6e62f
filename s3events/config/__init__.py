"""Configuration: a Java `.properties` file plus `--conf key=value` overrides, as typed `Settings`.

    from s3events.config import keys, load_settings
    settings = load_settings("conf/s3events.properties", ["s3events.log.level=DEBUG"])
    settings.validate_for("capture")
    queue_url = settings.require(keys.QUEUE_URL)

Every key is declared once in `keys`; docs/configuration.md is generated from those declarations.
"""

from s3events.config import keys
from s3events.config.loader import load_settings
from s3events.config.registry import Key
from s3events.config.settings import Settings

__all__ = ["Key", "Settings", "keys", "load_settings"]
