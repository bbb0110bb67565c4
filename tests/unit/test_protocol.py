"""Ids, codes and the error tree against the client's generated registry."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openwop_client._generated import ERROR_CODE_HTTP_STATUS
from openwop_client.wire_id import project_id as client_project

from shared import errors
from shared.protocol import codes
from shared.protocol.ids import BadIdError, decode_run_id, project_id, unproject_id


@given(st.text(min_size=1, max_size=40))
def test_projection_round_trips_and_matches_the_client(value):
    wire = project_id(value)
    assert unproject_id(wire) == value
    if "/" in value:
        assert wire == client_project(value)


def test_both_escape_forms_decode():
    assert (
        decode_run_id("acme~2Fr-0123456789abcdef")
        == decode_run_id("acme%2Fr-0123456789abcdef")
        == "acme/r-0123456789abcdef"
    )


@pytest.mark.parametrize("wire", ["acme~2", "acme~ZZr-0123456789abcdef", "acme~2Fshort", "noslash0123456789abc"])
def test_bad_ids_are_refused(wire):
    with pytest.raises(BadIdError):
        decode_run_id(wire)


def _all_error_classes():
    out = []
    stack = [errors.ProtocolError]
    while stack:
        cls = stack.pop()
        out.append(cls)
        stack.extend(cls.__subclasses__())
    return out


def test_every_registered_code_has_the_registry_status():
    # Our own decisions (eval_recorded_fixtures_gone, the vendor 405 and 409 codes) are the codes the registry lacks.
    for code, status in codes.HTTP_STATUS.items():
        if code == codes.EVAL_RECORDED_FIXTURES_GONE:
            assert code not in ERROR_CODE_HTTP_STATUS and status == 410
            continue
        if code == codes.NO_ACTIVE_DEPLOYMENT:  # named by RFC 0082 and the client (400), absent from its registry
            assert code not in ERROR_CODE_HTTP_STATUS and status == 400
            continue
        vendor = {codes.METHOD_NOT_ALLOWED: 405, codes.NO_PREVIOUS_DEPLOYMENT: 409}  # decisions 0047, 0111
        vendor[codes.AGENT_RUNTIME_MISMATCH] = 409  # decision 0143
        if code in vendor:
            assert code not in ERROR_CODE_HTTP_STATUS and status == vendor[code]
            assert re.fullmatch(r"(?!openwop\.)[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9_]*", code)
            continue
        assert ERROR_CODE_HTTP_STATUS[code] == status, code


def test_every_error_class_maps_to_a_status():
    for cls in _all_error_classes():
        assert cls.code in codes.HTTP_STATUS, cls


def test_uniform_refusal_is_fixed_bytes():
    a, b = errors.UnusableReferenceError().envelope(), errors.UnusableReferenceError().envelope()
    assert a == b == {"error": "validation_error", "message": errors.UnusableReferenceError.default_message}
