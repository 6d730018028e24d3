"""The command line's paths checked before any work: an output's folder, a preview's format, an FMU."""
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
