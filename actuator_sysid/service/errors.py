"""Errors of the service's stores, raised by the repository and the artifact store alike."""

from __future__ import annotations


class NotFoundError(LookupError):
    """A dataset or fit id that does not exist (or belongs to another project); the message names it."""
