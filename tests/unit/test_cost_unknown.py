"""Unknown cost stays unknown (decision 0147): a task or suite whose model calls are not all priced has no cost
(never a partial sum); a price registered on a binding prices its calls; a model no table knows costs None."""

from __future__ import annotations

import pytest

from shared.engine import grading
from shared.providers.prices import PriceTable, Rate

SUITE = {"suiteId": "s", "version": "1.0.0"}


def _trial(cost: float | None) -> dict[str, object]:
    return {"score": 1.0, "passed": True, "fixtureMissCount": 0, **({"costUsd": cost} if cost is not None else {})}


def test_one_unpriced_trial_makes_the_task_and_the_total_unknown() -> None:
    known = grading.task_result("a", [_trial(0.01), _trial(0.02)])
    partial = grading.task_result("b", [_trial(0.01), _trial(None)])
    assert known["costUsd"] == pytest.approx(0.03) and "costUsd" not in partial
    assert "totalCostUsd" not in grading.summary(SUITE, [known, partial], None)
    assert grading.summary(SUITE, [known], None)["totalCostUsd"] == pytest.approx(0.03)


def test_a_registered_price_prices_the_tokens_and_an_unknown_model_costs_none() -> None:
    rate = Rate.registered({"inputPerMTokUsd": 1000, "outputPerMTokUsd": 2000})
    assert rate.cost_usd(21, 4) == pytest.approx(0.029)
    table = PriceTable()
    assert table.cost_usd("gpt-test", 21, 4) is None
    assert table.cost_usd("gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)
