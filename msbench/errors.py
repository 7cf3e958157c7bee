"""Errors a user can fix: the CLI turns them into one line on stderr and exit code 2."""

from __future__ import annotations


class UserError(Exception):
    """A mistake in the user's input (not a bug): shown as one line, no traceback."""


class ConfigError(UserError, ValueError):
    """A bad value in a settings, matrix or profile file: names where, what was given and what is allowed."""

    def __init__(self, field: str, value: object, allowed: str, where: str = "", rule: str = "") -> None:
        self.field, self.value, self.allowed, self.where, self.rule = field, value, allowed, where, rule
        prefix = f"{where}: " if where else ""
        why = f" ({rule})" if rule else ""
        super().__init__(f"{prefix}{field}={value!r} is not allowed{why}; allowed: {allowed}")
