"""OpInfo breadth (mpsfuzz.generation.opinfo): specs from PyTorch's op_db when it imports,
a one-line reason and no specs when it does not.

The main path needs ``torch.testing._internal.common_methods_invocations`` to import,
which needs the ``expecttest`` package. Where it is missing the main-path tests are
*skipped with that reason* (visible in ``pytest -rs``), and the fallback is tested.
Set MPSFUZZ_REQUIRE_OPINFO=1 (e.g. in CI, once expecttest is in the test extras) to
make a missing op_db a failure instead of a skip.
"""
from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import sys
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed

from mpsfuzz.execution.executor import run_reference
from mpsfuzz.execution.observation import Raised
from mpsfuzz.generation import catalogue, opinfo
from mpsfuzz.generation.recipes import Case
from mpsfuzz.generation.strategies import cases

AVAILABLE, WHY = opinfo.available()
if not AVAILABLE and os.environ.get("MPSFUZZ_REQUIRE_OPINFO"):
    raise RuntimeError(f"MPSFUZZ_REQUIRE_OPINFO is set but {WHY}")
needs_opinfo = pytest.mark.skipif(not AVAILABLE, reason=WHY)


@pytest.fixture(scope="module")
def all_specs():
    """The specs `--ops opinfo` fuzzes: those with templates (computing every op's
    templates takes 25-45 s on 2 cores, so only the slow tests ask for the whole list)."""
    return opinfo.specs(set(catalogue.all_ops()))


@pytest.fixture(scope="module")
def listed_specs():
    """Every usable OpInfo entry outside the catalogue, its templates not computed (under
    a second): a superset of ``all_specs``, so what holds of each listed spec holds of
    each fuzzed one."""
    return opinfo.specs(set(catalogue.all_ops()), check=False)


def with_templates(specs, count: int, seed: int) -> list:
    """``count`` specs drawn at random from ``specs`` among those with templates (as a
    sample of ``all_specs`` would be), computing the templates of the drawn ones only."""
    order = random.Random(seed).sample(specs, len(specs))
    return list(itertools.islice((s for s in order if opinfo.templates(s.name)), count))


# -- without op_db ---------------------------------------------------------------------------

def test_available_gives_a_one_line_reason():
    ok, why = opinfo.available()
    assert isinstance(ok, bool) and why and "\n" not in why
    if not ok:
        assert why.startswith("OpInfo is unavailable")
        assert opinfo.specs(set()) == []
        with pytest.raises(KeyError):
            opinfo.spec("opinfo:nn.functional.celu")


def test_unavailable_import_is_reported_not_raised(monkeypatch):
    monkeypatch.setattr(opinfo, "_DB", None)
    monkeypatch.setattr(opinfo, "_DB_ERROR", None)
    monkeypatch.setattr(opinfo, "_MODULE", "mpsfuzz_no_such_module.common_methods_invocations")
    ok, why = opinfo.available()
    assert not ok and "mpsfuzz_no_such_module" in why and "\n" not in why
    assert opinfo.specs(set()) == []


def test_call_encoding_round_trips_without_op_db():
    import torch
    enc = opinfo._Encoder(torch.float32, None)
    x, idx = torch.randn(2, 3), torch.tensor([[0, 2, 1]])
    call = {"input": enc.encode(x, is_input=True),
            "args": [1, enc.encode(idx), enc.encode((slice(None, 2), Ellipsis))],
            "kwargs": {"dtype": enc.encode(torch.float64), "alpha": enc.encode(float("inf")),
                       "memory_format": enc.encode(torch.channels_last), "sizes": enc.encode(torch.Size([2, 3]))}}
    assert enc.shapes == [(2, 3)]
    y = torch.zeros(2, 3, dtype=torch.float16)
    inp, args, kwargs = opinfo.build_call(json.dumps(call), [y])
    assert inp is y and args[0] == 1 and torch.equal(args[1], idx)
    assert args[2] == (slice(None, 2), Ellipsis)
    assert kwargs == {"dtype": torch.float64, "alpha": float("inf"),
                      "memory_format": torch.channels_last, "sizes": (2, 3)}


# -- with op_db ------------------------------------------------------------------------------

@pytest.mark.slow
@needs_opinfo
def test_many_specs_none_in_the_catalogue(all_specs):
    names = [s.name for s in all_specs]
    ours = set(catalogue.all_ops())
    # The catalogue keeps growing and takes OpInfo entries over: count both.
    covered = [op for op in opinfo._database().values() if opinfo.skip_reason(op) is None
               and opinfo.catalogue_names(op) & ours]
    assert len(names) >= 150 and len(names) + len(covered) >= 400, (len(names), len(covered))
    assert len(set(names)) == len(names)
    for s in all_specs:
        assert s.name.startswith(opinfo.PREFIX) and s.family == opinfo.FAMILY and s.doc
        assert not (opinfo.catalogue_names(opinfo._database()[s.name.removeprefix(opinfo.PREFIX)]) & ours)
        assert s.name not in ours
    # Catalogue ops are left out, under OpInfo's own spelling too.
    for ours_name, theirs in (("add", "add"), ("linalg.solve", "linalg.solve"), ("special.i0", "i0")):
        if ours_name in ours:
            assert opinfo.PREFIX + theirs not in names


@needs_opinfo
def test_random_and_undefined_ops_are_left_out(listed_specs):
    names = {s.name.removeprefix(opinfo.PREFIX) for s in listed_specs}
    for bad in ("bernoulli", "normal", "nn.functional.dropout", "empty_like", "new_empty",
                "multinomial", "randn_like", "nn.functional.rrelu"):
        # listed, an op is still left out of all_specs when its templates show it random
        assert bad not in names or not opinfo.templates(bad), bad


@needs_opinfo
def test_resolve_explains_what_it_refuses():
    for item, words in (("opinfo:bernoulli", "random"), ("opinfo:no_such_op", "no entry"),
                        ("opinfo:eye", "no usable")):
        with pytest.raises(LookupError, match=words):
            opinfo.resolve(item)


@needs_opinfo
def test_spec_by_name_matches_the_listed_one(listed_specs):
    listed = {s.name: s for s in listed_specs}
    name = "opinfo:nn.functional.celu" if "opinfo:nn.functional.celu" in listed else sorted(listed)[0]
    again = opinfo.spec(name)
    assert again.name == name and again.dtypes == listed[name].dtypes
    with pytest.raises(KeyError):
        opinfo.spec("opinfo:no_such_op")


def _validity(spec, examples: int) -> tuple[int, int]:
    counts = [0, 0]

    @hypothesis_seed(0)
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(cases(spec, max_side=8))
    def check(case):
        case = Case.from_json(json.loads(json.dumps(case.to_json())))  # as the worker sees it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out, _ = run_reference(case, spec, case.kwargs_dict())
        counts[0] += 1
        counts[1] += not isinstance(getattr(out, "outputs", out), Raised)  # SideResult or bare
    check()
    return tuple(counts)


@needs_opinfo
def test_sampled_specs_build_cases_cpu_accepts(listed_specs):
    chosen = with_templates(listed_specs, 30, seed=0)
    assert len(chosen) == 30
    total = valid = 0
    for spec in chosen:
        n, ok = _validity(spec, 6)
        total, valid = total + n, valid + ok
    assert total and valid / total >= 0.7, (valid, total)


@needs_opinfo
def test_domain_and_literal_indices():
    import torch
    (acos,) = opinfo.resolve("opinfo:acos")  # explicit names work even for catalogue ops
    assert not acos.allow_specials and opinfo.templates(acos.name)
    for t in opinfo.templates(acos.name):
        assert t.values[0]["low"] > -1 and t.values[0]["high"] < 1
    # gather's index is another dtype than the reference one: a literal, never fuzzed.
    for t in opinfo.templates("opinfo:gather"):
        call = json.loads(t.call)
        index = call["args"][1]
        assert "L" in index and index["dtype"] not in ("=", "float32")  # int64, int32, uint8...
        inp, args, _ = opinfo.build_call(t.call, [torch.zeros(s) for s in t.shapes])
        assert not args[1].is_floating_point()


_DUMP = """
import json, sys
from mpsfuzz.generation import opinfo
out = {}
for name in sys.argv[1:]:
    out[name] = [[t.shapes, t.call, json.dumps(t.values)] for t in opinfo.templates(name)]
print(json.dumps(out))
"""


@pytest.mark.slow
@needs_opinfo
def test_templates_are_deterministic_across_processes(all_specs):
    names = [s.name for s in random.Random(1).sample(all_specs, min(25, len(all_specs)))]
    runs = [subprocess.run([sys.executable, "-c", _DUMP, *names], capture_output=True, text=True,
                           check=True, env=dict(os.environ, PYTHONHASHSEED=str(seed))).stdout
            for seed in (1, 2)]
    assert runs[0] == runs[1]
    assert any(json.loads(runs[0]).values())


@needs_opinfo
def test_ops_on_external_linalg_libraries_draw_no_nonfinite_inputs(listed_specs):
    """torch leaves LAPACK/MAGMA/cuSOLVER-backed ops undefined on inf and NaN (a CUDA
    qr of [[4], [nan]] returned R = 4, CPU NaN: not a bug by that contract). Such
    OpInfo entries draw what the catalogue's own solvers draw: no non-finite values, no
    extremes; ops on torch's own kernels keep every special."""
    from mpsfuzz.generation.recipes import NONFINITE_SPECIALS
    from mpsfuzz.generation.strategies import example_cases
    by_name = {s.name.removeprefix(opinfo.PREFIX): s for s in listed_specs}
    backed = {name for name, s in by_name.items() if opinfo.needs_linalg_library(opinfo._database()[name])}
    assert {"qr", "svd", "cholesky"} <= backed, sorted(backed)
    assert not ({"cdist", "grid_sampler_2d", "sin", "nn.functional.softmax"} & backed)
    for name in backed:
        assert not by_name[name].allow_nonfinite and not by_name[name].allow_specials, name
    for name in ("cdist", "grid_sampler_2d"):
        if name in by_name:
            assert by_name[name].allow_nonfinite, name
    drawn = example_cases(by_name["qr"], 60, seed=3)
    assert drawn and not any(n in NONFINITE_SPECIALS for c in drawn for r in c.inputs for _, n in r.values.specials)
    sampled = example_cases(by_name["cdist"], 120, seed=3)
    assert any(n in NONFINITE_SPECIALS for c in sampled for r in c.inputs for _, n in r.values.specials)
