"""Task labels from a run's input (issue 36): the default summary and ``--label`` templates."""

from __future__ import annotations

from shared.services import task_labels
from shared.services.task_labels import labelled, render, summary


def test_a_summary_is_one_short_line_of_the_input():
    # An object reads as key=value pairs in order; a string as it is; long text is cut with an ellipsis
    assert summary({"customer": "ACME", "order": 17}) == "customer=ACME, order=17"
    assert summary({"lines": [1], "customer": "ACME"}) == "customer=ACME, lines=[1]"  # scalars first
    assert summary("refund   order\n17") == "refund order 17"
    assert summary([1, 2]) == "[1,2]"
    cut = summary("x" * 500)
    assert len(cut) == task_labels.SUMMARY_CHARS and cut.endswith("…")


def test_a_template_fills_input_members_and_marks_absent_ones():
    value = {"customer": {"name": "ACME"}, "items": [{"sku": "a-1"}], "n": 3}
    assert render("{input.customer.name} #{input.n}", value) == "ACME #3"
    assert render("{input.items.0.sku} / {input.items.5.sku} / {input.nope}", value) == "a-1 / - / -"
    assert render("{input.customer}", value) == '{"name":"ACME"}'
    assert render("{input}", "plain") == "plain"
    assert render("{other} stays", value) == "{other} stays"
    assert len(render("{input}", "y" * 900)) == task_labels.MAX_CHARS


def test_labelled_keeps_other_extension_members():
    task = {"taskId": "t", "extensions": {"openwop-serverless": {"knownFailure": {"reason": "r"}}}}
    assert labelled(task, "L")["extensions"] == {"openwop-serverless": {"knownFailure": {"reason": "r"}, "label": "L"}}
    assert labelled({"taskId": "t"}, "L") == {"taskId": "t", "extensions": {"openwop-serverless": {"label": "L"}}}
