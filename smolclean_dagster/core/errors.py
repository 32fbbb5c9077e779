"""The one error hierarchy of smolclean: every message names the file, setting or chunk and what to do."""

from __future__ import annotations


class SmolcleanError(Exception):
    """Base of every error smolclean raises on purpose."""


class DropReadError(SmolcleanError):
    """A drop (input file) could not be read; the message names the file and the reason."""


class SettingsError(SmolcleanError):
    """A setting is missing or invalid; the message names the setting."""


class RegistryError(SmolcleanError):
    """The stored registry could not be read or written; the message names the file."""


class ExportError(SmolcleanError):
    """The cleaning module could not be rendered or did not pass its checks."""


class AnalystError(SmolcleanError):
    """The analyst could not be used at all (our fault or the configuration's, never the model's)."""


class LabelError(SmolcleanError):
    """A file of labelled rows is not the drop's; the message names the file, the row and the column."""
