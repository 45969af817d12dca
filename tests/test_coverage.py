"""Every argument drawn (issue 30, point 6): each op's public function, its parameters,
which of them and which of their values the catalogue's builders draw, and `mpsfuzz
coverage`, which says so."""
from __future__ import annotations

import pytest
import torch.nn.functional as F
from hypothesis import strategies as st

from mpsfuzz.cli import main
from mpsfuzz.generation import catalogue, coverage, public_api, signatures
from mpsfuzz.generation.opspec import OpSpec, any_shape
from mpsfuzz.generation.ops import nn_losses

SHARDS = 4


@pytest.mark.slow
@pytest.mark.parametrize("shard", range(1, SHARDS + 1))
def test_a_ten_minute_campaign_of_all_ops_draws_95_percent_of_the_parameters(shard):
    """At the cases a 10-minute campaign of all ops gives each op, at least 95% of the
    catalogue's parameters are drawn over their documented range (every value class of
    it seen), and every op's public function and signature are known.

    The number of cases: a campaign round-robins over its ops, so each gets
    rate * 600 s / ops. The rates are the run logs of `mpsfuzz run --ops all`
    (2026-11-27): 308 cases/s on this 2-core machine (one lane, the fault target without
    faults, torch 2.13) and 589 on the H100 host (8 lanes, --target cuda, torch 2.11);
    the lower one is this machine's. Both run two siblings per drawn case
    (lanes.default_siblings), which repeat its arguments, so a third of the cases draw
    arguments: 308 / 3 * 600 / 540 = 114 per op (coverage.default_cases_per_op, which
    follows the catalogue's size; 218 on the H100).

    Only the skeletons are drawn here (strategies.example_skeletons: shapes, dtypes,
    arguments and variant, by the op's builders; the layouts and values draw no argument
    and cost half the time), the catalogue split in SHARDS parts by a stable hash of the
    op names so that pytest-xdist spreads them; each part must reach 95%, so the whole
    does."""
    ops = catalogue.shard(coverage.measurable_ops(catalogue.select("all")), shard, SHARDS)
    results = coverage.measure(ops, cases_per_op=coverage.default_cases_per_op(), seed=0, skeletons=True)
    unmeasured = {r.op: r.error for r in results if r.error}
    assert not unmeasured
    total = coverage.summarise(results)
    gaps = {r.op: coverage.gaps(r) for r in results if coverage.gaps(r)}
    assert total.share >= 0.95, gaps


def _softplus_probe(name: str, args) -> OpSpec:
    return OpSpec(name=name, family="nn", fn=lambda x, **kw: F.softplus(x, **kw), shapes=any_shape(1),
                  dtypes=("float32",), args=args)


@pytest.fixture
def probe(registered, monkeypatch):
    """softplus whose builder draws beta (1 or 2) but never threshold."""
    spec = registered(_softplus_probe("coverage_probe",
                                      lambda draw, shapes, dtypes: {"beta": draw(st.sampled_from((1.0, 2.0)))}))
    monkeypatch.setitem(public_api.TABLE, spec.name, public_api.Public("torch.nn.functional.softplus"))
    return spec


def test_coverage_names_the_parameter_an_op_never_draws(probe):
    (result,) = coverage.measure([probe.name], cases_per_op=30)
    assert result.function == "torch.nn.functional.softplus" and not result.error
    assert [p.name for p in result.never_drawn] == ["threshold"]
    by_name = {p.name: p for p in result.parameters}
    assert by_name["beta"].drawn and by_name["input"].treatment == "tensor"
    assert coverage.gaps(result) == ["never drawn: threshold"]


def test_cli_prints_the_parameters_never_drawn_and_the_share(probe, capsys):
    code = main(["coverage", "--ops", probe.name, "--cases", "30", "--seed", "3"])
    out = capsys.readouterr().out
    assert code == 0
    assert "coverage_probe (torch.nn.functional.softplus): never drawn: threshold" in out
    # input (a tensor) and beta are drawn, threshold is not: 2 of 3
    assert "1 op, 3 parameters: 2 drawn over their documented range (66.7%), 1 never drawn" in out


def test_cli_names_the_values_of_a_range_never_drawn(registered, monkeypatch, capsys):
    """threshold always 5 (never its default, 20) and beta never anything but 2: the
    values of their ranges never drawn are named, and neither counts as drawn."""
    spec = registered(_softplus_probe("coverage_probe_values",
                                      lambda draw, shapes, dtypes: {"beta": 2.0, "threshold": 5.0}))
    monkeypatch.setitem(public_api.TABLE, spec.name, public_api.Public(
        "torch.nn.functional.softplus", ranges={"beta": ("positive", "negative")}))
    code = main(["coverage", "--ops", spec.name, "--cases", "5"])
    out = capsys.readouterr().out
    assert code == 0
    assert "coverage_probe_values (torch.nn.functional.softplus): values never drawn: beta (negative), " \
           "threshold (default)" in out
    assert "1 op, 3 parameters: 1 drawn over their documented range (33.3%), 0 never drawn" in out


@pytest.mark.parametrize("argv, message", [
    (["coverage", "--ops", "no_such_op"], "'no_such_op' is neither a family"),
    (["coverage", "--cases", "0"], "--cases=0: must be >= 1"),
    (["coverage", "--ops", "large"], "nothing to measure"),
])
def test_cli_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mpsfuzz: error:") and message in lines[0]


def test_a_parameter_this_torch_lacks_is_not_a_parameter():
    """SDPA's enable_gqa (torch 2.5+) is a parameter exactly where this torch has it, as
    the catalogue detects it (nn_losses.HAS_GQA)."""
    sig = signatures.signature("torch.nn.functional.scaled_dot_product_attention")
    assert ("enable_gqa" in sig.names()) == nn_losses.HAS_GQA
    assert sig.source in ("inspect", "docstring", "schema")


def test_documented_signatures_are_read_as_documented():
    params = signatures.parse_parameters(r"*size, \*, generator=None, dtype=None, layout=torch.strided")
    assert [(p.name, p.variadic, p.keyword_only) for p in params] == [
        ("size", True, False), ("generator", False, True), ("dtype", False, True), ("layout", False, True)]
    assert params[3].default == signatures.Unparsed("torch.strided")
    add = signatures.parse_parameters(r"input, other, \*, alpha=1, out: Optional[Tensor]")
    assert [(p.name, p.keyword_only, p.default) for p in add] == [
        ("input", False, signatures.REQUIRED), ("other", False, signatures.REQUIRED), ("alpha", True, 1),
        ("out", True, None)]
    # an overload is taken where it fits the call: torch.max(x, dim) is not torch.max(x)
    sig = signatures.signature("torch.max", fits=lambda s: signatures.binds(s, 1, {"dim", "keepdim"}))
    assert sig.names()[:3] == ("input", "dim", "keepdim")
