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


__all__ = ["LidarFmuError", "UserError"]
