"""uint16/32/64 in the special ops (issue 38, pytorch#173636: CUDA's jitted `special.zeta`
read a uint16 operand as 0 and returned inf). Eager CPU promotes every integer dtype of a
`torch.special` function to the default float dtype; the op tables declare the wide
unsigned ones, and a fault modelled on the bug is found by a campaign, explained by the
dtype."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from mpsfuzz.generation import catalogue
from mpsfuzz.generation.strategies import example_cases
from mpsfuzz.testing.faults import FaultTarget
from test_fault_campaigns import assert_repro_proves_the_fault, one_fault_campaign

WIDE_UNSIGNED = ("uint16", "uint32", "uint64")
FAULT = "special_uint16_read_as_zero"


def _cpu_accepts(spec, dtype: str) -> bool:
    """Whether eager CPU computes every one of a few drawn cases of ``spec`` with its
    inputs in ``dtype``."""
    drawn = example_cases(dataclasses.replace(spec, dtypes=(dtype,), input_dtypes=()), 8, seed=1,
                          allow_variants=False)
    try:
        for case in drawn:
            spec.fn(*case.materialize("cpu"), **case.kwargs_dict())
    except (RuntimeError, NotImplementedError):
        return False
    return True


def test_every_special_op_cpu_computes_in_the_wide_unsigned_dtypes_declares_them():
    specials = [catalogue.get(n) for n in catalogue.all_ops() if n.startswith("special.")]
    assert len(specials) >= 50
    undeclared, refused = [], []
    for spec in specials:
        accepted = [d for d in WIDE_UNSIGNED if _cpu_accepts(spec, d)]
        if accepted and not set(accepted) <= set(spec.dtypes):
            undeclared.append(spec.name)
        if set(WIDE_UNSIGNED) - set(accepted) & set(spec.dtypes):
            refused.append(spec.name)
    assert not undeclared, f"CPU computes these in uint16/32/64, which they do not declare: {undeclared}"
    assert not refused, f"these declare a wide unsigned dtype CPU refuses: {refused}"


def test_zeta_draws_the_wide_unsigned_dtypes():
    drawn = example_cases(catalogue.get("special.zeta"), 300, seed=1)
    assert sum(1 for c in drawn if c.inputs[0].dtype in WIDE_UNSIGNED) >= 30
    assert any(c.inputs[0].dtype == "uint16" for c in drawn)


def test_the_fault_reads_uint16_operands_of_special_kernels_only():
    target = FaultTarget([FAULT])
    x, q = torch.tensor([2.0, 4.0]), torch.tensor([1, 2], dtype=torch.uint16)
    for other in (torch.uint32, torch.uint64, torch.int16, torch.float32):
        assert torch.equal(target.run(torch.special.zeta, x, q.to(other)), torch.special.zeta(x, q.to(other)))
    assert torch.equal(target.run(torch.exp, q), torch.exp(q))  # not a special kernel
    assert not target.fired
    assert torch.isinf(target.run(torch.special.zeta, x, q)).all()  # the report's [inf, inf]
    assert not torch.equal(target.run(torch.special.i1, q), torch.special.i1(q))
    assert target.fired[FAULT] == 2


@pytest.mark.slow
def test_a_zeta_campaign_finds_the_uint16_fault_and_explains_it_by_the_dtype(tmp_path):
    finding = one_fault_campaign(tmp_path, "special.zeta", FAULT, 300)
    assert "only uint16 (" in finding["explanation"], finding["explanation"]
    assert "dtypes:uint16" in finding["conditions"], finding["conditions"]
    assert all(r["dtype"] == "uint16" for r in finding["case"]["inputs"]), finding["case"]   # minimised, kept
    assert_repro_proves_the_fault(finding, FAULT, tmp_path)
