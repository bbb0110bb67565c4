"""The model-provider router built in wiring, the settings that shape it, and the price table."""

from __future__ import annotations

import dataclasses

import pytest

from shared.ports import ModelMessage, ModelProviderError, ModelRequest
from shared.providers.prices import PriceTable, Rate, parse_overrides
from shared.settings import get_settings
from shared.transports.egress import EgressPolicy
from shared.transports.http import GuardedHttpTransport
from shared.wiring import ModelRouter, build_models


def _settings(**kw):
    return dataclasses.replace(get_settings(), **kw)


def _models(**kw) -> ModelRouter:
    settings = _settings(**kw)
    return build_models(settings, GuardedHttpTransport(EgressPolicy.from_entries(list(settings.egress_allow))))


def _request(provider: str, **kw) -> ModelRequest:
    return ModelRequest(provider=provider, model="m", system="", messages=(ModelMessage("user", "hi"),), **kw)


def test_the_default_host_runs_all_three_and_dispatches_on_the_provider():
    models = _models()
    assert models.names() == ("bedrock", "openai", "mock")
    reply = models.complete(_request("mock", mock={"id": "stream-text", "config": {"tokens": ["ok"]}}))
    assert (reply.text, reply.cost_usd) == ("ok", 0.0)


def test_an_unknown_provider_is_a_validation_error():
    with pytest.raises(ModelProviderError) as err:
        _models().complete(_request("anthropic-direct"))
    assert err.value.code == "validation_error" and "bedrock, openai, mock" in err.value.reason


def test_a_disabled_provider_is_a_validation_error_and_a_disabled_mock_is_forbidden():
    models = _models(model_providers=("bedrock",))
    assert models.names() == ("bedrock",)
    with pytest.raises(ModelProviderError) as err:
        models.complete(_request("openai"))
    assert err.value.code == "validation_error"
    with pytest.raises(ModelProviderError) as mock:
        models.complete(_request("mock"))
    assert mock.value.code == "mock_provider_forbidden"


def test_a_prod_stage_never_serves_the_mock():
    models = _models(stage="prod")
    assert models.names() == ("bedrock", "openai")
    with pytest.raises(ModelProviderError) as err:
        models.complete(_request("mock", mock={"id": "stream-text"}))
    assert err.value.code == "mock_provider_forbidden"
    assert _models(stage="staging").names() == ("bedrock", "openai", "mock")


def test_the_openai_adapter_goes_through_the_egress_guard():
    # the host's egress policy (no EGRESS_ALLOW) refuses loopback before connecting
    with pytest.raises(ModelProviderError) as err:
        _models(egress_allow=()).complete(_request("openai", base_url="http://127.0.0.1:9/v1", credential="sk-x"))
    assert err.value.code == "external_call_failed" and "loopback" in err.value.reason


def test_adapters_are_built_on_first_use_only():
    built: list[str] = []

    class Echo:
        def complete(self, request):
            raise ModelProviderError("external_call_failed", request.provider)

    def factory(name):
        def make():
            built.append(name)
            return Echo()

        return make

    router = ModelRouter(("a", "b"), {"a": factory("a"), "b": factory("b")}, mock_allowed=True)
    assert built == []
    for _ in range(2):
        with pytest.raises(ModelProviderError):
            router.complete(_request("a"))
    assert built == ["a"]


def test_model_providers_naming_an_unknown_provider_fails_at_build():
    with pytest.raises(ValueError, match="gemini"):
        _models(model_providers=("bedrock", "gemini"))


def test_settings_read_model_providers_stage_and_prices(monkeypatch):
    monkeypatch.setenv("MODEL_PROVIDERS", " openai , mock ")
    monkeypatch.setenv("STAGE", "prod")
    monkeypatch.setenv("MODEL_PRICES", '{"team-model": {"input": 1, "output": 2}}')
    get_settings.cache_clear()
    try:
        s = get_settings()
        assert (s.model_providers, s.stage) == (("openai", "mock"), "prod")
        assert PriceTable.from_setting(s.model_prices).cost_usd("team-model", 1_000_000, 500_000) == 2.0
        monkeypatch.setenv("MODEL_PRICES", '{"team-model": {"input": -1, "output": 2}}')
        get_settings.cache_clear()
        with pytest.raises(ValueError, match="non-negative"):
            get_settings()
    finally:
        get_settings.cache_clear()


@pytest.mark.parametrize(
    "raw",
    [
        "[1]",
        "{",
        '{"m": {"input": 1}}',
        '{"m": {"input": 1, "output": "2"}}',
        '{"m": {"input": 1, "output": 2, "cached": 0}}',
        '{"m": {"input": true, "output": 1}}',
    ],
)
def test_malformed_price_overrides_are_refused(raw):
    with pytest.raises(ValueError, match="MODEL_PRICES"):
        parse_overrides(raw)


def test_prices_override_and_extend_the_table_and_unknown_models_have_no_cost():
    table = PriceTable({"gpt-4o": Rate(1.0, 1.0), "team-model": Rate(0.5, 0.5)})
    assert table.cost_usd("gpt-4o", 1_000_000, 1_000_000) == 2.0
    assert table.cost_usd("team-model", 2_000_000, 0) == 1.0
    assert table.cost_usd("gpt-4o-mini", 1_000_000, 0) == 0.15  # untouched default
    assert table.cost_usd("no-such-model", 10, 10) is None
    assert table.cost_usd("mock", 10**9, 10**9) == 0.0
