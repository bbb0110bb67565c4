"""The repositories beneath the services (tools, MCP servers, credentials, workflows, API keys, agents, webhooks,
quotas, scope claims): the DynamoDB implementation on moto and the
in-memory one for unit tests keep the same contract; the DynamoDB one stores exactly the host items it always
stored (same partition and sort keys, same document)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fakes.registrations import (
    InMemoryAgentRepository,
    InMemoryApiKeyRepository,
    InMemoryCredentialRepository,
    InMemoryDeploymentRepository,
    InMemoryEffectLedger,
    InMemoryLinkedItemStore,
    InMemoryMcpServerRepository,
    InMemoryQuotaRepository,
    InMemorySamplingRuleRepository,
    InMemoryScopeClaimRepository,
    InMemorySuiteDraftRepository,
    InMemorySuiteRepository,
    InMemoryToolRepository,
    InMemoryWebhookRepository,
    InMemoryWebhookSecretRepository,
    InMemoryWorkflowRepository,
)
from tests.helpers import unique


@pytest.fixture(params=["dynamo", "memory"])
def repos(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return {
            "tools": InMemoryToolRepository(),
            "mcp_servers": InMemoryMcpServerRepository(),
            "credentials": InMemoryCredentialRepository(),
            "workflows": InMemoryWorkflowRepository(),
            "api_keys": InMemoryApiKeyRepository(),
            "agents": InMemoryAgentRepository(),
            "deployments": InMemoryDeploymentRepository(),
            "webhooks": InMemoryWebhookRepository(),
            "webhook_secrets": InMemoryWebhookSecretRepository(),
            "quotas": InMemoryQuotaRepository(),
            "scope_claims": InMemoryScopeClaimRepository(),
            "sampling_rules": InMemorySamplingRuleRepository(),
            "suite_drafts": InMemorySuiteDraftRepository(),
            "suites": InMemorySuiteRepository(),
        }
    request.getfixturevalue("local_aws")
    from shared.wiring import get_ports

    ports = get_ports()
    names = ("tools", "mcp_servers", "credentials", "workflows", "api_keys", "agents", "deployments")
    names += ("webhooks", "webhook_secrets", "quotas", "scope_claims", "sampling_rules", "suite_drafts", "suites")
    return {name: getattr(ports, name) for name in names}


def test_tool_repository_puts_conditionally_lists_in_id_order_and_deletes(repos: Any) -> None:
    # Given a fresh tenant and two tool documents
    tools, tenant = repos["tools"], unique("tenant-r")
    a, b = {"toolId": "b.tool", "version": "1"}, {"toolId": "a.tool", "version": "1"}
    # When both are put only if absent, then each is written once
    assert tools.put_tool(tenant, "b.tool", a, if_absent=True) is True
    assert tools.put_tool(tenant, "a.tool", b, if_absent=True) is True
    assert tools.put_tool(tenant, "a.tool", a, if_absent=True) is False
    # And a compare-and-set writes only over the document it names
    assert tools.put_tool(tenant, "a.tool", {**b, "version": "2"}, if_equals=a) is False
    assert tools.put_tool(tenant, "a.tool", {**b, "version": "2"}, if_equals=b) is True
    # Then the tenant's tools are listed in id order; another tenant sees none
    assert tools.list_tools(tenant) == [{**b, "version": "2"}, a]
    assert tools.list_tools(unique("tenant-r")) == []
    # And a delete says whether the tool existed
    assert tools.delete_tool(tenant, "a.tool") is True
    assert tools.delete_tool(tenant, "a.tool") is False
    assert tools.get_tool(tenant, "a.tool") is None


def test_mcp_server_and_credential_repositories_round_trip(repos: Any) -> None:
    # Given a fresh tenant
    servers, creds, tenant = repos["mcp_servers"], repos["credentials"], unique("tenant-r")
    # When a server and two credentials are put
    servers.put_server(tenant, "srv", {"serverId": "srv", "tools": [{"name": "t"}]})
    creds.put_credential(tenant, "k2", {"type": "bearer"})
    creds.put_credential(tenant, "k1", {"type": "apiKey"})
    # Then they read back, listed in id order
    assert servers.get_server(tenant, "srv") == {"serverId": "srv", "tools": [{"name": "t"}]}
    assert servers.list_servers(tenant) == [{"serverId": "srv", "tools": [{"name": "t"}]}]
    assert creds.list_credentials(tenant) == [("k1", {"type": "apiKey"}), ("k2", {"type": "bearer"})]
    # And each tenant's secret material is named under its own path
    assert creds.secret_name(tenant, "k1").endswith(f"/{tenant}/k1")
    # And deletes say whether the item existed
    assert servers.delete_server(tenant, "srv") is True and servers.get_server(tenant, "srv") is None
    assert creds.delete_credential(tenant, "k1") is True and creds.delete_credential(tenant, "k1") is False


def test_workflow_repository_keeps_versions_current_definitions_and_listings(repos: Any) -> None:
    # Given a fresh tenant and a definition registered as version 1 then 2
    workflows, tenant = repos["workflows"], unique("tenant-r")
    v1, v2 = {"id": "wf", "version": "1"}, {"id": "wf", "version": "2"}
    # When a version is stored twice, then only the first write counts
    assert workflows.put_version(tenant, "wf", "1", v1) is True
    assert workflows.put_version(tenant, "wf", "1", v2) is False
    assert workflows.put_version(tenant, "wf", "2", v2) is True
    workflows.put_definition(tenant, "wf", v2)
    for wid in ("wf", "wf-b", "a"):
        workflows.put_listing(tenant, wid, {"workflowId": wid})
    # Then each version, the current definition and the listing (in workflowId order, after a cursor) read back
    assert workflows.get_version(tenant, "wf", "1") == v1
    assert workflows.get_definition(tenant, "wf") == v2
    assert [r["workflowId"] for r in workflows.list_listings(tenant)] == ["a", "wf", "wf-b"]
    assert [r["workflowId"] for r in workflows.list_listings(tenant, after="wf")] == ["wf-b"]
    # When the workflow is deleted, then its definition, versions and listing row are gone; its neighbour stays
    workflows.delete_workflow(tenant, "wf", at="2026-01-01T00:00:00Z")
    assert workflows.get_definition(tenant, "wf") is None
    assert workflows.get_version(tenant, "wf", "2") is None
    assert workflows.get_listing(tenant, "wf") is None
    assert workflows.get_listing(tenant, "wf-b") == {"workflowId": "wf-b"}


def test_api_key_repository_stores_a_key_by_hash_id_and_tenant_and_deletes_it(repos: Any) -> None:
    # Given a fresh tenant and a key's hash
    api_keys, tenant, kid, h = repos["api_keys"], unique("tenant-r"), unique("key"), unique("hash")
    # When the key is stored
    lookup = {"tenant": tenant, "subjectId": kid, "keyId": kid}
    api_keys.put_key(kid, h, tenant=tenant, listing={"keyId": kid, "name": "ci"}, lookup=lookup)
    # Then it is found by its hash, by its id, and in its tenant's listing
    assert api_keys.get_by_hash(h) == lookup
    assert api_keys.get_key(kid) == {"tenant": tenant, "hash": h}
    assert api_keys.list_keys(tenant) == [(kid, {"keyId": kid, "name": "ci"})]
    # When it is deleted, then none of the three finds it
    api_keys.delete_key(kid, h, tenant=tenant)
    assert api_keys.get_by_hash(h) is None and api_keys.get_key(kid) is None and api_keys.list_keys(tenant) == []


def test_agent_repositories_keep_versions_records_and_channel_history_per_agent(repos: Any) -> None:
    # Given a fresh tenant with agent "a" (two versions), its neighbour "ab" and a scripted agent
    agents, deployments, tenant = repos["agents"], repos["deployments"], unique("tenant-r")
    assert agents.put_version(tenant, "a", "1.0.0", {"v": 1}) is True
    assert agents.put_version(tenant, "a", "1.0.0", {"v": 9}) is False
    agents.put_version(tenant, "a", "2.0.0", {"v": 2})
    agents.put_version(tenant, "ab", "1.0.0", {"v": 3})
    agents.put_scripted(tenant, "bot", {"script": []})
    # Then each agent reads only its own versions
    assert sorted(agents.list_versions(tenant, "a")) == [("1.0.0", {"v": 1}), ("2.0.0", {"v": 2})]
    assert sorted(agents.list_all_versions(tenant))[-1] == ("ab", "1.0.0", {"v": 3})
    assert agents.get_version(tenant, "a", "2.0.0") == {"v": 2} and agents.get_scripted(tenant, "bot") == {"script": []}
    # When records and channel changes are written, then they read back per agent; a position is claimed once
    deployments.put_record(tenant, "a", "1.0.0", {"state": "active"})
    deployments.put_record(tenant, "ab", "1.0.0", {"state": "draft"})
    assert deployments.list_records(tenant, "a") == {"1.0.0": {"state": "active"}}
    assert deployments.put_history(tenant, "a", "stable", 0, {"version": "1.0.0"}) is True
    assert deployments.put_history(tenant, "a", "stable", 0, {"version": "2.0.0"}) is False
    deployments.put_history(tenant, "a", "stable", 1, {"version": "2.0.0"})
    assert deployments.list_history(tenant, "a", "stable") == [{"version": "1.0.0"}, {"version": "2.0.0"}]
    assert deployments.list_history(tenant, "a", "canary") == []


def test_webhook_and_limit_repositories_round_trip(repos: Any) -> None:
    # Given a fresh tenant and one subscription of it
    hooks, secrets, tenant = repos["webhooks"], repos["webhook_secrets"], unique("tenant-r")
    wid = f"{tenant}/01"
    assert hooks.put_subscription(tenant, wid, {"webhookId": wid}, if_absent=True) is True
    assert hooks.put_subscription(tenant, wid, {"webhookId": "other"}, if_absent=True) is False
    # When the tenant's rules change, then the interest holds the subscription and the rules version
    assert hooks.get_interest(tenant) == ([{"webhookId": wid}], None)
    hooks.put_rules_version(tenant, {"version": "v1", "changedAt": "t"})
    assert hooks.get_interest(tenant) == ([{"webhookId": wid}], "v1")
    assert hooks.list_subscriptions(tenant, consistent=True) == [(wid, {"webhookId": wid})]
    # And a dead letter is listed under its subscription
    hooks.put_dead_letter(wid, {"deadLetteredAt": "t1", "deliveryId": "d1"}, expires_at=2**31)
    assert hooks.list_dead_letters(wid) == [("t1#d1", {"deadLetteredAt": "t1", "deliveryId": "d1"})]
    # And a sealed secret is compare-and-set
    assert secrets.put_secret(tenant, wid, {"secret": "a"}, if_absent=True) is True
    assert secrets.put_secret(tenant, wid, {"secret": "b"}, if_equals={"secret": "x"}) is False
    assert secrets.get_secret(tenant, wid) == {"secret": "a"}
    secrets.delete_secret(tenant, wid)
    assert secrets.get_secret(tenant, wid) is None and hooks.delete_subscription(tenant, wid) is True
    # And a quota window counts, a scope claim is taken once
    assert [repos["quotas"].add_run_start(tenant, 7, expires_at=2**31) for _ in range(2)] == [1, 2]
    assert repos["scope_claims"].put_claim(tenant, "s", {"runId": None}, if_absent=True) is True
    assert repos["scope_claims"].put_claim(tenant, "s", {"runId": "r"}, if_absent=True) is False
    assert repos["scope_claims"].get_claim(tenant, "s") == {"runId": None}
    # and released only while it is the claim the caller wrote
    assert repos["scope_claims"].delete_claim(tenant, "s", if_equals={"runId": "r"}) is False
    assert repos["scope_claims"].get_claim(tenant, "s") == {"runId": None}
    assert repos["scope_claims"].delete_claim(tenant, "s", if_equals={"runId": None}) is True
    assert repos["scope_claims"].get_claim(tenant, "s") is None


def test_sampling_rules_and_suite_drafts_round_trip(repos: Any) -> None:
    # Given a fresh tenant with rules on two suites
    rules, drafts, tenant = repos["sampling_rules"], repos["suite_drafts"], unique("tenant-r")
    assert rules.put_rule(tenant, {"suiteId": "s.evals.b", "ruleId": "R1"}) is True
    assert rules.put_rule(tenant, {"suiteId": "s.evals.a", "ruleId": "R2"}) is True
    assert rules.put_rule(tenant, {"suiteId": "s.evals.a", "ruleId": "R2", "x": 1}) is False
    # Then they are listed per suite and all together, in (suiteId, ruleId) order; a delete says whether one existed
    assert rules.list_rules(tenant, "s.evals.a") == [{"suiteId": "s.evals.a", "ruleId": "R2"}]
    assert [r["ruleId"] for r in rules.list_rules(tenant, consistent=True)] == ["R2", "R1"]
    assert (
        rules.delete_rule(tenant, "s.evals.a", "R2") is True and rules.delete_rule(tenant, "s.evals.a", "R2") is False
    )
    # When a draft is created and then changed by compare-and-set
    assert drafts.put_draft(tenant, "s.evals.a", {"tasks": []}, if_absent=True) is True
    assert drafts.put_draft(tenant, "s.evals.a", {"tasks": [1]}, if_absent=True) is False
    assert drafts.put_draft(tenant, "s.evals.a", {"tasks": [2]}, if_equals={"tasks": [9]}) is False
    assert drafts.put_draft(tenant, "s.evals.a", {"tasks": [2]}, if_equals={"tasks": []}) is True
    # Then it reads back, and its reference names the suite's draft
    assert drafts.get_draft(tenant, "s.evals.a") == {"tasks": [2]} and drafts.get_draft(tenant, "s.evals.b") is None
    assert drafts.get_ref("s.evals.a") == "s.evals.a@draft"


def test_suite_repository_keeps_index_rows_listing_and_references(repos: Any) -> None:
    # Given a fresh tenant with two versions of one suite and one of another
    suites, tenant = repos["suites"], unique("tenant-r")
    for ref in ("s.evals.a@1.0.0", "s.evals.a@1.1.0", "s.evals.ab@1.0.0"):
        suites.put_index_row(tenant, ref, {"version": ref.split("@")[1]})
    suites.put_index_row(tenant, "s.evals.a@1.0.0", {"version": "x"}, if_absent=True)
    # Then the index rows are read per version and per suite
    assert suites.get_index_row(tenant, "s.evals.a@1.0.0") == {"version": "1.0.0"}
    assert [r["version"] for r in suites.list_index_rows(tenant, "s.evals.a", consistent=True)] == ["1.0.0", "1.1.0"]
    suites.delete_index_row(tenant, "s.evals.a@1.1.0")
    assert suites.get_index_row(tenant, "s.evals.a@1.1.0") is None
    # And the listing rows are compare-and-set and paged in suiteId order
    assert suites.put_listing(tenant, "s.evals.b", {"n": 1}, if_absent=True, if_equals=None) is True
    assert suites.put_listing(tenant, "s.evals.b", {"n": 2}, if_absent=False, if_equals={"n": 9}) is False
    assert suites.put_listing(tenant, "s.evals.a", {"n": 3}, if_absent=True, if_equals=None) is True
    assert suites.list_listings(tenant, 1)[0] == [("s.evals.a", {"n": 3})]
    assert suites.list_listings(tenant, 5, after="s.evals.a") == ([("s.evals.b", {"n": 1})], False)
    assert suites.delete_listing(tenant, "s.evals.b", if_equals={"n": 9}) is False
    assert suites.delete_listing(tenant, "s.evals.b", if_equals={"n": 1}) is True
    # And a version's references are listed and deleted by run
    suites.put_reference(tenant, "s.evals.a@1.0.0", "r1", expires_at=2**31)
    suites.put_reference(tenant, "s.evals.a@1.0.0", "r2", expires_at=2**31)
    assert sorted(suites.list_references(tenant, "s.evals.a@1.0.0")) == ["r1", "r2"]
    suites.delete_reference(tenant, "s.evals.a@1.0.0", "r1")
    assert suites.list_references(tenant, "s.evals.a@1.0.0") == ["r2"]


def test_suite_repository_stores_versions_once_resolves_the_latest_and_rewrites_tasks(repos: Any) -> None:
    # Given a fresh tenant's two versions of a suite and a host-wide version of the same suite
    suites, tenant = repos["suites"], unique("tenant-r")
    v1 = {"suiteId": "s.evals.a", "version": "1.0.0", "tasks": [{"taskId": "t1", "sourceRunId": "r1"}]}
    v2 = {**v1, "version": "1.2.0", "tasks": [{"taskId": "t1"}, {"taskId": "t2", "sourceRunId": "r1"}]}
    host_wide = {**v1, "version": "1.1.0"}
    assert suites.put_version(tenant, "s.evals.a@1.0.0", v1) is True
    assert suites.put_version(tenant, "s.evals.a@1.2.0", v2) is True
    assert suites.put_version(tenant, "s.evals.a@1.0.0", v2) is False
    assert suites.put_version("*", "s.evals.a@1.1.0", host_wide) is True
    # Then each reads back as stored; another owner sees none of the tenant's
    assert suites.get_version(tenant, "s.evals.a@1.0.0") == v1
    assert suites.get_version(unique("tenant-r"), "s.evals.a@1.0.0") is None
    # And the latest is the one chosen among every owner's versions (a later owner's shadowing an earlier's)
    assert suites.get_latest_version(("*", tenant), "s.evals.a", max) == (tenant, v2)
    assert suites.get_latest_version(("*", tenant), "s.evals.a", min) == (tenant, v1)
    assert suites.get_latest_version(("*",), "s.evals.a", max) == ("*", host_wide)
    assert suites.get_latest_version(("*", tenant), "s.evals.b", max) is None
    assert suites.get_latest_version(("*", tenant), "s.evals.a", lambda vs: None) is None
    # When the tasks naming r1 are rewritten, then only those change, and an absent version has none
    mark = lambda t: {"taskId": t["taskId"], "gone": True} if t.get("sourceRunId") == "r1" else None  # noqa: E731
    assert suites.rewrite_tasks(tenant, "s.evals.a@1.2.0", mark) == 1
    assert suites.get_version(tenant, "s.evals.a@1.2.0")["tasks"] == [{"taskId": "t1"}, {"taskId": "t2", "gone": True}]
    assert suites.rewrite_tasks(tenant, "s.evals.a@1.2.0", mark) == 0
    assert suites.rewrite_tasks(tenant, "s.evals.a@9.9.9", mark) == 0
    # And a deleted version is gone
    suites.delete_version(tenant, "s.evals.a@1.0.0")
    assert suites.get_version(tenant, "s.evals.a@1.0.0") is None


def test_dynamo_counters_and_ledger_read_the_host_items_the_engine_writes(local_aws: Any) -> None:
    # Given a counter incremented and a ledger row written by the host store (as the engine writes them)
    from shared.wiring import get_ports

    ports, tenant, run_id = get_ports(), unique("tenant-r"), unique("r")
    ports.host.add_counter(f"COUNTER#{tenant}", "k", expires_at=2**31)
    ports.host.put_item(f"LEDGER#{tenant}", f"{run_id}#n1#1", {"nodeId": "n1"})
    # Then the counter repository reads it, and names it as the counted-call write expects
    assert ports.counters.get_count(tenant, "k") == 1 and ports.counters.get_count(tenant, "other") == 0
    assert ports.counters.get_ref(tenant, "k") == (f"COUNTER#{tenant}", "k")
    # And the ledger lists the run's rows with their effect ids, and deletes them
    assert ports.ledger.list_effects(tenant, run_id) == [(f"LEDGER#{run_id}#n1#1", {"nodeId": "n1"})]
    assert ports.ledger.delete_effects(tenant, run_id) == 1 and ports.ledger.list_effects(tenant, run_id) == []


@pytest.mark.parametrize("impl", ["dynamo", "memory"])
def test_effect_ledger_writes_a_row_once_and_lists_it_by_its_effect_id(
    impl: str, request: pytest.FixtureRequest
) -> None:
    # Given a writable run (on moto: a run item; in memory every run is writable)
    from shared.ports import RunRecord

    tenant = unique("tenant-r")
    run_id = f"{tenant}/{unique('r')}"
    if impl == "memory":
        ledger: Any = InMemoryEffectLedger()
    else:
        request.getfixturevalue("local_aws")
        from shared.wiring import get_ports

        ports = get_ports()
        ledger = ports.ledger
        data = {"kind": "workflow", "owner": {"tenant": tenant}}
        ports.runs.create_run(RunRecord(run_id, tenant, "running", -1, ports.clock.iso(), data, expires_at=2**31))
    # When the node's first effect is written twice (a retried step)
    assert ledger.put_effect(tenant, run_id, "n1", 1, {"nodeId": "n1"}, expires_at=2**31) is True
    assert ledger.put_effect(tenant, run_id, "n1", 1, {"nodeId": "x"}, expires_at=2**31) is False
    # Then one row is listed under its effect id (the ordinal zero-padded to six digits), and deleted with the run
    assert ledger.list_effects(tenant, run_id) == [(f"LEDGER#{run_id}#n1#000001", {"nodeId": "n1"})]
    assert ledger.delete_effects(tenant, run_id) == 1 and ledger.list_effects(tenant, run_id) == []


@pytest.mark.parametrize("impl", ["dynamo", "memory"])
def test_a_linked_item_is_deleted_by_the_reference_its_repository_returned(
    impl: str, request: pytest.FixtureRequest
) -> None:
    # Given a suite-version reference written for a run (its repository returns the item's reference)
    tenant = unique("tenant-r")
    if impl == "memory":
        suites: Any = InMemorySuiteRepository()
        linked: Any = InMemoryLinkedItemStore()
        linked.items.add(suites.put_reference(tenant, "s.evals.a@1.0.0", "r1", expires_at=2**31))
    else:
        request.getfixturevalue("local_aws")
        from shared.wiring import get_ports

        ports = get_ports()
        suites, linked = ports.suites, ports.linked
        suites.put_reference(tenant, "s.evals.a@1.0.0", "r1", expires_at=2**31)
    ref = suites.put_reference(tenant, "s.evals.a@1.0.0", "r1", expires_at=2**31)
    # When it is deleted by that reference, twice
    assert linked.delete_linked(*ref) is True
    assert linked.delete_linked(*ref) is False
    # Then the suite's repository no longer lists it
    if impl == "dynamo":
        assert suites.list_references(tenant, "s.evals.a@1.0.0") == []


def test_dynamo_registrations_keep_their_host_table_keys(local_aws: Any) -> None:
    # Given the wired repositories and the host store beneath them
    from shared.wiring import get_ports

    ports, tenant = get_ports(), unique("tenant-r")
    # When one of each aggregate is put
    ports.tools.put_tool(tenant, "t1", {"toolId": "t1"})
    ports.mcp_servers.put_server(tenant, "s1", {"serverId": "s1"})
    ports.credentials.put_credential(tenant, "c1", {"type": "bearer"})
    # Then the items are where they have always been (pk = prefix + tenant, sk = id): no data-format change
    assert ports.host.get_item(f"TOOL#{tenant}", "t1") == {"toolId": "t1"}
    assert ports.host.get_item(f"MCPSERVER#{tenant}", "s1") == {"serverId": "s1"}
    assert ports.host.get_item(f"CRED#{tenant}", "c1") == {"type": "bearer"}
    ports.workflows.put_version(tenant, "w1", "1", {"id": "w1"})
    ports.workflows.put_definition(tenant, "w1", {"id": "w1"})
    ports.workflows.put_listing(tenant, "w1", {"workflowId": "w1"})
    assert ports.host.get_item(f"WORKFLOWV#{tenant}", "w1#1") == {"id": "w1"}
    assert ports.host.get_item(f"WORKFLOW#{tenant}", "w1") == {"id": "w1"}
    assert ports.host.get_item(f"WORKFLOWIDX#{tenant}", "w#w1#") == {"workflowId": "w1"}
    ports.workflows.delete_workflow(tenant, "w1", at="2026-01-01T00:00:00Z")
    assert ports.host.get_item(f"WORKFLOW#{tenant}", "w1") == {"$deleted": "2026-01-01T00:00:00Z"}
    kid, h = unique("key"), unique("hash")
    ports.api_keys.put_key(kid, h, tenant=tenant, listing={"keyId": kid}, lookup={"tenant": tenant})
    assert ports.host.get_item("APIKEY", h) == {"tenant": tenant}
    assert ports.host.get_item("APIKEYID", kid) == {"tenant": tenant, "hash": h}
    assert ports.host.get_item(f"APIKEYS#{tenant}", kid) == {"keyId": kid}
    ports.agents.put_version(tenant, "ag", "1.0.0", {"v": 1})
    ports.deployments.put_history(tenant, "ag", "stable", 3, {"version": "1.0.0"})
    assert ports.host.get_item(f"AGENTV#{tenant}", "ag#1.0.0") == {"v": 1}
    assert ports.host.get_item(f"AGENTCHAN#{tenant}", "ag#stable#00000003") == {"version": "1.0.0"}
    wid = f"{tenant}/01"
    ports.webhooks.put_subscription(tenant, wid, {"webhookId": wid})
    assert ports.webhooks.put_dead_letter(wid, {"deadLetteredAt": "t", "deliveryId": "d"}, expires_at=2**31) == (
        f"WEBHOOKDL#{wid}",
        "t#d",
    )
    ports.scope_claims.put_claim(tenant, "s", {"runId": None})
    assert ports.host.get_item(f"WEBHOOK#{tenant}", wid) == {"webhookId": wid}
    assert ports.host.get_item(f"DEDUP#{tenant}", "s") == {"runId": None}
    ports.sampling_rules.put_rule(tenant, {"suiteId": "s.evals.a", "ruleId": "R1"})
    ports.suite_drafts.put_draft(tenant, "s.evals.a", {"tasks": []})
    assert ports.host.get_item(f"SUITERULE#{tenant}", "s.evals.a#R1") == {"suiteId": "s.evals.a", "ruleId": "R1"}
    assert ports.host.get_item(f"SUITE#{tenant}", "s.evals.a@draft") == {"tasks": []}
    assert ports.suites.put_reference(tenant, "s.evals.a@1.0.0", "r1", expires_at=2**31) == (
        f"SUITEREF#{tenant}",
        "s.evals.a@1.0.0#r1",
    )
    ports.suites.put_index_row(tenant, "s.evals.a@1.0.0", {"version": "1.0.0"})
    assert ports.host.get_item(f"SUITEIDX#{tenant}", "s.evals.a@1.0.0") == {"version": "1.0.0"}
    ports.suites.put_version(tenant, "s.evals.a@1.0.0", {"suiteId": "s.evals.a", "tasks": []})
    assert ports.host.get_item(f"SUITE#{tenant}", "s.evals.a@1.0.0") == {"suiteId": "s.evals.a", "tasks": []}
    assert ports.credentials.secret_name(tenant, "c1") == f"{ports.settings.credentials_prefix}/{tenant}/c1"
