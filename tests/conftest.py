"""Shared fixtures."""
from __future__ import annotations

import os
import signal
from dataclasses import replace

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation import settings as generation_settings

# A suite started in the background of a non-interactive shell (`cmd &`) inherits SIGINT
# ignored, and Python then keeps it ignored: the Ctrl-C tests would see nothing. Each
# test process takes Python's usual handler back (children then start with the default).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _import_every_mpsfuzz_module() -> None:
    """Hypothesis draws, now and then, a constant of the code it finds loaded (its "local
    constants": every literal of each module of this checkout in ``sys.modules``), so the
    same seed draws other cases once another module of mpsfuzz has been imported: a test
    that runs the CLI in this process (importing ``mpsfuzz.cli``) changed what every later
    ``example_cases`` drew in the process, and draw counts depended on the tests' order.
    Every module loaded before the first test: the constants are the same whatever the
    order."""
    import importlib
    import pkgutil

    import mpsfuzz
    for module in pkgutil.walk_packages(mpsfuzz.__path__, "mpsfuzz."):
        # (not the chaos module: importing it registers its oracles, by design)
        if not module.name.endswith("__main__") and module.name != "mpsfuzz.testing.chaos":
            importlib.import_module(module.name)


_import_every_mpsfuzz_module()


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# Each pytest-xdist worker takes its share of the cores for torch's intra-op pool (issue 39,
# point 3): two workers of a thread per core each on 2 cores oversubscribe them, and the
# pools' threads spin waiting on each other: test_large_sizes' conv2d@huge took 4 s alone
# and 120 s beside another worker (the module 269 s under -n 2, 111 s with a thread each).
# Only tensors past torch's grain size use the pool (the large-size tests'); the fuzzer's
# workers limit their own (execution/worker.py: limit_threads).
_XDIST_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
if _XDIST_WORKERS > 1:
    torch.set_num_threads(max(1, _cores() // _XDIST_WORKERS))


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
