"""Infra tier: the start outbox's sweep (decision 0150) is a function in the workers' nested stack, invoked every
minute by an EventBridge rule on its ``live`` alias, with the grants settling needs and no more."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared import manifest
from tests.infra.test_host_stack import Synth, synth  # noqa: F401 - the module's synthesis fixture

pytestmark = pytest.mark.infra


def _actions(statements: list[dict[str, Any]]) -> set[str]:
    return {a for s in statements for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])}


def test_the_start_sweep_runs_every_minute_on_its_live_alias(synth: Synth) -> None:  # noqa: F811
    from aws_cdk import Stack

    # Given the schedule functions of the manifest: the start sweep, every minute
    scheduled = [f for f in manifest.FUNCTIONS if f.kind == "schedule"]
    assert [(f.name, f.every_minutes) for f in scheduled] == [("sweep_starts", 1)]
    # Then the function lives in the workers' nested stack
    assert Stack.of(synth.stack.functions.function("sweep_starts")).node.id == "Workers"
    # And exactly one scheduled rule invokes it, every minute, on its live alias, with a short retry and event age
    # (the stack's other rules match events, e.g. the signing key's state: decision 0153)
    rules = {k: r for k, r in synth.of_type("AWS::Events::Rule").items() if "ScheduleExpression" in r["Properties"]}
    assert len(rules) == 1
    (rule,) = rules.values()
    props = rule["Properties"]
    assert props["ScheduleExpression"] == "rate(1 minute)" and props["State"] == "ENABLED"
    (target,) = props["Targets"]
    assert synth.names_alias(target["Arn"], "sweep_starts")
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 120}
    # And EventBridge may invoke that alias, from that rule only
    rule_id = next(iter(rules))
    permissions = [
        p["Properties"]
        for p in synth.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "events.amazonaws.com"
    ]
    assert len(permissions) == 1
    assert synth.names_alias(permissions[0]["FunctionName"], "sweep_starts")
    assert json.dumps({"Fn::GetAtt": [rule_id, "Arn"]}) in json.dumps(permissions[0]["SourceArn"])


def test_the_start_sweep_may_start_runs_and_write_their_items_and_nothing_else(synth: Synth) -> None:  # noqa: F811
    # Given the sweep's role
    statements = synth.function_statements("sweep_starts")
    actions = _actions(statements)
    # Then it starts the six machines (a session's on the timer machine, a run from before decision 0191 on its hold
    # machine), writes the runs, events and host tables, and reads no tool calls, credentials or models
    assert "states:StartExecution" in actions and "dynamodb:PutItem" in actions
    started = {
        json.dumps(r, sort_keys=True)
        for s in statements
        if "states:StartExecution" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
        for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    }
    assert started == {
        json.dumps(synth.resolve(synth.stack.state_machines.machine(m).state_machine_arn), sort_keys=True)
        for m in ("run", "eval", "fork", "timer", "run_hold", "fork_hold")
    }
    text = json.dumps(statements)
    assert json.dumps(synth.resolve(synth.stack.tables.table(manifest.TOOL_CALLS).table_arn)) not in text
    assert not any(a.startswith(("bedrock:", "secretsmanager:Create", "sqs:")) for a in actions)
