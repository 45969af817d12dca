"""A clean refusal that only the dtype's extremes trigger is undecided, not the target's
bug (triage/pipeline.py, ``refused_at_the_dtypes_edge``). Issue 30 (H200): CUDA's histc of
a float32 max raised "max must be larger than min" (max + 1 == max leaves no range to
bin) where eager CPU put it in its last bin; filed as new, a false positive."""
from __future__ import annotations

import pytest

from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import Failure
from mpsfuzz.triage.ablation import Explanation
from mpsfuzz.triage.pipeline import refused_at_the_dtypes_edge

from test_fault_campaigns import FAULT_TARGET, findings_in, mpsfuzz


def _case(*specials):
    return Case("histc", (TensorRecipe((), "float32", Layout(), ValueRecipe("small_int", 0, specials=specials)),))


RAISES = Failure("errors", "dut-raises", "raises", "max must be larger than min", "high", ("dut-raises",))


def test_only_a_refusal_that_needs_the_extremes_alone_is_undecided():
    needs_specials = Explanation(("specials",), "only when an input holds max")
    assert refused_at_the_dtypes_edge(_case((0, "max")), RAISES, needs_specials)
    # a NaN or a subnormal is a value the op must take: still the target's
    assert not refused_at_the_dtypes_edge(_case((0, "nan")), RAISES, needs_specials)
    assert not refused_at_the_dtypes_edge(_case((0, "max"), (1, "subnormal")), RAISES, needs_specials)
    # refusing whatever the values: the target's
    assert not refused_at_the_dtypes_edge(_case((0, "max")), RAISES, Explanation(("layout",), "gapped"))
    # a device fault is never a refusal
    fault = Failure("errors", "device-fault", "raises", "CUDA error", "critical", ("device-fault",))
    assert not refused_at_the_dtypes_edge(_case((0, "max")), fault, needs_specials)


@pytest.mark.slow
def test_a_campaign_files_histcs_refusal_of_the_extremes_as_undecided_and_of_ordinary_values_as_new(tmp_path):
    """The fault refuses every value so large that x + 1 == x in the dtype: the dtype's max
    (undecided: no reference says the call is in the op's domain), and ordinary values
    where the dtype's precision ends (bfloat16's 2^24 + 1: the target's bug, as CUDA's
    histc of a constant bfloat16 tensor of 512 would be). Each finding is filed by what
    its minimal case holds, whichever the campaign meets first."""
    from mpsfuzz.oracles.accuracy import OVERFLOWING_SPECIALS
    corpus = tmp_path / "corpus"
    run = mpsfuzz("run", "--ops", "histc", "--target", FAULT_TARGET, "--max-cases", "1500", "--seed", "1",
                  "--corpus", str(corpus), "--timeout", "5", "--shrink-budget", "20", "--no-progress",
                  faults="histc_refuses_degenerate_range", cwd=tmp_path)
    found = findings_in(corpus)
    assert found and {(f["op"], f["failure"]["kind"]) for f in found} == {("histc", "dut-raises")}, \
        run.stdout + run.stderr
    for f in found:
        specials = {name for r in f["case"]["inputs"] for _, name in r["values"]["specials"]}
        at_the_extremes = bool(specials) and specials <= set(OVERFLOWING_SPECIALS)
        assert f["status"] == ("undecided" if at_the_extremes else "new"), (specials, f["status"], f["message"])
        if at_the_extremes:
            assert "no independent reference says the call is in the op's domain" in f["message"]
    assert run.returncode == (1 if any(f["status"] == "new" for f in found) else 0), run.stdout + run.stderr
