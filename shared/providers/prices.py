"""Cost estimates: USD per million input / output tokens, by model id.

The defaults are the providers' published on-demand list prices at the time of writing (Bedrock: us-east-1,
on-demand, no batch or cache discounts; OpenAI: the standard tier). They are estimates for ``provider.usage``, not
invoices: an operator whose contract differs sets ``MODEL_PRICES``, a JSON object ``{"<model id>": {"input": <usd
per 1M>, "output": <usd per 1M>}, ...}`` that adds to and overrides this table. A model with no price gets
``cost_usd = None`` (unknown, never a guessed 0). The mock provider costs 0. A tenant prices its own model on the
agent version's binding (``model.price``: ``Rate.registered``), which prices that binding's calls instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

MOCK = "mock"


@dataclass(frozen=True)
class Rate:
    input_per_mtok: float
    output_per_mtok: float

    @classmethod
    def registered(cls, price: Mapping[str, float]) -> Rate:
        """The ``price`` of an agent version's model binding (``{inputPerMTokUsd, outputPerMTokUsd}``, validated at
        registration): it prices that binding's calls instead of the table (decision 0147)."""
        return cls(float(price["inputPerMTokUsd"]), float(price["outputPerMTokUsd"]))

    def cost_usd(self, input_tokens: int, output_tokens: int) -> float:
        return round((input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1_000_000, 10)


DEFAULT_RATES: dict[str, Rate] = {
    # Amazon Bedrock (on-demand, us-east-1)
    "anthropic.claude-3-haiku-20240307-v1:0": Rate(0.25, 1.25),
    "anthropic.claude-3-5-haiku-20241022-v1:0": Rate(0.80, 4.00),
    "anthropic.claude-3-5-sonnet-20240620-v1:0": Rate(3.00, 15.00),
    "anthropic.claude-3-5-sonnet-20241022-v2:0": Rate(3.00, 15.00),
    "anthropic.claude-3-7-sonnet-20250219-v1:0": Rate(3.00, 15.00),
    "amazon.nova-micro-v1:0": Rate(0.035, 0.14),
    "amazon.nova-lite-v1:0": Rate(0.06, 0.24),
    "amazon.nova-pro-v1:0": Rate(0.80, 3.20),
    "meta.llama3-1-8b-instruct-v1:0": Rate(0.22, 0.22),
    # OpenAI (standard tier)
    "gpt-4o": Rate(2.50, 10.00),
    "gpt-4o-mini": Rate(0.15, 0.60),
    "gpt-4.1": Rate(2.00, 8.00),
    "gpt-4.1-mini": Rate(0.40, 1.60),
    "gpt-4.1-nano": Rate(0.10, 0.40),
    "o3-mini": Rate(1.10, 4.40),
    # the mock provider's every model
    MOCK: Rate(0.0, 0.0),
}

# Bedrock cross-region inference profiles prefix the model id with a geography ("us.anthropic...").
_PROFILE_PREFIXES = ("us.", "eu.", "apac.", "us-gov.", "global.", "jp.", "au.", "ca.")


def parse_overrides(raw: str) -> dict[str, Rate]:
    """``MODEL_PRICES`` -> rates. An empty setting is no override; a malformed one is a ``ValueError`` naming what
    is wrong (read at cold start, so a typo fails the deployment's first call loudly, not silently as cost 0)."""
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"MODEL_PRICES is not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ValueError("MODEL_PRICES must be a JSON object of model id -> {input, output}")
    out: dict[str, Rate] = {}
    for model, rate in data.items():
        if not isinstance(rate, dict) or set(rate) != {"input", "output"}:
            raise ValueError(f'MODEL_PRICES[{model!r}] must be {{"input": n, "output": n}}')
        values = []
        for key in ("input", "output"):
            v = rate[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"MODEL_PRICES[{model!r}].{key} must be a non-negative number")
            values.append(float(v))
        out[str(model)] = Rate(values[0], values[1])
    return out


class PriceTable:
    def __init__(self, overrides: Mapping[str, Rate] | None = None) -> None:
        self._rates = {**DEFAULT_RATES, **(overrides or {})}

    @classmethod
    def from_setting(cls, raw: str) -> PriceTable:
        return cls(parse_overrides(raw))

    def rate(self, model: str) -> Rate | None:
        if model in self._rates:
            return self._rates[model]
        for prefix in _PROFILE_PREFIXES:
            if model.startswith(prefix) and model[len(prefix) :] in self._rates:
                return self._rates[model[len(prefix) :]]
        return None

    def cost_usd(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        rate = self.rate(model)
        return None if rate is None else rate.cost_usd(input_tokens, output_tokens)
