"""Patch 17 (``shared.local.sfn_patches.patch_sfn_parse_once``): a state machine's definition is parsed once per
process, and every execution still evaluates components of its own."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from moto.stepfunctions.parser.asl.antlr.runtime.ASLParser import ASLParser

from shared.local.stack import LocalAws
from tests.helpers import unique, wait_for_execution

# A Choice on the input and a Pass that writes a result: an execution sharing components with another would answer
# the other's branch or value.
DEFINITION = {
    "StartAt": "Pick",
    "States": {
        "Pick": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.n", "NumericGreaterThan": 4, "Next": "Big"}],
            "Default": "Small",
        },
        "Big": {"Type": "Pass", "Parameters": {"size": "big", "n.$": "$.n"}, "End": True},
        "Small": {"Type": "Pass", "Parameters": {"size": "small", "n.$": "$.n"}, "End": True},
    },
}


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times ANTLR parsed a whole definition meanwhile (moto's parser entry, counted)."""
    seen: list[int] = []
    original = ASLParser.state_machine

    def counted(self: Any) -> Any:
        seen.append(1)
        return original(self)

    monkeypatch.setattr(ASLParser, "state_machine", counted)
    return seen


def test_a_definition_is_parsed_once_and_each_execution_answers_its_own_input(local_aws: LocalAws, parses):
    # Given a state machine (a definition this process never parsed: its name is in it)
    sfn = local_aws.client("stepfunctions")
    definition = json.dumps({**DEFINITION, "Comment": unique("parse-once")})
    role = local_aws.client("iam").get_role(RoleName="openwop-local-role")["Role"]["Arn"]
    arn = sfn.create_state_machine(name=unique("canary-parse-once"), definition=definition, roleArn=role)[
        "stateMachineArn"
    ]

    # When ten executions of it run at once
    def run(n: int) -> dict[str, Any]:
        started = sfn.start_execution(stateMachineArn=arn, name=unique("ex"), input=json.dumps({"n": n}))
        return wait_for_execution(sfn, started["executionArn"])

    with ThreadPoolExecutor(max_workers=5) as pool:
        results = list(pool.map(run, range(10)))

    # Then each answered its own input, and the definition was parsed once (at creation)
    assert [r["status"] for r in results] == ["SUCCEEDED"] * 10
    assert [json.loads(r["output"]) for r in results] == [
        {"size": "big" if n > 4 else "small", "n": n} for n in range(10)
    ]
    assert len(parses) == 1
