"""User-facing errors.

A ``UserError`` is bad input or an unreachable dependency that a person can fix: the CLI prints
its message as one paragraph (what was wrong, what to do) and exits with code 2, having written
nothing. Everything else is a bug and gets a traceback.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input or environment, explained for the person who can fix it.

    Args:
        what: what was wrong, naming the file, field, series or URL.
        fix: what to do about it.
    """

    exit_code = 2

    def __init__(self, what: str, fix: str = "") -> None:
        self.what = what.strip()
        self.fix = fix.strip()
        super().__init__(self.message)

    @property
    def message(self) -> str:
        return f"{self.what} {self.fix}".strip()


class DataError(UserError):
    """A series or trace that cannot be used as it is (NaNs, gaps, disorder, too short)."""


class ConfigError(UserError):
    """A malformed policy or settings file."""


def hide_password(text: str) -> str:
    """``text`` (a URL, or a message quoting one) with every URL's password as ``***``:
    ``http://admin:pw@host`` -> ``http://admin:***@host``. Shared by the database (storage) and
    Prometheus messages: a password written in a URL must never reach a log, an error or a status."""
    import re

    return re.sub(r"(\w[\w+.-]*://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)
