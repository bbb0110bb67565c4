"""Canonical JSON (RFC 8785-style: sorted keys, no insignificant whitespace) and hashes over it."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def args_hash(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical(value).encode("utf-8")).hexdigest()


def same_json(a: Any, b: Any) -> bool:
    return canonical(a) == canonical(b)
