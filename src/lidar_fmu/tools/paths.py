"""The command line's paths checked before any work: an output's folder, a preview's format, an FMU, an environment."""
from __future__ import annotations

import os
import zipfile

from ..errors import UserError


def check_preview_path(path: str) -> None:
    """A preview path matplotlib can write (``.png``, ``.pdf``, ``.svg``…): checked before any work."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext and ext not in formats:
        raise UserError(f"preview {path!r} must end in .png or another image format ({', '.join(sorted(formats))})")


def check_fmu_path(path: str) -> None:
    """An FMU (a zip archive with a modelDescription.xml) at ``path``: checked before any work."""
    if not os.path.isfile(path):
        raise UserError(f"FMU not found: {path}")
    if not zipfile.is_zipfile(path):
        raise UserError(f"{path} is not an FMU (not a zip archive)")
    with zipfile.ZipFile(path) as archive:
        if "modelDescription.xml" not in archive.namelist():
            raise UserError(f"{path} is not an FMU (no modelDescription.xml)")


def check_output_folder(path: str, what: str) -> None:
    """The folder ``path`` goes into exists and is writable: checked before any work, not after a cast."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UserError(f"{what} {path!r}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise UserError(f"{what} {path!r}: folder {folder} is not writable")
    if os.path.isdir(path):
        raise UserError(f"{what} {path!r} is a folder; give a file name")


def check_environment(value: str) -> str:
    """``--environment``: a street style's word (auto, none, urban…), lower-cased, or a mesh file, made absolute
    (a path relative to here, not to the scenario's folder)."""
    import difflib

    from ..world.scene_update import ENVIRONMENT_WORDS

    mode = value.strip().lower()
    if mode in ENVIRONMENT_WORDS:
        return mode
    if not os.path.isfile(value):
        close = difflib.get_close_matches(mode, ENVIRONMENT_WORDS, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UserError(f"--environment {value!r}: no such mesh file ({hint}or say {', '.join(ENVIRONMENT_WORDS)})")
    return os.path.abspath(value)
