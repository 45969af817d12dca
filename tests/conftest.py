"""Shared fixtures."""
from __future__ import annotations

import signal
from dataclasses import replace

import pytest

from mpsfuzz.generation import catalogue
from mpsfuzz.generation import settings as generation_settings

# A suite started in the background of a non-interactive shell (`cmd &`) inherits SIGINT
# ignored, and Python then keeps it ignored: the Ctrl-C tests would see nothing. Each
# test process takes Python's usual handler back (children then start with the default).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def registered():
    """register(spec): put a test op into the catalogue for this test only."""
    added = []

    def register(spec):
        catalogue.all_ops()
        catalogue.REGISTRY[spec.name] = spec
        added.append(spec.name)
        return spec
    yield register
    for name in added:
        catalogue.REGISTRY.pop(name, None)


@pytest.fixture(autouse=True)
def _opinfo_specs_stay_in_their_test():
    """Looking an OpInfo op up by name (``catalogue.get("opinfo:add")``) caches its spec
    in the catalogue; left there it would join every later test's ``all_ops()`` in this
    worker process. Each test gets the catalogue as it found it."""
    before = {name for name in catalogue.REGISTRY if name.startswith("opinfo:")}
    yield
    for name in [n for n in catalogue.REGISTRY if n.startswith("opinfo:") and n not in before]:
        catalogue.REGISTRY.pop(name, None)


@pytest.fixture
def with_settings():
    """with_settings(**changes): install this process's GenerationSettings with ``changes``
    (cumulative, e.g. ``max_bytes=40 << 30``) for this test; the earlier ones come back
    after it. (mpsfuzz is configured by the settings it is handed, never the environment.)"""
    before = generation_settings.installed()

    def install(**changes):
        changed = replace(generation_settings.installed(), **changes)
        generation_settings.install(changed)
        return changed
    yield install
    generation_settings.install(before)
