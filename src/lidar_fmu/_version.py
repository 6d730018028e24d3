"""The one version source: pyproject.toml, the FMU's model description and the file writers read it."""
__version__ = "0.1.0"
