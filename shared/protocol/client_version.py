"""The client-version floor (versioning.md §1.5, RFC 0172 §A.5, RFC 0219).

A client announces the corpus release it was built against in ``OpenWOP-Client-Version`` (``2.46.32``). The host
advertises ``minClientVersion`` (``<major>.<minor>``) in discovery and refuses a request from a client below it with
``426 client_version_unsupported`` naming the floor. Major and minor are compared as integers; a patch never decides;
a value outside the grammar (``1``, ``01.0``, ``1.0-rc.1``) is treated as absent, and an absent header is served.

The floor is ``2.0``: every client of the protocol's major 2 is served, and a client of an older major, which cannot
speak v2's wire, is told so instead of failing on a shape it does not know.
"""

from __future__ import annotations

import re

MIN_CLIENT_VERSION = "2.0"
HEADER = "openwop-client-version"
_GRAMMAR = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:\.(0|[1-9][0-9]*))?$")


def below_floor_pattern() -> str:
    """A regular expression matching exactly the values ``below_floor`` refuses (the floor's minor is 0, so they are
    the well-formed versions of an older major): what the served OpenAPI document says a valid header is not."""
    major, minor = _major_minor(MIN_CLIENT_VERSION) or (0, 0)
    assert minor == 0, "a floor with a minor needs a longer pattern"
    majors = "|".join(str(n) for n in range(major))
    return rf"^({majors})\.(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))?$"


def _major_minor(text: str) -> tuple[int, int] | None:
    m = _GRAMMAR.match(text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def below_floor(announced: str | None) -> bool:
    """True when ``announced`` (the header's value, or None) is a well-formed version below the floor."""
    if announced is None:
        return False
    version = _major_minor(announced.strip())
    floor = _major_minor(MIN_CLIENT_VERSION)
    return version is not None and floor is not None and version < floor
