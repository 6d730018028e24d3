"""The error boundary: every error a user can cause and fix derives from :class:`LidarFmuError`.

The command line prints these (and ``OSError``) as one line and exits with
code 2; anything else is a bug in lidar-fmu and is reported with its
traceback. The FMU slave turns them into an invalid ``SensorData`` and a log
line instead of an FMI error. This module imports nothing of the package, so
every module can import it.
"""
from __future__ import annotations


class LidarFmuError(Exception):
    """Base of the errors caused by input: files, specs, scenarios, options, SensorViews."""


class UserError(LidarFmuError):
    """A command-line argument or scenario file that cannot be used as given."""


#: characters of a message kept where one line reports it (a step's message may carry a whole traceback)
BRIEF_CHARS = 300
#: characters of an error line the command line prints or a report keeps (a spec error is at most 600)
ERROR_LINE_CHARS = 1000


def brief(message: str, limit: int = BRIEF_CHARS) -> str:
    """A message on one line: a traceback shortened to its first line and the exception it ended with, cut to
    ``limit`` characters."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        lines = [lines[0], lines[-1]]
    text = " ".join(" ".join(lines).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = ["BRIEF_CHARS", "ERROR_LINE_CHARS", "LidarFmuError", "UserError", "brief"]
