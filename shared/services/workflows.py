"""Workflow definitions a tenant registers (the CLI and tests use this; fixtures are seeded globally)."""

from __future__ import annotations

from typing import Any

from shared.engine.registry import NODE_TYPES
from shared.engine.workflow import DefinitionError, load_workflow
from shared.errors import ValidationError
from shared.ports import Ports


def register_workflow(ports: Ports, tenant: str, doc: Any) -> str:
    """Validate then store a definition under the tenant; a bad one is refused, never stored."""
    try:
        wf = load_workflow(doc, set(NODE_TYPES))
    except DefinitionError as exc:
        raise ValidationError(f"The workflow definition cannot run: {exc}.") from exc
    ports.host.put_item(f"WORKFLOW#{tenant}", wf.id, doc)
    return wf.id
