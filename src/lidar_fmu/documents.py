"""The user's YAML/JSON documents (sensor specs, calibrations, scenarios, sweeps, material files), read within bounds.

:func:`read_document` (a file) and :func:`parse_document` (inline text) refuse, in one line naming the file
and, where it has one, the line and column:

* a file larger than :data:`MAX_YAML_BYTES` / :data:`MAX_JSON_BYTES` (checked before parsing), text that is
  not UTF-8 or holds a NUL byte (a binary file given by mistake);
* nesting deeper than :data:`MAX_DEPTH` (checked as it is read: a 20,000-deep ``[[[[…`` stops at level 65,
  never reaching Python's recursion limit);
* YAML whose aliases would add more than :data:`MAX_ALIAS_NODES` nodes (a "billion laughs" file of a few
  hundred bytes expands to 10⁸ nodes when printed or turned into an array), an alias inside its own anchor,
  and YAML of more than :data:`MAX_YAML_NODES` nodes;
* syntax errors (YAML and JSON).

:func:`refuse_unknown_keys` is the one check of a mapping's keys against those it may have. :func:`shown` writes a
value into an error message, at most :data:`SHOWN_CHARS` characters however large it is; :func:`one_line` bounds a
whole message. This module imports nothing of the package but the errors, so every
layer can use it.
"""
from __future__ import annotations

import difflib
import json
import os
import re
import reprlib
from collections.abc import Collection, Mapping
from typing import Any

from .errors import LidarFmuError, brief

#: YAML is parsed in pure Python (PyYAML's SafeLoader: about 20 µs and 1 kB a node), so its files stay small; the
#: largest files a sensor takes (a 128-laser calibration, a unit's metadata) are tens of kB
MAX_YAML_BYTES = 4 * 2**20
MAX_YAML_NODES = 200_000
#: JSON is parsed in C (16 MiB: ~0.3 s); a pattern of angle pairs or a material's spectrum may be large
MAX_JSON_BYTES = 16 * 2**20
#: no document here nests deeper than ~6 levels (a robot config: sensors → entry → origin → …)
MAX_DEPTH = 64
#: nodes YAML aliases may add: anchors reuse a few blocks of settings, never expand a file a thousandfold
MAX_ALIAS_NODES = 10_000
#: longest value an error message shows
SHOWN_CHARS = 80
#: longest error line built here (a path and a reason)
MESSAGE_CHARS = 600
#: unknown keys an error message names (a hostile file's thousands of keys are neither each shown nor compared)
UNKNOWN_KEYS_SHOWN = 5
#: the known keys are listed while they fit in this many characters; longer lists (a sensor spec's ~50 keys) leave
#: the reader with the "did you mean" hints and the docs
KNOWN_KEYS_CHARS = 300

_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxtuple, _SHORT.maxdict = 3, 6, 6, 4
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = SHOWN_CHARS - 20, SHOWN_CHARS - 20, 40


def shown(value: Any) -> str:
    """``repr(value)`` of at most :data:`SHOWN_CHARS` characters: nested and long values elided (``…``), never
    expanded whole (a value of 10⁸ items costs as little as a short one)."""
    text = _SHORT.repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 1] + "…"


def one_line(message: str, limit: int = MESSAGE_CHARS) -> str:
    """``message`` on one line, cut to ``limit`` characters (:func:`lidar_fmu.errors.brief`)."""
    return brief(str(message), limit)


def refuse_unknown_keys(mapping: Mapping[Any, Any], known: Collection[str], what: str,
                        error: type[Exception] = LidarFmuError) -> None:
    """``error`` with one line if ``mapping`` has a key not in ``known``; ``what`` names what is read (a file, a key
    path). The line names the unknown keys (at most :data:`UNKNOWN_KEYS_SHOWN`, each bounded by :func:`shown`),
    each with the known key it resembles, and lists the known keys (in their given order; a set's sorted)::

        weather: unknown key 'rain_mm_hr' (did you mean 'rain_mm_h'?); known: fog_visibility_m, rain_mm_h, …
    """
    unknown = [key for key in mapping if key not in known]
    if not unknown:
        return
    names = sorted(known) if isinstance(known, (set, frozenset)) else list(known)
    named = []
    for key in sorted(unknown, key=str)[:UNKNOWN_KEYS_SHOWN]:
        text = str(key)
        close = difflib.get_close_matches(text, names, n=1, cutoff=0.6) if len(text) <= SHOWN_CHARS else []
        named.append(f"{shown(key)} (did you mean {close[0]!r}?)" if close else shown(key))
    more = f" and {len(unknown) - UNKNOWN_KEYS_SHOWN} more" if len(unknown) > UNKNOWN_KEYS_SHOWN else ""
    listed = ", ".join(names)
    known_text = f"; known: {listed}" if len(listed) <= KNOWN_KEYS_CHARS else ""
    plural = "s" if len(unknown) > 1 else ""
    raise error(one_line(f"{what}: unknown key{plural} {', '.join(named)}{more}{known_text}"))


def strip_json_comments(text: str) -> str:
    """JSONC (Project AirSim's config files) → JSON: ``//`` and ``/* */`` comments outside strings removed."""
    return re.sub(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/',
                  lambda m: m.group(0) if m.group(0).startswith('"') else "", text, flags=re.DOTALL)


def syntax_of(path: str) -> str:
    """``json``, ``jsonc`` or ``yaml`` by the file's extension (anything but .json/.jsonc is read as YAML)."""
    lower = path.lower()
    return "jsonc" if lower.endswith(".jsonc") else "json" if lower.endswith(".json") else "yaml"


def read_text(path: str | os.PathLike[str], what: str, error: type[Exception] = LidarFmuError, *,
              limit: int = MAX_JSON_BYTES) -> str:
    """The UTF-8 text of the file ``path``, at most ``limit`` bytes; ``error`` with one line ``cannot read {what}
    {path}: …`` for an unreadable or larger file, text that is not UTF-8, or a NUL byte (a binary file)."""
    path = os.fspath(path)
    where = f"{what} {path}"
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)  # never more than the limit and one byte, whatever the file's size
    except OSError as exc:
        raise error(one_line(f"cannot read {where}: {exc.strerror or exc}")) from None
    if len(data) > limit:
        raise error(one_line(f"cannot read {where}: larger than the limit of {limit / 2**20:g} MiB"))
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(one_line(f"cannot read {where}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                             f"{exc.start})")) from None
    _refuse_nul(text, where, error)
    return text


def _refuse_nul(text: str, where: str, error: type[Exception]) -> None:
    """One line naming the first NUL character of ``text``, if it has one: a binary file, not text."""
    nul = text.find("\x00")
    if nul >= 0:
        line, column = _position(text, nul)
        raise error(one_line(f"cannot read {where}: a NUL byte at line {line}, column {column} (a binary file, "
                             "not text)"))


def read_document(path: str | os.PathLike[str], what: str, error: type[Exception] = LidarFmuError, *,
                  syntax: str | None = None) -> Any:
    """The parsed document in the file ``path`` (``syntax``: ``json``, ``jsonc``, ``yaml``; None: by extension).

    Raises ``error`` with one line ``cannot read {what} {path}: …`` on any of the refusals in the module doc, and
    on an unreadable file.
    """
    path = os.fspath(path)
    syntax = syntax or syntax_of(path)
    limit = MAX_YAML_BYTES if syntax == "yaml" else MAX_JSON_BYTES
    # read_text has bounded the size and refused NUL bytes
    return _parse(read_text(path, what, error, limit=limit), f"{what} {path}", error, syntax)


def parse_document(text: str, where: str, error: type[Exception] = LidarFmuError, *, syntax: str = "yaml") -> Any:
    """The document in ``text`` (``where`` names it in messages), bounded as :func:`read_document` reads files."""
    limit = MAX_YAML_BYTES if syntax == "yaml" else MAX_JSON_BYTES
    if len(text) > limit:
        raise error(one_line(f"cannot read {where}: longer than the limit of {limit // 2**20} MiB"))
    _refuse_nul(text, where, error)
    return _parse(text, where, error, syntax)


def _parse(text: str, where: str, error: type[Exception], syntax: str) -> Any:
    """:func:`parse_document` after its size and NUL checks: YAML, or JSON (``jsonc``: comments first) under
    :data:`MAX_DEPTH`."""
    if syntax == "yaml":
        return _parse_yaml(text, where, error)
    if syntax == "jsonc":
        text = strip_json_comments(text)
    depth, at = _json_depth(text)
    if depth > MAX_DEPTH:
        line, column = _position(text, at)
        raise error(one_line(f"cannot read {where}: nested deeper than {MAX_DEPTH} levels at line {line}, "
                             f"column {column}"))
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(one_line(f"cannot read {where}: {exc.msg} at line {exc.lineno}, column {exc.colno}")) from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise error(one_line(f"cannot read {where}: {exc}")) from None


def _position(text: str, index: int) -> tuple[int, int]:
    """(line, column), both from 1, of character ``index``."""
    line_start = text.rfind("\n", 0, index) + 1
    return text.count("\n", 0, index) + 1, index - line_start + 1


def _json_depth(text: str) -> tuple[int, int]:
    """(deepest nesting of ``[`` / ``{`` outside strings, the character index where it first passes
    :data:`MAX_DEPTH`, else 0), without parsing."""
    import numpy as np

    # strings become blanks of their own length, so an index still points into ``text``; brackets are ASCII, and
    # UTF-8 never uses ASCII bytes inside a multi-byte character
    blanked = re.sub(r'"(?:\\.|[^"\\])*"', lambda m: " " * len(m.group(0)), text).encode("utf-8")
    codes = np.frombuffer(blanked, dtype=np.uint8)
    step = ((codes == ord("[")) | (codes == ord("{"))).astype(np.int8) - (
        (codes == ord("]")) | (codes == ord("}"))).astype(np.int8)
    depth = np.cumsum(step, dtype=np.int64)
    deepest = int(depth.max()) if len(depth) else 0
    if deepest <= MAX_DEPTH:
        return deepest, 0
    at_byte = int(np.argmax(depth > MAX_DEPTH))
    return deepest, len(blanked[:at_byte].decode("utf-8", errors="ignore"))


def _parse_yaml(text: str, where: str, error: type[Exception]) -> Any:
    import yaml

    try:
        loader = _bounded_loader()(text)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "malformed YAML"
        raise error(one_line(f"cannot read {where}: {problem}{at}")) from None
    except (yaml.YAMLError, ValueError, TypeError) as exc:  # the constructors' int()/float() on odd scalars
        raise error(one_line(f"cannot read {where}: {exc}")) from None


_LOADER: type | None = None


def _bounded_loader() -> type:
    """A SafeLoader that counts what it composes: depth, nodes, and the nodes each alias stands for."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    import yaml
    from yaml.composer import ComposerError

    class BoundedSafeLoader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.depth = 0
            self.nodes = 0  # composed, aliases counted as the nodes they stand for
            self.alias_nodes = 0
            self.expanded: dict[int, int] = {}  # id(node) → nodes it stands for, once composed

        def compose_node(self, parent, index):
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                node = super().compose_node(parent, index)
                size = self.expanded.get(id(node))
                if size is None:
                    raise ComposerError(None, None, f"alias *{shown(event.anchor)[1:-1]} lies inside its own anchor",
                                        event.start_mark)
                self.alias_nodes += size
                self.nodes += size
                if self.alias_nodes > MAX_ALIAS_NODES:
                    raise ComposerError(None, None, f"aliases expand to more than {MAX_ALIAS_NODES:,} nodes "
                                        "(nested aliases that multiply a document are refused)", event.start_mark)
                return node
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
            before = self.nodes
            try:
                node = super().compose_node(parent, index)
            finally:
                self.depth -= 1
            self.nodes += 1
            if self.nodes > MAX_YAML_NODES:
                raise ComposerError(None, None, f"more than {MAX_YAML_NODES:,} YAML nodes (larger data: JSON)",
                                    event.start_mark)
            self.expanded[id(node)] = self.nodes - before
            return node

    _LOADER = BoundedSafeLoader
    return _LOADER


__all__ = ["MAX_ALIAS_NODES", "MAX_DEPTH", "MAX_JSON_BYTES", "MAX_YAML_BYTES", "MAX_YAML_NODES", "one_line",
           "parse_document", "read_document", "read_text", "refuse_unknown_keys", "shown", "strip_json_comments",
           "syntax_of"]
