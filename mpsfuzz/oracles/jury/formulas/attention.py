"""flex_attention from its documented formula (the torch.nn.attention.flex_attention docs):
the scores q k^T * scale, each modified by ``score_mod(score, b, h, q_idx, kv_idx)``, the
positions the block mask's ``mask_mod`` leaves out set to -inf, a softmax over the keys,
times v. With GQA (``enable_gqa``) query head h reads key/value head h // (Hq / Hkv). A row
the mask leaves empty gives 0 (flex_attention's choice: its logsumexp is -inf there and
the output 0, where SDPA's softmax would give NaN).

The catalogue's score_mods and mask_mods (``generation/ops/nn_losses.py``: FLEX_SCORE_MODS,
FLEX_MASKS) are written out again here with other kernels than eager's call runs
(``elementary.py``): the products as broadcast multiplies and sums (no matmul), tanh and
the exponentials through ``exp2``, comparisons as 0/1 factors from ``le`` (eager's
mask_mods and its backward run ``ge``, ``gt``, ``lt``, ``&`` and ``floor_divide``), the masked softmax as a sum of
shifted exponentials times the 0/1 mask (no ``where``, no ``logsumexp``).
"""
from __future__ import annotations

import math

import torch

from ....generation.ops.nn_losses import DOCUMENT_LENGTH, HAS_FLEX, SLIDING_WINDOW, SOFT_CAP
from ..references import NotApplicable, Reference
from .elementary import magnitude, natural_exp

_HUGE = 1e300       # a finite stand-in for -inf when the row's maximum is taken


def _indices(n: int, dim: int) -> torch.Tensor:
    """arange(n) as float64 along ``dim`` of a 4-D (B, H, L, S) broadcast shape."""
    shape = [1, 1, 1, 1]
    shape[dim] = n
    return torch.arange(n, dtype=torch.float64).reshape(shape)


def _tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh x = sign(x) (1 - e) / (1 + e), e = exp(-2|x|) in (0, 1]: no overflow."""
    e = natural_exp(-2.0 * magnitude(x))
    return torch.sign(x) * (1 - e) / (1 + e)


def _score_mod(name: str, s, h, q_idx, kv_idx) -> torch.Tensor:
    if name == "none":
        return s
    if name == "relative_bias":
        return s + (q_idx - kv_idx)
    if name == "soft_cap":
        return SOFT_CAP * _tanh(s / SOFT_CAP)
    if name == "alibi":
        return s - (h + 1) * magnitude(q_idx - kv_idx) / 8
    raise NotApplicable(f"score_mod={name!r}")


_MASKS = {
    "none": lambda i, j: True,
    "causal": lambda i, j: j <= i,
    "sliding_window": lambda i, j: j <= i and i - j <= SLIDING_WINDOW,
    "strict_causal": lambda i, j: j < i,
    "documents": lambda i, j: i // DOCUMENT_LENGTH == j // DOCUMENT_LENGTH,
}


def _allowed(name: str, length: int, source: int) -> torch.Tensor:
    """The mask_mod's (L, S) 0/1 matrix (every batch and head alike), decided in Python
    integers: no comparison kernel of eager's mask_mod runs."""
    if name not in _MASKS:
        raise NotApplicable(f"mask={name!r}")
    allowed = _MASKS[name]
    return torch.tensor([[1.0 if allowed(i, j) else 0.0 for j in range(source)] for i in range(length)],
                        dtype=torch.float64)


def _heads(t: torch.Tensor, group: int) -> torch.Tensor:
    """(B, Hkv, S, E) -> (B, Hkv * group, S, E), kv head j serving query heads j*group..."""
    b, hkv, s, e = t.shape
    return t.unsqueeze(2).expand(b, hkv, group, s, e).reshape(b, hkv * group, s, e)


def flex_attention(inputs, kwargs):
    q, k, v = inputs[:3]
    if not all(isinstance(t, torch.Tensor) and t.is_floating_point() and t.dim() == 4 for t in (q, k, v)):
        raise NotApplicable("flex_attention of three 4-D floating tensors only")
    heads_q, heads_kv = q.shape[1], k.shape[1]
    if heads_q != heads_kv and (not kwargs.get("enable_gqa") or heads_kv == 0 or heads_q % heads_kv):
        raise NotApplicable("heads that GQA cannot map")
    group = heads_q // heads_kv if heads_kv else 1
    keys, values = _heads(k, group), _heads(v, group)
    scale = kwargs.get("scale")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    length, source = q.shape[2], k.shape[2]
    s = (q.unsqueeze(-2) * keys.unsqueeze(-3)).sum(-1) * scale                 # (B, H, L, S)
    s = _score_mod(kwargs.get("score_mod", "none"), s, _indices(heads_q, 1), _indices(length, 2),
                   _indices(source, 3))
    allowed = _allowed(kwargs.get("mask", "none"), length, source)
    with torch.no_grad():   # the shift cancels exactly: autograd need not see it
        shift = (s * allowed - _HUGE * (1 - allowed)).amax(dim=-1, keepdim=True) if source else s.sum(-1, True)
    e = natural_exp((s - shift) * allowed) * allowed
    total = e.sum(dim=-1, keepdim=True)
    # an empty row: 0 / 1 (total >= 0, so 1 - sign is 1 at 0 only; no comparison kernel,
    # which eager's mask_mods run)
    weights = e / (total + (1 - torch.sign(total.detach())))
    return (weights.unsqueeze(-1) * values.unsqueeze(-3)).sum(-2)


# (the op is in the catalogue where this torch has flex_attention)
FORMULAS: dict[str, Reference] = {"flex_attention": flex_attention} if HAS_FLEX else {}
