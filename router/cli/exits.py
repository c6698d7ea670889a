"""Exit codes of every ``subroute`` command, one meaning each (README "Exit codes")."""

from __future__ import annotations

OK = 0
DIFFERENT = 1  # `config diff`: the file and the config topic differ (as diff(1) says it)
INVALID = 2  # a usage error or input refused: flags, YAML, expressions, an app or group that does not exist
KAFKA = 3  # Kafka failed or refused (unreachable, timed out, a concurrent change): nothing was done; retry
INTERRUPTED = 130  # SIGINT
