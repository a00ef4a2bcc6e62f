"""S3 object events: the frozen model and the parser of every message shape that carries them."""
