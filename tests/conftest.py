"""Shared fixtures."""
from __future__ import annotations

import pytest

from mpsfuzz.fuzzer import catalogue


@pytest.fixture
def registered():
    """register(spec): put a test op into the catalogue for this test only."""
    added = []

    def register(spec):
        catalogue.all_ops()
        catalogue._REGISTRY[spec.name] = spec
        added.append(spec.name)
        return spec
    yield register
    for name in added:
        catalogue._REGISTRY.pop(name, None)
