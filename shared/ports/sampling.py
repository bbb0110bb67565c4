"""Sampling rules of eval suites and the drafts they fill (tasks sampled from production runs)."""

from __future__ import annotations

from typing import Any, Protocol


class SamplingRuleRepository(Protocol):
    def list_rules(self, tenant: str, suite_id: str | None = None, *, consistent: bool = False) -> list[dict[str, Any]]:
        """The tenant's rules (of one suite when ``suite_id`` is given), in (suiteId, ruleId) order."""
        ...

    def put_rule(self, tenant: str, rule: dict[str, Any]) -> bool:
        """Store a new rule (keyed by its ``suiteId`` and ``ruleId``); False when one is stored under its key."""
        ...

    def delete_rule(self, tenant: str, suite_id: str, rule_id: str) -> bool:
        """True when the rule existed."""
        ...


class SuiteDraftRepository(Protocol):
    """One draft per (tenant, suiteId): ``{suiteId, targetAgentId, tasks}``, changed by compare-and-set only."""

    def get_draft(self, tenant: str, suite_id: str) -> dict[str, Any] | None: ...
    def put_draft(
        self,
        tenant: str,
        suite_id: str,
        doc: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool:
        """Store the draft only if absent, or only while it still equals ``if_equals``; False otherwise."""
        ...

    def get_ref(self, suite_id: str) -> str:
        """The draft's suite reference (``<suiteId>@draft``: what a source run's suite link names)."""
        ...
