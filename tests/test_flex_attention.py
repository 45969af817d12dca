"""flex_attention in the catalogue (issue 38; pytorch/pytorch#190857, a fused attention
kernel's index arithmetic): it runs under mpsfuzz's own dispatch modes (the fault target,
the arbiter's moved intermediates, localisation), and a kernel that maps grouped query
heads to the wrong key/value head is found, explained by the grouping and minimised."""
from __future__ import annotations

import pytest
import torch
import torch.nn.attention.flex_attention as flex

from mpsfuzz.execution.dispatch_modes import DenseHigherOrderOps
from mpsfuzz.generation import catalogue
from mpsfuzz.generation.recipes import Case, Layout, TensorRecipe, ValueRecipe
from mpsfuzz.oracles import DEFAULT
from mpsfuzz.oracles.judge import judge_case
from mpsfuzz.testing.faults import FaultTarget
from mpsfuzz.triage.ablation import _condition_phrase, holds

from test_fault_campaigns import assert_repro_proves_the_fault, one_fault_campaign


FAULT = "attention_gqa_reads_the_wrong_kv_head"


def _attention_case(heads_q: int, heads_kv: int, **kwargs) -> Case:
    def t(heads, seed):
        return TensorRecipe((1, heads, 5, 16), "float32", Layout(), ValueRecipe("normal", seed))
    return Case("flex_attention", (t(heads_q, 1), t(heads_kv, 2), t(heads_kv, 3)),
                tuple(sorted({"enable_gqa": heads_q != heads_kv, **kwargs}.items())))


class _Recording(DenseHigherOrderOps):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def test_flex_attention_runs_under_a_dispatch_mode_that_sees_its_aten_ops_and_restores_the_switch():
    q, k, v = torch.randn(1, 2, 4, 16), torch.randn(1, 2, 6, 16), torch.randn(1, 2, 6, 16)
    expected = flex.flex_attention(q, k, v)
    before = flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG
    mode = _Recording()
    with mode:
        got = flex.flex_attention(q, k, v)
    torch.testing.assert_close(got, expected)
    assert any("softmax" in name or "exp" in name for name in mode.seen), mode.seen
    assert flex._FLEX_ATTENTION_DISABLE_COMPILE_DEBUG == before


def test_the_wrong_kv_head_is_wrong_only_with_more_than_one_kv_head_grouped():
    bad, clean = FaultTarget([FAULT]), FaultTarget([])
    grouped = _attention_case(4, 2)
    assert judge_case(grouped, clean, DEFAULT).failures == ()
    assert [f["oracle"] for f in judge_case(grouped, bad, DEFAULT).failures] == ["values"]
    # one kv head for every query head, or no grouping: any head mapping is right
    for case in (_attention_case(4, 1), _attention_case(3, 3)):
        assert judge_case(case, bad, DEFAULT).failures == (), case


def test_grouped_dims_are_a_condition_the_ablation_names():
    grouped = _attention_case(6, 2)
    assert holds("grouped:0:1:1", grouped) and holds("grouped:0:2:1", grouped)
    # a broadcast dim (1) or equal dims are no grouping
    assert not holds("grouped:0:1:1", _attention_case(6, 1))
    assert not holds("grouped:0:1:1", _attention_case(2, 2))
    phrase = _condition_phrase("grouped:0:1:1", grouped, ["q", "k", "v"])
    assert phrase == "dim 1 of `q` is a multiple of `k`'s (6 over 2 here; equal, it passes)"


def test_flex_attention_draws_grouped_heads_over_several_kv_heads():
    from mpsfuzz.generation.strategies import example_cases
    cases = example_cases(catalogue.get("flex_attention"), 60, seed=1)
    grouped = [c for c in cases if c.inputs[0].shape[1] > c.inputs[1].shape[1] > 1]
    assert grouped and all(dict(c.kwargs).get("enable_gqa") for c in grouped)


@pytest.mark.slow
def test_campaign_finds_explains_and_minimises_the_wrong_kv_head(tmp_path):
    finding = one_fault_campaign(tmp_path, "flex_attention", FAULT, 300)
    assert any(c.startswith("grouped:0:") for c in finding["conditions"]), finding["conditions"]
    assert "is a multiple of" in finding["explanation"], finding["explanation"]
    # minimised without losing the condition: more query heads than kv heads, more than one
    q, k = (finding["case"]["inputs"][i]["shape"] for i in (0, 1))
    assert q[1] > k[1] > 1 and q[1] % k[1] == 0, finding["case"]
    assert_repro_proves_the_fault(finding, FAULT, tmp_path)


# A gradient dispute recorded on an H200 (torch 2.11; docs/real-findings.md):
# q holds 2^31 + 1, so its scores are ~6e9 in float32; CUDA's backward gave -inf, CPU's 0,
# the float64 references 0. Filed as a bug of both backends; the scores' rounding (~512)
# leaves the recomputed probabilities undetermined.
RECORDED_SCORES_PAST_ROUNDING = (
    '{"format": 3, "op": "flex_attention", "variant": "grad", "inputs": [{"shape": [1, 2, 6, 6], "dtype": '
    '"float32", "layout": {"offset": 2, "gaps": [], "permutation": [0, 1, 3, 2], "expanded": []}, "values": '
    '{"distribution": "normal", "seed": 102659717, "low": null, "high": null, "specials": [[0, "2^31+1"], '
    '[65536, "2^31+1"], [2528, "2^31+1"]]}, "alias": null}, {"shape": [1, 1, 6, 6], "dtype": "float32", "layout": '
    '{"offset": 0, "gaps": [2, 1, 1, 1], "permutation": [], "expanded": []}, "values": {"distribution": '
    '"positive", "seed": 7770020, "low": null, "high": null, "specials": [[1403, "-1"]]}, "alias": null}, '
    '{"shape": [1, 1, 6, 6], "dtype": "float32", "layout": {"offset": 0, "gaps": [], "permutation": [], '
    '"expanded": []}, "values": {"distribution": "uniform", "seed": 19, "low": null, "high": null, "specials": '
    '[]}, "alias": null}], "kwargs": {"enable_gqa": true}}')


def test_scores_whose_rounding_exceeds_one_get_no_gradient_verdict():
    import json
    spec = catalogue.get("flex_attention")
    recorded = Case.from_json(json.loads(RECORDED_SCORES_PAST_ROUNDING))
    why = spec.grad_undefined(recorded.materialize("cpu"), recorded.kwargs_dict())
    assert why and "rounding in float32 exceeds 1" in why, why
    # ordinary scores keep their verdict: float32 with |q|, |k| of 4 (scores of 128), and
    # bfloat16 with 2 (scores of 32, rounded to within 0.125); bfloat16's scores of 128 are
    # rounded by up to 0.5, float32's of 2^24 by 1
    for dtype, size in ((torch.float32, 4.0), (torch.bfloat16, 2.0)):
        q, k = torch.full((1, 2, 8, 64), size, dtype=dtype), torch.full((1, 2, 8, 64), -size, dtype=dtype)
        assert spec.grad_undefined([q, k, k], {}) is None, dtype
    # scores of 2^50 are determined in float64, not in float32; a tanh soft-cap bounds them
    big = torch.full((1, 1, 4, 16), 2.0**24, dtype=torch.float64)
    assert spec.grad_undefined([big, big, big], {}) is None
    assert spec.grad_undefined([big.float(), big.float(), big.float()], {"score_mod": "soft_cap"}) is None
    assert spec.grad_undefined([big.float(), big.float(), big.float()], {}) is not None
