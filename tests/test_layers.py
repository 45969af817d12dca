"""The package's layout shows the data flow: imports point one way, down the flow.

Every module under ``mpsfuzz/`` belongs to a layer (ARCHITECTURE.md):

    0  mpsfuzz/__init__.py, events.py, atomic.py
    1  generation/   dtypes, recipes, op specs and the catalogue, strategies
    2  execution/    targets, workers, the executor (what a case does on both sides)
    3  oracles/      judging an observation
    4  triage/       re-running, reducing, explaining and localising a failure
    5  corpus/       findings on disk
    6  reports/      what the user reads
    7  campaign/     the engine that drives all of the above
    8  cli.py, __main__.py, pytest_plugin.py, targets.py (the public re-export), testing/

A module may import (at the top or inside a function) only from its own layer or a lower
one, and never a private (``_name``) from another module. The source is parsed, not
imported: an import that runs only on some path counts too.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mpsfuzz"

LAYERS = {
    "mpsfuzz": 0, "mpsfuzz.events": 0, "mpsfuzz.atomic": 0, "mpsfuzz.scratch": 0,
    "mpsfuzz.generation": 1,
    "mpsfuzz.execution": 2,
    "mpsfuzz.oracles": 3,
    "mpsfuzz.triage": 4,
    "mpsfuzz.corpus": 5,
    "mpsfuzz.reports": 6,
    "mpsfuzz.campaign": 7,
    "mpsfuzz.cli": 8, "mpsfuzz.__main__": 8, "mpsfuzz.pytest_plugin": 8, "mpsfuzz.targets": 8,
    "mpsfuzz.testing": 8,
}

# The one upward import allowed: the package root re-exports the users' kernel API
# (``mpsfuzz.kernel``, ``mpsfuzz.tensor``: the names a user's kernel file writes) from
# ``generation/kernels.py``, lazily in its module ``__getattr__``, so ``import mpsfuzz``
# stays light and no module of the package reaches layer 1 through the root.
PUBLIC_API = {("mpsfuzz", "mpsfuzz.generation.kernels")}


def layer_of(module: str) -> int | None:
    """The layer of ``module``: that of the longest entry of LAYERS that is it or a
    package above it (the package ``mpsfuzz`` itself only for exactly ``mpsfuzz``)."""
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        name = ".".join(parts[:n])
        if name in LAYERS:
            return LAYERS[name]
    return LAYERS.get(module)


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def package_modules(package: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(p, package): p for p in sorted(package.rglob("*.py"))}


def imports(module: str, source: str, is_package: bool, known_modules) -> list[tuple[str, str, int]]:
    """(imported mpsfuzz module, imported name or "", line) for every import statement in
    ``source``, inside functions too; relative imports resolved. ``from pkg import mod``
    counts as importing ``pkg.mod`` where that is a module."""
    here = module.split(".") if is_package else module.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(a.name, "", node.lineno) for a in node.names if a.name.split(".")[0] == "mpsfuzz"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "mpsfuzz":
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.append((sub, "", node.lineno) if sub in known_modules else (target, alias.name, node.lineno))
    return out


def violations(modules: dict[str, str], packages=frozenset()) -> tuple[list[str], list[str], list[str]]:
    """(modules in no layer, upward imports, private names imported from another module)
    of ``modules`` ({name: source}); ``packages``: the names that are packages."""
    unlayered, upward, private = [], [], []
    for module, source in sorted(modules.items()):
        mine = layer_of(module)
        if mine is None:
            unlayered.append(module)
            continue
        for target, name, line in imports(module, source, module in packages, modules):
            theirs = layer_of(target)
            if (theirs is None or theirs > mine) and (module, target) not in PUBLIC_API:
                upward.append(f"{module} (layer {mine}) -> {target} (layer {theirs}), line {line}")
            if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
                private.append(f"{module} imports {name} from {target}, line {line}")
    return unlayered, list(dict.fromkeys(upward)), list(dict.fromkeys(private))


def _package_sources():
    found = package_modules()
    sources = {name: path.read_text() for name, path in found.items()}
    packages = {name for name, path in found.items() if path.name == "__init__.py"}
    return sources, packages


def test_the_fuzzer_package_is_gone():
    assert not (PACKAGE / "fuzzer").exists(), "mpsfuzz/fuzzer/ was split into the layers: it must not come back"


def test_every_module_belongs_to_a_layer():
    sources, packages = _package_sources()
    unlayered, _, _ = violations(sources, packages)
    assert not unlayered, "modules in no layer (add them to LAYERS here and in ARCHITECTURE.md):\n  " + \
        "\n  ".join(unlayered)


def test_imports_point_down_the_flow():
    sources, packages = _package_sources()
    _, upward, _ = violations(sources, packages)
    assert not upward, "imports that point up the flow (a module may import only its own layer or lower " \
        "ones):\n  " + "\n  ".join(upward)


def test_no_module_imports_another_modules_private_names():
    sources, packages = _package_sources()
    _, _, private = violations(sources, packages)
    assert not private, "private names imported across modules (make them public):\n  " + "\n  ".join(private)


@pytest.mark.parametrize("module, source, expected", [
    # upward, at the top and inside a function, absolute and relative
    ("mpsfuzz.generation.validity", "from ..execution.executor import run_reference\n", "upward"),
    ("mpsfuzz.execution.worker", "def f():\n    from ..triage.localise import localise_case\n", "upward"),
    ("mpsfuzz.corpus.finding", "import mpsfuzz.campaign.engine\n", "upward"),
    ("mpsfuzz.oracles.values", "from mpsfuzz import cli\n", "upward"),
    # the root's public re-export is the kernel API, nothing else
    ("mpsfuzz", "def __getattr__(name):\n    from .generation import kernels\n", None),
    ("mpsfuzz", "def __getattr__(name):\n    from .generation import catalogue\n", "upward"),
    # private names
    ("mpsfuzz.triage.localise", "from .kernel_call import _snapshot\n", "private"),
    # fine: own layer, lower layers, dunders
    ("mpsfuzz.triage.localise", "from .kernel_call import snapshot\nfrom ..oracles import Failure\n", None),
    ("mpsfuzz.corpus.finding", "from .. import __version__\n", None),
])
def test_the_checks_catch_what_they_forbid(module, source, expected):
    known = {"mpsfuzz.cli", "mpsfuzz.triage.kernel_call", "mpsfuzz.campaign.engine",
             "mpsfuzz.generation.kernels", "mpsfuzz.generation.catalogue"}
    unlayered, upward, private = violations({module: source, **{k: "" for k in known}},
                                            packages={"mpsfuzz"} if module == "mpsfuzz" else frozenset())
    assert not unlayered
    assert bool(upward) == (expected == "upward"), upward
    assert bool(private) == (expected == "private"), private


def test_a_module_outside_the_layers_is_reported():
    unlayered, _, _ = violations({"mpsfuzz.fuzzer.engine": "", "mpsfuzz.generation.x": ""})
    assert unlayered == ["mpsfuzz.fuzzer.engine"]
