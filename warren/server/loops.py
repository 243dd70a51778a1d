"""Event-loop choice: uvloop when it is installed, the standard asyncio loop otherwise."""

from __future__ import annotations

import asyncio

__all__ = ["new_event_loop", "LOOPS"]

LOOPS = ("auto", "uvloop", "asyncio")


def new_event_loop(name: str = "auto") -> asyncio.AbstractEventLoop:
    if name in ("auto", "uvloop"):
        try:
            import uvloop
        except ImportError:
            if name == "uvloop":
                raise
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()
