"""``python -m bench [name ...]``: which benchmarks a command line picks (each then runs in an interpreter of its
own)."""

from __future__ import annotations

import pytest

from bench.__main__ import MODULES, selected


def test_names_pick_their_benchmarks_in_the_order_given_and_none_picks_all():
    assert selected(["units", "bench_cost", "bench.bench_stats"]) == [
        "bench.bench_units",
        "bench.bench_cost",
        "bench.bench_stats",
    ]
    assert selected([]) == list(MODULES)


def test_a_name_that_is_no_benchmark_is_refused():
    with pytest.raises(ValueError, match="unit"):
        selected(["unit"])
