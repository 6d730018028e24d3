"""argparse types the commands share: whole numbers within a range, refused with the range before any work."""
from __future__ import annotations

import argparse
import sys

#: an OSI identifier's range (``Identifier.value`` is a uint64)
OSI_ID_MAX = 2**64 - 1


def whole_number(minimum: int, maximum: int = sys.maxsize):
    """An argparse type: a whole number in [``minimum``, ``maximum``] (the default maximum: the largest count
    Python slices and iterates by), refused with one line naming the bound."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")
        return value

    return parse
