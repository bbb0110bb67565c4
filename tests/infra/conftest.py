"""Infra tier setup: jsii runs on the machine's Node 20; silence its end-of-life banner before any aws_cdk import."""

from __future__ import annotations

import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
