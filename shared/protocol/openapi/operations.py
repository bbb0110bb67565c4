"""The operation table: every operation the host serves and documents, the one place an operation is added. The
served document lists them in this order and the route table (``shared.manifest.routes``) derives its routes from it,
in the same order."""

from __future__ import annotations

from shared.protocol.openapi import discovery, evals, gateway, registrations, runs
from shared.protocol.openapi.operation import Op

OPERATIONS: tuple[Op, ...] = (
    *discovery.DISCOVERY,
    *runs.RUNS,
    *evals.EVAL_RUNS,
    *discovery.VIEWER,
    *registrations.WORKFLOW_READ,
    *discovery.EFFECT_SEAMS,
    *evals.EVAL_SUITES,
    *registrations.TOOLS,
    *registrations.CREDENTIALS,
    *registrations.AGENTS,
    *registrations.WORKFLOWS,
    *runs.BULK_CANCEL_AND_INTERRUPTS,
    *registrations.WEBHOOKS,
    *gateway.SESSIONS,
    *gateway.GATEWAY,
)
