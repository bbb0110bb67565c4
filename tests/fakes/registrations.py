"""In-memory registration repositories for unit tests: the ports of ``shared.ports.registrations`` without a
table. Documents are copied in and out (as a store would), so a caller never aliases what is stored."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from typing import Any


class _Partitions:
    """Documents by (tenant, id); listed in id order, like a DynamoDB partition's sort keys."""

    def __init__(self) -> None:
        self._docs: dict[str, dict[str, dict[str, Any]]] = {}

    def get(self, tenant: str, key: str) -> dict[str, Any] | None:
        doc = self._docs.get(tenant, {}).get(key)
        return copy.deepcopy(doc) if doc is not None else None

    def items(self, tenant: str) -> list[tuple[str, dict[str, Any]]]:
        return [(k, copy.deepcopy(v)) for k, v in sorted(self._docs.get(tenant, {}).items())]

    def put(self, tenant: str, key: str, doc: dict[str, Any], *, if_absent: bool, if_equals: Any) -> bool:
        current = self._docs.get(tenant, {}).get(key)
        if (if_absent and current is not None) or (if_equals is not None and current != if_equals):
            return False
        self._docs.setdefault(tenant, {})[key] = copy.deepcopy(doc)
        return True

    def delete(self, tenant: str, key: str) -> bool:
        return self._docs.get(tenant, {}).pop(key, None) is not None


class InMemoryToolRepository:
    def __init__(self) -> None:
        self._p = _Partitions()

    def get_tool(self, tenant: str, tool_id: str) -> dict[str, Any] | None:
        return self._p.get(tenant, tool_id)

    def list_tools(self, tenant: str) -> list[dict[str, Any]]:
        return [doc for _, doc in self._p.items(tenant)]

    def put_tool(
        self,
        tenant: str,
        tool_id: str,
        doc: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool:
        return self._p.put(tenant, tool_id, doc, if_absent=if_absent, if_equals=if_equals)

    def delete_tool(self, tenant: str, tool_id: str) -> bool:
        return self._p.delete(tenant, tool_id)


class InMemoryMcpServerRepository:
    def __init__(self) -> None:
        self._p = _Partitions()

    def get_server(self, tenant: str, server_id: str) -> dict[str, Any] | None:
        return self._p.get(tenant, server_id)

    def list_servers(self, tenant: str) -> list[dict[str, Any]]:
        return [doc for _, doc in self._p.items(tenant)]

    def put_server(self, tenant: str, server_id: str, doc: dict[str, Any]) -> None:
        self._p.put(tenant, server_id, doc, if_absent=False, if_equals=None)

    def delete_server(self, tenant: str, server_id: str) -> bool:
        return self._p.delete(tenant, server_id)


class InMemoryCredentialRepository:
    def __init__(self, secrets_prefix: str = "test/credentials") -> None:
        self._p = _Partitions()
        self._prefix = secrets_prefix

    def get_credential(self, tenant: str, ref: str) -> dict[str, Any] | None:
        return self._p.get(tenant, ref)

    def list_credentials(self, tenant: str) -> list[tuple[str, dict[str, Any]]]:
        return self._p.items(tenant)

    def put_credential(self, tenant: str, ref: str, meta: dict[str, Any]) -> None:
        self._p.put(tenant, ref, meta, if_absent=False, if_equals=None)

    def delete_credential(self, tenant: str, ref: str) -> bool:
        return self._p.delete(tenant, ref)

    def secret_name(self, tenant: str, ref: str) -> str:
        return f"{self._prefix.rstrip('/')}/{tenant}/{ref}"


class InMemoryWorkflowRepository:
    def __init__(self) -> None:
        self._fixtures = _Partitions()
        self._versions = _Partitions()
        self._current = _Partitions()
        self._listing = _Partitions()

    def get_fixture(self, workflow_id: str) -> dict[str, Any] | None:
        return self._fixtures.get("*", workflow_id)

    def put_fixture(self, workflow_id: str, doc: dict[str, Any]) -> None:
        self._fixtures.put("*", workflow_id, doc, if_absent=False, if_equals=None)

    def get_version(self, tenant: str, workflow_id: str, version: str) -> dict[str, Any] | None:
        return self._versions.get(tenant, f"{workflow_id}#{version}")

    def put_version(self, tenant: str, workflow_id: str, version: str, doc: dict[str, Any]) -> bool:
        return self._versions.put(tenant, f"{workflow_id}#{version}", doc, if_absent=True, if_equals=None)

    def get_definition(self, tenant: str, workflow_id: str) -> dict[str, Any] | None:
        return self._current.get(tenant, workflow_id)

    def put_definition(self, tenant: str, workflow_id: str, doc: dict[str, Any]) -> None:
        self._current.put(tenant, workflow_id, doc, if_absent=False, if_equals=None)

    def get_listing(self, tenant: str, workflow_id: str) -> dict[str, Any] | None:
        return self._listing.get(tenant, workflow_id)

    def put_listing(self, tenant: str, workflow_id: str, row: dict[str, Any]) -> None:
        self._listing.put(tenant, workflow_id, row, if_absent=False, if_equals=None)

    def list_listings(self, tenant: str, *, after: str | None = None) -> list[dict[str, Any]]:
        return [row for wid, row in self._listing.items(tenant) if after is None or wid > after]

    def delete_workflow(self, tenant: str, workflow_id: str, *, at: str) -> None:
        self._current.delete(tenant, workflow_id)
        for key, _ in self._versions.items(tenant):
            if key.startswith(f"{workflow_id}#"):
                self._versions.delete(tenant, key)
        self._listing.delete(tenant, workflow_id)


class InMemoryApiKeyRepository:
    def __init__(self) -> None:
        self._by_hash: dict[str, dict[str, Any]] = {}
        self._refs: dict[str, dict[str, Any]] = {}
        self._listing = _Partitions()

    def get_by_hash(self, key_hash: str) -> dict[str, Any] | None:
        return copy.deepcopy(self._by_hash.get(key_hash))

    def get_key(self, key_id: str) -> dict[str, Any] | None:
        return copy.deepcopy(self._refs.get(key_id))

    def list_keys(self, tenant: str) -> list[tuple[str, dict[str, Any]]]:
        return self._listing.items(tenant)

    def put_key(
        self, key_id: str, key_hash: str, *, tenant: str, listing: dict[str, Any], lookup: dict[str, Any]
    ) -> None:
        self._refs[key_id] = {"tenant": tenant, "hash": key_hash}
        self._listing.put(tenant, key_id, listing, if_absent=False, if_equals=None)
        self._by_hash[key_hash] = copy.deepcopy(lookup)

    def delete_key(self, key_id: str, key_hash: str, *, tenant: str) -> None:
        self._by_hash.pop(key_hash, None)
        self._listing.delete(tenant, key_id)
        self._refs.pop(key_id, None)


class InMemoryAgentRepository:
    def __init__(self) -> None:
        self._versions = _Partitions()
        self._scripted = _Partitions()

    def get_version(self, tenant: str, agent_id: str, version: str) -> dict[str, Any] | None:
        return self._versions.get(tenant, f"{agent_id}#{version}")

    def put_version(self, tenant: str, agent_id: str, version: str, doc: dict[str, Any]) -> bool:
        return self._versions.put(tenant, f"{agent_id}#{version}", doc, if_absent=True, if_equals=None)

    def list_versions(self, tenant: str, agent_id: str) -> list[tuple[str, dict[str, Any]]]:
        return [(v, doc) for a, v, doc in self.list_all_versions(tenant) if a == agent_id]

    def list_all_versions(self, tenant: str) -> list[tuple[str, str, dict[str, Any]]]:
        return [(key.rsplit("#", 1)[0], key.rsplit("#", 1)[1], doc) for key, doc in self._versions.items(tenant)]

    def get_scripted(self, tenant: str, agent_id: str) -> dict[str, Any] | None:
        return self._scripted.get(tenant, agent_id)

    def put_scripted(self, tenant: str, agent_id: str, doc: dict[str, Any]) -> None:
        self._scripted.put(tenant, agent_id, doc, if_absent=False, if_equals=None)


class InMemoryDeploymentRepository:
    def __init__(self) -> None:
        self._records = _Partitions()
        self._history = _Partitions()

    def list_records(self, tenant: str, agent_id: str) -> dict[str, dict[str, Any]]:
        return {k.rsplit("#", 1)[1]: d for k, d in self._records.items(tenant) if k.rsplit("#", 1)[0] == agent_id}

    def put_record(self, tenant: str, agent_id: str, version: str, doc: dict[str, Any]) -> None:
        self._records.put(tenant, f"{agent_id}#{version}", doc, if_absent=False, if_equals=None)

    def list_history(self, tenant: str, agent_id: str, channel: str) -> list[dict[str, Any]]:
        return [d for k, d in self._history.items(tenant) if k.startswith(f"{agent_id}#{channel}#")]

    def put_history(self, tenant: str, agent_id: str, channel: str, position: int, entry: dict[str, Any]) -> bool:
        return self._history.put(tenant, f"{agent_id}#{channel}#{position:08d}", entry, if_absent=True, if_equals=None)


class InMemoryWebhookRepository:
    """Subscriptions and dead letters; ``runs`` maps a run id to its TTL (absent: the run is erased)."""

    def __init__(self) -> None:
        self._subs = _Partitions()
        self._rules: dict[str, dict[str, Any]] = {}
        self._dead = _Partitions()
        self.runs: dict[str, int] = {}

    def get_subscription(self, tenant: str, webhook_id: str) -> dict[str, Any] | None:
        return self._subs.get(tenant, webhook_id)

    def get_subscription_and_run(
        self, tenant: str, webhook_id: str, run_id: str
    ) -> tuple[dict[str, Any] | None, int | None]:
        return self._subs.get(tenant, webhook_id), self.runs.get(run_id)

    def list_subscriptions(self, tenant: str, *, consistent: bool = False) -> list[tuple[str, dict[str, Any]]]:
        return self._subs.items(tenant)

    def get_interest(self, tenant: str) -> tuple[list[dict[str, Any]], str | None]:
        rules = self._rules.get(tenant)
        return [doc for _, doc in self._subs.items(tenant)], (str(rules["version"]) if rules else None)

    def put_subscription(
        self,
        tenant: str,
        webhook_id: str,
        doc: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool:
        return self._subs.put(tenant, webhook_id, doc, if_absent=if_absent, if_equals=if_equals)

    def delete_subscription(self, tenant: str, webhook_id: str) -> bool:
        return self._subs.delete(tenant, webhook_id)

    def put_rules_version(self, tenant: str, version: dict[str, Any]) -> None:
        self._rules[tenant] = copy.deepcopy(version)

    def list_dead_letters(self, webhook_id: str) -> list[tuple[str, dict[str, Any]]]:
        return self._dead.items(webhook_id)

    def put_dead_letter(self, webhook_id: str, record: dict[str, Any], *, expires_at: int) -> tuple[str, str]:
        sk = f"{record['deadLetteredAt']}#{record['deliveryId']}"
        self._dead.put(webhook_id, sk, record, if_absent=False, if_equals=None)
        return webhook_id, sk


class InMemoryWebhookSecretRepository:
    def __init__(self) -> None:
        self._p = _Partitions()

    def get_secret(self, tenant: str, webhook_id: str) -> dict[str, Any] | None:
        return self._p.get(tenant, webhook_id)

    def put_secret(
        self,
        tenant: str,
        webhook_id: str,
        record: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool:
        return self._p.put(tenant, webhook_id, record, if_absent=if_absent, if_equals=if_equals)

    def delete_secret(self, tenant: str, webhook_id: str) -> None:
        self._p.delete(tenant, webhook_id)


class InMemoryQuotaRepository:
    def __init__(self) -> None:
        self._counts: dict[tuple[str, int], int] = {}

    def add_run_start(self, tenant: str, window: int, *, expires_at: int) -> int:
        self._counts[(tenant, window)] = self._counts.get((tenant, window), 0) + 1
        return self._counts[(tenant, window)]


class InMemoryScopeClaimRepository:
    def __init__(self) -> None:
        self._p = _Partitions()

    def get_claim(self, tenant: str, scope_id: str) -> dict[str, Any] | None:
        return self._p.get(tenant, scope_id)

    def put_claim(
        self,
        tenant: str,
        scope_id: str,
        claim: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool:
        return self._p.put(tenant, scope_id, claim, if_absent=if_absent, if_equals=if_equals)

    def delete_claim(self, tenant: str, scope_id: str, *, if_equals: dict[str, Any]) -> bool:
        return self._p.get(tenant, scope_id) == if_equals and self._p.delete(tenant, scope_id)


class InMemoryCounterRepository:
    """Counters by (tenant, name); ``counts`` is what an increment (written elsewhere) would have left."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}

    def get_count(self, tenant: str, name: str) -> int:
        return self.counts.get((tenant, name), 0)

    def get_ref(self, tenant: str, name: str) -> tuple[str, str]:
        return tenant, name


class InMemoryEffectLedger:
    """Ledger rows by tenant, keyed ``<runId>#<nodeId>#<ordinal>`` (``rows`` is what the engine would have written)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, dict[str, Any]]] = {}

    def put_effect(
        self, tenant: str, run_id: str, node_id: str, ordinal: int, row: dict[str, Any], *, expires_at: int
    ) -> bool:
        """Once per (run, node, ordinal); no run to check here, so every run is writable."""
        mine = self.rows.setdefault(tenant, {})
        key = f"{run_id}#{node_id}#{ordinal:06d}"
        if key in mine:
            return False
        mine[key] = copy.deepcopy(row)
        return True

    def list_effects(self, tenant: str, run_id: str) -> list[tuple[str, dict[str, Any]]]:
        mine = sorted((k, v) for k, v in self.rows.get(tenant, {}).items() if k.startswith(f"{run_id}#"))
        return [(f"LEDGER#{k}", copy.deepcopy(v)) for k, v in mine]

    def delete_effects(self, tenant: str, run_id: str) -> int:
        gone = [k for k in self.rows.get(tenant, {}) if k.startswith(f"{run_id}#")]
        for k in gone:
            del self.rows[tenant][k]
        return len(gone)


class InMemoryLinkedItemStore:
    """The references of items other repositories wrote (``items``: what they would have left)."""

    def __init__(self) -> None:
        self.items: set[tuple[str, str]] = set()

    def delete_linked(self, pk: str, sk: str) -> bool:
        found = (pk, sk) in self.items
        self.items.discard((pk, sk))
        return found


class InMemorySamplingRuleRepository:
    def __init__(self) -> None:
        self._p = _Partitions()

    def list_rules(self, tenant: str, suite_id: str | None = None, *, consistent: bool = False) -> list[dict[str, Any]]:
        prefix = f"{suite_id}#" if suite_id is not None else ""
        return [doc for key, doc in self._p.items(tenant) if key.startswith(prefix)]

    def put_rule(self, tenant: str, rule: dict[str, Any]) -> bool:
        return self._p.put(tenant, f"{rule['suiteId']}#{rule['ruleId']}", rule, if_absent=True, if_equals=None)

    def delete_rule(self, tenant: str, suite_id: str, rule_id: str) -> bool:
        return self._p.delete(tenant, f"{suite_id}#{rule_id}")


class InMemorySuiteDraftRepository:
    def __init__(self) -> None:
        self._p = _Partitions()

    def get_draft(self, tenant: str, suite_id: str) -> dict[str, Any] | None:
        return self._p.get(tenant, suite_id)

    def put_draft(
        self,
        tenant: str,
        suite_id: str,
        doc: dict[str, Any],
        *,
        if_absent: bool = False,
        if_equals: dict[str, Any] | None = None,
    ) -> bool:
        return self._p.put(tenant, suite_id, doc, if_absent=if_absent, if_equals=if_equals)

    def get_ref(self, suite_id: str) -> str:
        return f"{suite_id}@draft"


class InMemorySuiteRepository:
    def __init__(self) -> None:
        self._versions = _Partitions()
        self._fixtures = _Partitions()
        self._index = _Partitions()
        self._listing = _Partitions()
        self._refs = _Partitions()

    def get_version(self, owner: str, ref: str) -> dict[str, Any] | None:
        return self._versions.get(owner, ref)

    def put_version(self, owner: str, ref: str, suite: dict[str, Any]) -> bool:
        return self._versions.put(owner, ref, suite, if_absent=True, if_equals=None)

    def delete_version(self, owner: str, ref: str) -> None:
        self._versions.delete(owner, ref)

    def get_latest_version(
        self, owners: Sequence[str], suite_id: str, choose: Callable[[Iterable[str]], str | None]
    ) -> tuple[str, dict[str, Any]] | None:
        found = {
            key.partition("@")[2]: (owner, doc)
            for owner in owners
            for key, doc in self._versions.items(owner)
            if key.startswith(f"{suite_id}@")
        }
        best = choose(list(found)) if found else None
        return found[best] if best is not None else None

    def rewrite_tasks(
        self, owner: str, ref: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> int | None:
        doc = self._versions.get(owner, ref)
        if doc is None:
            return 0
        new = [change(t) for t in doc["tasks"]]
        hit = sum(n is not None for n in new)
        if hit:
            tasks = [n if n is not None else t for t, n in zip(doc["tasks"], new, strict=True)]
            self._versions.put(owner, ref, {**doc, "tasks": tasks}, if_absent=False, if_equals=None)
        return hit

    def get_fixture(self, fixture_id: str) -> dict[str, Any] | None:
        return self._fixtures.get("*", fixture_id)

    def put_fixture(self, fixture_id: str, doc: dict[str, Any]) -> None:
        self._fixtures.put("*", fixture_id, doc, if_absent=False, if_equals=None)

    def get_index_row(self, tenant: str, ref: str) -> dict[str, Any] | None:
        return self._index.get(tenant, ref)

    def list_index_rows(self, tenant: str, suite_id: str, *, consistent: bool = False) -> list[dict[str, Any]]:
        return [row for key, row in self._index.items(tenant) if key.startswith(f"{suite_id}@")]

    def put_index_row(self, tenant: str, ref: str, row: dict[str, Any], *, if_absent: bool = False) -> None:
        self._index.put(tenant, ref, row, if_absent=if_absent, if_equals=None)

    def delete_index_row(self, tenant: str, ref: str) -> None:
        self._index.delete(tenant, ref)

    def get_listing(self, tenant: str, suite_id: str) -> dict[str, Any] | None:
        return self._listing.get(tenant, suite_id)

    def put_listing(
        self, tenant: str, suite_id: str, doc: dict[str, Any], *, if_absent: bool, if_equals: dict[str, Any] | None
    ) -> bool:
        return self._listing.put(tenant, suite_id, doc, if_absent=if_absent, if_equals=if_equals)

    def delete_listing(self, tenant: str, suite_id: str, *, if_equals: dict[str, Any] | None) -> bool:
        if if_equals is not None and self._listing.get(tenant, suite_id) != if_equals:
            return False
        return self._listing.delete(tenant, suite_id)

    def list_listings(
        self, tenant: str, limit: int, *, after: str = ""
    ) -> tuple[list[tuple[str, dict[str, Any]]], bool]:
        rows = [(k, v) for k, v in self._listing.items(tenant) if k > after]
        return rows[:limit], len(rows) > limit

    def put_reference(self, tenant: str, ref: str, run_id: str, *, expires_at: int) -> tuple[str, str]:
        self._refs.put(tenant, f"{ref}#{run_id}", {"runId": run_id}, if_absent=False, if_equals=None)
        return tenant, f"{ref}#{run_id}"

    def list_references(self, tenant: str, ref: str) -> list[str]:
        return [str(row["runId"]) for key, row in self._refs.items(tenant) if key.startswith(f"{ref}#")]

    def delete_reference(self, tenant: str, ref: str, run_id: str) -> None:
        self._refs.delete(tenant, f"{ref}#{run_id}")
