"""Helpers shared by the exchange unit tests."""

from __future__ import annotations


class Dest:
    """A stand-in binding destination (a queue or an exchange) with just what exchanges use."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.bound_to: set = set()

    def __repr__(self) -> str:
        return self.name
