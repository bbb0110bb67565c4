"""The local host builds the same model-provider router a deployment does, with every provider enabled."""

from __future__ import annotations

import pytest

from shared.ports import ModelMessage, ModelProviderError, ModelRequest


def test_the_local_host_runs_all_three_providers_and_answers_the_mock(local_aws):
    from shared.wiring import get_ports

    models = get_ports().models
    # Given the local stack's ports, Then the router runs bedrock, openai and the mock
    assert models.names() == ("bedrock", "openai", "mock")
    # and the mock answers a scripted tool call, deterministically, at no cost
    request = ModelRequest(
        provider="mock",
        model="demo",
        system="",
        messages=(ModelMessage("user", "hi"),),
        mock={"script": [{"toolCalls": [{"name": "demo.crm:lookup", "arguments": {"id": "c-1"}}]}]},
    )
    first, again = models.complete(request), models.complete(request)
    assert first == again and first.tool_calls[0].name == "demo.crm:lookup" and first.cost_usd == 0.0
    # and an unknown provider is refused as the spec says
    with pytest.raises(ModelProviderError) as err:
        models.complete(ModelRequest(provider="nope", model="m", system="", messages=()))
    assert err.value.code == "validation_error"
