"""A decomposition that outgrows its call is not traced (oracles/jury/tracing.py): torch's
decomposition of cumsum and cumprod builds an n x n mask, 4.3e9 elements for 65,537
values. On an H200's host the workers judging cumsum@large and cumprod@large died of it
(issue 31) after their verdicts had timed out as hangs in an earlier run. The bound is checked on
fake tensors before anything real is made; small calls trace as before."""
from __future__ import annotations

import resource

import pytest
import torch

from mpsfuzz.oracles.jury.tracing import CHECK_FROM, TraceTooLarge, traced


@pytest.mark.parametrize("scan", [torch.cumsum, torch.cumprod])
def test_a_quadratic_decomposition_of_a_long_scan_is_refused_without_running_it(scan):
    x = torch.linspace(-1, 1, 65_537, dtype=torch.float64)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(TraceTooLarge, match="4,295,098,369 elements for a call of 65,537"):
        traced(lambda t: scan(t, 0), [x])
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 512 * 1024, grown_kib        # the 34 GB intermediate was never made


def test_linear_decompositions_and_small_scans_still_trace():
    x = torch.linspace(-1, 1, 65_537, dtype=torch.float64)
    graph = traced(lambda t: torch.softmax(t, 0), [x])
    torch.testing.assert_close(graph(x), torch.softmax(x, 0))
    small = torch.linspace(-1, 1, CHECK_FROM - 1, dtype=torch.float64)
    graph = traced(lambda t: torch.cumsum(t, 0), [small])      # n^2 of a small n: cheap enough
    torch.testing.assert_close(graph(small), torch.cumsum(small, 0))
