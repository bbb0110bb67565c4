"""Opaque list cursors (``GET /runs``, ``GET /webhooks``, ``GET .../eval-suites``): a page's start key, MAC'd for
the tenant it was minted for.

A cursor is base64url of ``{"k": <start key>, "m": HMAC-SHA-256(cursor secret, tenant + key)}``. A listing names the
exact key members it pages by, so a cursor minted by one listing (or for another tenant, or by another deployment)
is refused by every other: ``400 validation_error`` with one fixed message, whatever was wrong with it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from typing import Any

from shared.errors import ValidationError
from shared.ports import Ports

CURSOR_RE = re.compile(r"^[A-Za-z0-9_-]{8,2048}$")


def _mac(ports: Ports, tenant: str, key: dict[str, Any]) -> str:
    """HMAC-SHA-256 over (tenant, start key) under the deployment's cursor secret (one read per cold start)."""
    secret = ports.secrets.get_secret(ports.settings.cursor_secret_id).encode("utf-8")
    body = json.dumps(key, separators=(",", ":"), sort_keys=True)
    return hmac.new(secret, f"{tenant}\n{body}".encode(), hashlib.sha256).hexdigest()


def mint_cursor(ports: Ports, tenant: str, key: dict[str, str]) -> str:
    raw = json.dumps({"k": key, "m": _mac(ports, tenant, key)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def read_cursor(ports: Ports, tenant: str, cursor: str, members: frozenset[str]) -> dict[str, str]:
    """The start key (exactly ``members``, all strings) of a cursor this deployment minted for this tenant;
    anything else is ``400``."""
    bad = ValidationError("The cursor was not minted by this host.")
    if len(cursor) > 2048 or not CURSOR_RE.match(cursor):
        raise bad
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, RecursionError) as exc:  # bad base64, UTF-8 or JSON; JSON nested too deep
        raise bad from exc
    if not isinstance(raw, dict) or set(raw) != {"k", "m"} or not isinstance(raw["m"], str):
        raise bad
    key = raw["k"]
    if not isinstance(key, dict) or set(key) != members or not all(isinstance(v, str) for v in key.values()):
        raise bad
    if not hmac.compare_digest(raw["m"].encode("utf-8"), _mac(ports, tenant, key).encode("utf-8")):
        raise bad
    return key


def page_start(ports: Ports, tenant: str, params: dict[str, str], members: frozenset[str]) -> dict[str, str] | None:
    """The start key the ``cursor`` query parameter of a listing names, or None without one; refused as ``GET /runs``
    refuses it: an empty cursor is not valid, and any other this host did not mint for the tenant is not minted."""
    if "cursor" not in params:
        return None
    if not params["cursor"]:
        raise ValidationError("The cursor is not valid.")
    return read_cursor(ports, tenant, params["cursor"], members)
