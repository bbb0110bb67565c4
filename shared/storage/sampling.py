"""Sampling rules and suite drafts on the host table: ``SUITERULE#<tenant>`` / ``<suiteId>#<ruleId>``, and the
draft beside the suite's versions, ``SUITE#<tenant>`` / ``<suiteId>@draft`` (stored compressed when large)."""

from __future__ import annotations

from typing import Any

from shared.ports import HostStore
from shared.storage.schema import SUITE_PK_PREFIX

RULE_PK = "SUITERULE#"
DRAFT = "draft"


class DynamoSamplingRuleRepository:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def list_rules(self, tenant: str, suite_id: str | None = None, *, consistent: bool = False) -> list[dict[str, Any]]:
        prefix = f"{suite_id}#" if suite_id is not None else ""
        return [doc for _, doc in self._host.query(RULE_PK + tenant, prefix, consistent=consistent)]

    def put_rule(self, tenant: str, rule: dict[str, Any]) -> bool:
        return self._host.put_item(RULE_PK + tenant, f"{rule['suiteId']}#{rule['ruleId']}", rule, if_absent=True)

    def delete_rule(self, tenant: str, suite_id: str, rule_id: str) -> bool:
        return self._host.delete_item(RULE_PK + tenant, f"{suite_id}#{rule_id}")


class DynamoSuiteDraftRepository:
    def __init__(self, host: HostStore) -> None:
        self._host = host

    def get_draft(self, tenant: str, suite_id: str) -> dict[str, Any] | None:
        return self._host.get_item(f"{SUITE_PK_PREFIX}{tenant}", self.get_ref(suite_id))

    def put_draft(
        self,
        tenant: str,
        suite_id: str,
        doc: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool:
        pk, sk = f"{SUITE_PK_PREFIX}{tenant}", self.get_ref(suite_id)
        return self._host.put_item(pk, sk, doc, if_absent=if_absent, if_equals=if_equals, compress=True)

    def get_ref(self, suite_id: str) -> str:
        return f"{suite_id}@{DRAFT}"
