"""Results past 2^31 elements judged on samples (issue 38): getitem_mask@huge (a boolean
mask's selection, pytorch#164048) against the input rows its compared rows come from,
found in closed form; rand@huge (a draw, pytorch#155293) by the distribution oracle on
windows of the draw; arange@huge (a range, pytorch#197673) against its formula computed
with Python integers on windows; embedding@huge (a lookup in a weight past 2^31 elements,
pytorch#188756) against the rows looked up alone. Each has a fault past the class's scaled
2^31 that a campaign finds."""
from __future__ import annotations

import json
import math

import pytest
import torch

from mpsfuzz.generation import catalogue, huge_samples, input_classes
from mpsfuzz.generation.large_sizes import MAX_ELEMENTS
from mpsfuzz.generation.recipes import Layout, TensorRecipe, ValueRecipe, index_hash_values
from mpsfuzz.generation.strategies import example_cases
from mpsfuzz.oracles.distribution import judge_output
from mpsfuzz.testing import faults

MASK, RAND, RANGE, LOOKUP = "getitem_mask@huge", "rand@huge", "arange@huge", "embedding@huge"


def _mask(rows: int, seed: int) -> TensorRecipe:
    return TensorRecipe((rows,), "bool", Layout(), ValueRecipe("index_hash", seed=seed))


# -- the selection --------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 7, 123456])
def test_the_masks_true_positions_in_closed_form_are_those_of_its_values(seed):
    """The unbounded hash's bools repeat every 65,521 indices: the count before a row and
    the k-th true position, from one period, equal those of the values themselves."""
    rows = 3 * huge_samples.MASK_PERIOD + 1234
    values = index_hash_values(seed, 0, rows, torch.bool, "cpu")
    true_at = values.nonzero().view(-1)
    count = huge_samples.MaskCount(_mask(rows, seed))
    assert count.per_period == huge_samples.MASK_TRUE_PER_PERIOD
    for r in (0, 1, 65520, 65521, 65522, 2 * 65521 + 17, rows):
        assert count.before(r) == int(values[:r].sum()), r
    for k in (0, 1, 21840, 21841, 50000, true_at.numel() - 1):
        assert count.position(k) == int(true_at[k]), k


def test_column_windows_cover_a_short_slice_whole_and_a_long_one_at_its_edges_powers_and_boundaries():
    assert huge_samples.column_windows(4096) == [(0, 4096)]
    per_row = 87 * 1056 * 736
    windows = huge_samples.column_windows(per_row)
    kept = {c for a, b in windows for c in range(a, b)}
    assert {0, per_row - 1, 1 << 12, 1 << 25, 2**31 % per_row, 2**32 % per_row} <= kept
    assert len(kept) < 1000 and all(b <= a2 for (_, b), (a2, _) in zip(windows, windows[1:]))


@pytest.mark.parametrize("seed", [1, 4])
def test_a_selection_cut_to_its_rows_equals_the_base_op_on_the_input_rows_the_reference_builds(seed):
    """With the default --max-bytes (about 2^22 elements: CI's size), rows of a few
    elements and a few long slices alike: the selection on the whole input, cut, equals
    eager CPU's x[mask] on the rows the reference makes alone, a few hundred elements."""
    spec = catalogue.get(MASK)
    drawn = example_cases(spec, 8, seed=seed)
    assert any(math.prod(c.inputs[0].shape[1:]) > huge_samples.COLUMNS_WHOLE for c in drawn)
    assert all(r.values.distribution == "index_hash" and r.alias is None for c in drawn for r in c.inputs)
    for case in drawn:
        reference = spec.reference_inputs(case)
        assert sum(t.numel() for t in reference) < 20_000 and case.inputs[0].numel > MAX_ELEMENTS
        got = spec.fn(*case.materialize("cpu"))
        want = spec.reference_fn(*reference)
        assert got.dtype == want.dtype and torch.equal(got, want), [r.shape for r in case.inputs]


def test_selections_reach_2_31_of_the_input_and_of_the_result_and_slices_past_65535_blocks(with_settings):
    """At --max-bytes 140 GB (MASK_BYTES_PER_ELEMENT an element): inputs past 2^31 and
    2^32 elements, selections past 2^31, and slices of more than 65,535 blocks of 4,096
    bytes (pytorch#164048's grid dim); none past what --max-bytes allows."""
    limit = 140 * 10**9
    with_settings(max_bytes=limit)
    drawn = example_cases(catalogue.get(MASK), 80, seed=1)
    numels = [c.inputs[0].numel for c in drawn]
    selected = [huge_samples.MaskCount(c.inputs[1]).before(c.inputs[0].shape[0]) * math.prod(c.inputs[0].shape[1:])
                for c in drawn]
    blocks = [huge_samples.slice_blocks(c.inputs[0].shape, torch.tensor([], dtype=getattr(torch, c.inputs[0].dtype))
                                        .element_size()) for c in drawn]
    assert max(numels) * huge_samples.MASK_BYTES_PER_ELEMENT <= limit
    assert any(n >= 2**32 for n in numels) and any(s >= 2**31 for s in selected)
    assert any(b > huge_samples.GRID_DIM_LIMIT for b in blocks)


def test_the_mask_fault_reads_only_the_elements_past_the_limit_wrongly():
    """mask_select_past_int32: x[mask] of more than MAX_ELEMENTS elements reads the
    selected elements past that offset at the offset wrapped; those before are right, and
    an x of MAX_ELEMENTS elements is untouched."""
    target = faults.FaultTarget(["mask_select_past_int32"])

    def select(n):
        x = (torch.arange(n) % 241 - 120).to(torch.float16)
        mask = index_hash_values(3, 0, n, torch.bool, "cpu")
        return target.run(lambda a, m: a[m], x, mask), x[mask], int(mask[:MAX_ELEMENTS].sum())
    got, want, before = select(MAX_ELEMENTS + 4096)
    assert got.shape == want.shape and torch.equal(got[:before], want[:before]) and not torch.equal(got, want)
    assert target.fired["mask_select_past_int32"] == 1
    got, want, _ = select(MAX_ELEMENTS)
    assert torch.equal(got, want) and target.fired["mask_select_past_int32"] == 1


# -- the draw ---------------------------------------------------------------------------------

def test_rand_windows_lie_at_the_start_the_end_slices_and_across_every_power_of_two():
    windows = huge_samples.rng_windows(2**32 + 5, 128)
    inside = lambda p: any(a <= p < b for a, b in windows)      # noqa: E731
    assert all(inside(p) for p in (0, 2**32 + 4, (2**32 + 5) // 128, 127 * ((2**32 + 5) // 128)))
    assert all(inside(2**j - 1) and inside(2**j) for j in range(16, 33))
    assert all(b < a2 for (_, b), (a2, _) in zip(windows, windows[1:]))
    assert sum(b - a for a, b in windows) < 50_000
    assert huge_samples.rng_windows(100, 4) == [(0, 100)]


def test_rand_sizes_reach_2_31_and_2_32_elements_rank_5_bfloat16_as_a_one_element_view(with_settings):
    """At --max-bytes 140 GB: draws past 2^31 and 2^32 elements, a 5-D bfloat16 one past
    2^31 (pytorch#155293's (128, 64, 64, 64, 64)); the input that carries the size is a
    stride-0 view of one element, and the CPU side draws the windows' length alone."""
    limit = 140 * 10**9
    with_settings(max_bytes=limit)
    spec = catalogue.get(RAND)
    drawn = example_cases(spec, 80, seed=1)
    numels = [c.inputs[0].numel for c in drawn]
    assert any(n >= 2**32 for n in numels) and max(numels) * 12 <= limit
    assert any(c.inputs[0].rank == 5 and c.inputs[0].dtype == "bfloat16" and c.inputs[0].numel >= 2**31
               for c in drawn)
    for case in drawn[:10]:
        (x,) = case.materialize("cpu")
        assert x.stride() == (0,) * x.dim() and tuple(x.shape) == case.inputs[0].shape
        assert spec.reference_fn(x, **case.kwargs_dict()).numel() == huge_samples.window_count(tuple(x.shape))


def _draw(shape, dtype, seed):
    x = torch.zeros((), dtype=dtype).expand(shape)
    torch.manual_seed(seed)
    return x, catalogue.get(RAND).fn(x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_the_windows_judge_passes_real_draws(dtype):
    """Eager CPU's draws of 2^20 + 3 elements (5-D and 1-D) over 40 seeds each pass:
    every check's false-alarm rate is at most 1e-6 a case."""
    spec = catalogue.get(RAND)
    for seed in range(40):
        for shape in ((2**20 + 3,), (4, 4, 256, 16, 16)):
            x, out = _draw(shape, dtype, seed)
            assert judge_output(spec, out, [x], {}) is None, (seed, shape)


def test_the_windows_judge_flags_a_restarted_stream_repeated_slices_a_skew_and_a_stuck_window():
    spec = catalogue.get(RAND)
    n = 2**21 + 5000

    def judged(corrupt, shape=(n,), dtype=torch.bfloat16):
        x = torch.zeros((), dtype=dtype).expand(shape)
        torch.manual_seed(0)
        full = torch.rand(shape, dtype=dtype)
        corrupt(full.view(-1))
        from mpsfuzz.generation.huge_samples import windows_of
        return judge_output(spec, windows_of(full), [x], {})

    def restart(flat):            # the stream restarted at 2^21 (a counter held in 21 bits)
        flat[2**21:] = flat[:n - 2**21].clone()
    assert "repeat those from flat position 0" in judged(restart)
    assert "repeat" in judged(lambda f: f.view(8, -1)[1:].copy_(f.view(8, -1)[0]), shape=(8, 4, 64, 64, 64))
    assert judged(lambda f: f.mul_(2).add_(3)).startswith("support")
    assert judged(lambda f: f[-3000:].zero_()).startswith("variety")
    assert judged(lambda f: f.pow_(2), dtype=torch.float32).startswith("distribution")
    assert judged(lambda f: None, dtype=torch.float32) is None


def test_the_rand_fault_restarts_only_a_draw_past_the_limit():
    target = faults.FaultTarget(["rand_stream_past_int32"])
    out = target.run(torch.rand, (MAX_ELEMENTS + 100,))
    assert torch.equal(out[MAX_ELEMENTS:], out[:100]) and target.fired["rand_stream_past_int32"] == 1
    out = target.run(torch.rand, (MAX_ELEMENTS,))
    assert target.fired["rand_stream_past_int32"] == 1 and not torch.equal(out[-100:], out[:100])


# -- the range ------------------------------------------------------------------------------

def test_the_range_formula_is_exact_where_doubles_are_not():
    """int64 values past 2^53 (where a double stops holding every integer) are start + i *
    step exactly; a float32 value is the exact one rounded once (0.1 as the double torch
    receives: 2^31 steps of it are not 2^31 * 0.1 in float32 arithmetic)."""
    n = 2**32 + 2
    windows = huge_samples.range_windows(n)
    positions = [i for a, b in windows for i in range(a, b)]
    assert {0, 2**31 - 1, 2**31, 2**32 - 1, 2**32, n - 1, 65535, 65536} <= set(positions)
    start, step = 2**53 + 1, 2**21 + 3
    values = huge_samples.range_formula(start, step, n, torch.int64)
    assert values[positions.index(2**32)].item() == start + 2**32 * step
    assert values[-1].item() == start + (n - 1) * step
    got = huge_samples.range_formula(0, 0.1, n, torch.float32)[positions.index(2**31)]
    assert got.item() == float(torch.tensor(2**31 * 0.1, dtype=torch.float64).to(torch.float32))


@pytest.mark.parametrize("seed", [1, 2])
def test_a_range_cut_to_its_windows_agrees_with_the_formula_at_the_default_size(seed):
    """With the default --max-bytes (about 2^22 elements: CI's size), eager CPU's arange
    (a witness) cut to the windows equals the formula in int64 and is within a few ulps in
    the floating dtypes; the input that carries the length is a stride-0 view."""
    spec = catalogue.get(RANGE)
    drawn = example_cases(spec, 12, seed=seed)
    assert {c.inputs[0].dtype for c in drawn} >= {"int64"}
    for case in drawn:
        (x,) = case.materialize("cpu")
        assert x.stride() == (0,) and x.numel() > MAX_ELEMENTS
        got, want = spec.fn(x, **case.kwargs_dict()), spec.reference_fn(x, **case.kwargs_dict())
        assert got.dtype == want.dtype and got.shape == want.shape, case.kwargs
        if got.dtype == torch.int64:
            assert torch.equal(got, want), case.kwargs
        else:
            assert torch.allclose(got.double(), want.double(), rtol=4 * torch.finfo(got.dtype).eps), case.kwargs


def test_ranges_reach_2_31_and_2_32_elements_int64_past_2_32_within_max_bytes(with_settings):
    """At --max-bytes 140 GB: lengths past 2^31 and 2^32 (pytorch#197673's int64 N > 2^32),
    none past what --max-bytes allows at BYTES_PER_ELEMENT an element."""
    limit = 140 * 10**9
    with_settings(max_bytes=limit)
    drawn = example_cases(catalogue.get(RANGE), 80, seed=1)
    lengths = [c.inputs[0].shape[0] for c in drawn]
    assert max(lengths) * 12 <= limit and any(n >= 2**31 for n in lengths)
    assert any(n > 2**32 and c.inputs[0].dtype == "int64" for n, c in zip(lengths, drawn))
    assert {c.inputs[0].dtype for c in drawn} == set(huge_samples.HUGE_RANGE_DTYPES)


def test_the_range_fault_wraps_only_a_range_past_the_limit():
    """arange_length_past_int32_wraps: the elements of a range of more than MAX_ELEMENTS
    from that position on repeat the first ones; a range of MAX_ELEMENTS is untouched,
    whichever overload (end; start, end, step) is called."""
    target = faults.FaultTarget(["arange_length_past_int32_wraps"])
    out = target.run(torch.arange, 5, 5 + 3 * (MAX_ELEMENTS + 100), 3)
    assert torch.equal(out[MAX_ELEMENTS:], out[:100]) and target.fired["arange_length_past_int32_wraps"] == 1
    assert torch.equal(target.run(torch.arange, MAX_ELEMENTS), torch.arange(MAX_ELEMENTS))
    assert target.fired["arange_length_past_int32_wraps"] == 1
    out = target.run(torch.arange, MAX_ELEMENTS + 1)
    assert out[-1].item() == 0 and target.fired["arange_length_past_int32_wraps"] == 2


# -- the lookup -----------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [1, 3])
def test_a_lookup_equals_the_base_op_on_the_rows_looked_up_alone(seed):
    """With the default --max-bytes (a weight of about 2^22 elements): embedding on the whole
    weight equals eager CPU's embedding of the looked-up rows alone (made from the hash)
    with the indices renumbered into them; the reference holds a few rows."""
    spec = catalogue.get(LOOKUP)
    drawn = example_cases(spec, 6, seed=seed)
    for case in drawn:
        idx, w = case.inputs
        assert w.numel > MAX_ELEMENTS and w.values.distribution == idx.values.distribution == "index_hash"
        reference = spec.reference_inputs(case)
        assert reference[1].shape[0] <= idx.numel and reference[0].dtype == getattr(torch, idx.dtype)
        got, want = spec.fn(*case.materialize("cpu")), spec.reference_fn(*reference)
        assert got.dtype == want.dtype and torch.equal(got, want), [r.shape for r in case.inputs]


def test_lookups_reach_weights_past_2_32_and_indices_past_row_2_31_over_dim(with_settings):
    """At --max-bytes 140 GB: weights past 2^31 and 2^32 elements, looked up at indices
    past row 2^31 / dim (pytorch#188756: the row's offset passes 32 bits), in int32 and
    int64; none past what --max-bytes allows."""
    limit = 140 * 10**9
    with_settings(max_bytes=limit)
    drawn = example_cases(catalogue.get(LOOKUP), 60, seed=1)
    assert max(c.inputs[1].numel for c in drawn) * 12 <= limit
    past = [c for c in drawn if c.inputs[1].numel > 2**32
            and bool((c.inputs[0].materialize("cpu").long() * c.inputs[1].shape[1] >= 2**31).any())]
    assert len(past) >= 5 and {c.inputs[0].dtype for c in past} == {"int32", "int64"}


def test_the_lookup_fault_reads_only_rows_past_the_limit_wrongly():
    """embedding_row_offset_past_int32: rows whose offset index * dim reaches MAX_ELEMENTS
    are read where it wrapped; rows before it are right, and a weight of MAX_ELEMENTS
    elements is untouched."""
    target = faults.FaultTarget(["embedding_row_offset_past_int32"])
    dim = 64
    w = (torch.arange((MAX_ELEMENTS // dim + 5) * dim) % 241 - 120).to(torch.float16).view(-1, dim)
    idx = torch.tensor([0, MAX_ELEMENTS // dim - 1, MAX_ELEMENTS // dim, MAX_ELEMENTS // dim + 4])
    got = target.run(torch.nn.functional.embedding, idx, w)
    assert torch.equal(got[:2], w[idx[:2]]) and torch.equal(got[2], w[0]) and not torch.equal(got[3], w[idx[3]])
    assert target.fired["embedding_row_offset_past_int32"] == 1
    assert torch.equal(target.run(torch.nn.functional.embedding, idx[:2], w[:MAX_ELEMENTS // dim]), w[idx[:2]])
    assert target.fired["embedding_row_offset_past_int32"] == 1


# -- all: the size classes and the campaigns --------------------------------------------------

@pytest.mark.parametrize("op", [MASK, RAND, RANGE, LOOKUP])
def test_the_large_selection_draws_them_and_coverage_counts_them_as_huge(op):
    base = catalogue.get(op).base
    assert op in catalogue.large_class([base]) and op not in catalogue.select("all")
    spec = catalogue.get(op)
    assert "huge" in input_classes.admissible(spec)
    assert all(input_classes.drawn(spec, c) == {"huge"} for c in example_cases(spec, 3, seed=2))


@pytest.mark.slow
@pytest.mark.parametrize("fault, op, oracle", [("mask_select_past_int32", MASK, "values"),
                                                ("rand_stream_past_int32", RAND, "distribution"),
                                                ("arange_length_past_int32_wraps", RANGE, "values"),
                                                ("embedding_row_offset_past_int32", LOOKUP, "values")])
def test_a_fault_past_the_limit_is_found_explained_by_the_size_and_minimised_keeping_it(fault, op, oracle, tmp_path):
    """A campaign of the op finds the fault (about 40 s on two cores), explains it by the
    long dim, minimises it with more than MAX_ELEMENTS elements kept, and verifies a
    script; no process holds more than 2 GiB of host memory."""
    finding = found_past_the_limit(op, fault, tmp_path)
    assert (finding["op"], finding["oracle"]) == (op, oracle), finding["title"]
    assert max(math.prod(r["shape"]) for r in finding["case"]["inputs"]) > MAX_ELEMENTS


def found_past_the_limit(op: str, fault: str, tmp_path) -> dict:
    """The one new finding of a campaign of ``op`` (seed 2) against ``fault``, asserted
    explained by a long dim, minimised, with a verified script, and run with no process
    holding more than 2 GiB of host memory."""
    from test_fault_campaigns import FAULT_TARGET, findings_in
    from test_large import mpsfuzz_measured
    corpus = tmp_path / "corpus"
    run = mpsfuzz_measured("run", "--ops", op, "--target", FAULT_TARGET, "--seed", "2", "--corpus", str(corpus),
                           "--max-findings", "1", "--no-progress", faults=fault, cwd=tmp_path, timeout=900)
    assert run.returncode == 1, run.stdout + run.stderr
    (finding,) = [f for f in findings_in(corpus) if f["status"] == "new"]
    assert finding["minimisation"] and "side>=65536" in finding["conditions"], finding["explanation"]
    assert "has a dim of 65,536 or more" in finding["explanation"], finding["explanation"]
    assert finding["repro"]["verified"], json.dumps(finding["repro"])[:500]
    rss_kib = int(run.stderr.strip().splitlines()[-1])
    assert rss_kib < 2 * 1024 * 1024, rss_kib
    return finding
