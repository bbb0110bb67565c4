"""Tool names on the wire. Catalog tool ids (``acme.crm:lookup``) do not fit the providers' tool-name grammar
(``^[a-zA-Z0-9_-]{1,64}$`` for both Bedrock and OpenAI), so each request maps catalog names to wire names and the
answer's names back. The mapping is a pure function of the request's tool list: the same request always gets the
same wire names (the model-call log and replay depend on that)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

_SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:8]


def wire_name(name: str) -> str:
    """A wire-safe name for one catalog name: unchanged when already safe, else sanitized plus a short digest."""
    if _SAFE.match(name):
        return name
    base = _UNSAFE_CHARS.sub("_", name)[:55] or "tool"
    return f"{base}_{_digest(name)}"


class ToolNames:
    """Catalog name <-> wire name for one request."""

    def __init__(self, names: Iterable[str]) -> None:
        self._to_wire: dict[str, str] = {}
        self._to_catalog: dict[str, str] = {}
        for name in names:
            self.to_wire(name)

    def to_wire(self, name: str) -> str:
        if name not in self._to_wire:
            wire = wire_name(name)
            if wire in self._to_catalog and self._to_catalog[wire] != name:  # two catalog names, one safe spelling
                wire = f"{wire[:55]}_{_digest(name)}"
            self._to_wire[name] = wire
            self._to_catalog[wire] = name
        return self._to_wire[name]

    def to_catalog(self, wire: str) -> str:
        """The catalog name a wire name stands for; an unknown name is returned as the model spelled it (the
        caller refuses tools outside the allowlist)."""
        return self._to_catalog.get(wire, wire)
