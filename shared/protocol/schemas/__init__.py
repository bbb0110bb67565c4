"""Vendored JSON Schemas (official OpenWOP v2 shapes, and the host's own eval-suite schema)."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any


@lru_cache(maxsize=16)
def load_schema(name: str) -> dict[str, Any]:
    text = resources.files("shared.protocol.schemas").joinpath(name).read_text("utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc
