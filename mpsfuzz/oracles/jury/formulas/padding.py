"""``F.pad`` from the documented padding modes, as an index map per padded dim.

``pad`` lists (before, after) pairs from the last dim backwards. Along a padded dim of
size L, output position j stands for input position q = j - before; a negative pad
crops (q starts past 0, or stops short of L). The mode says what is read where q falls
outside [0, L):

- constant: the fill ``value`` (0 by default);
- reflect: the mirror image without repeating the edge, -q or 2(L - 1) - q;
- replicate: the edge, q clamped to [0, L - 1];
- circular: the input wrapped around, q mod L.
"""
from __future__ import annotations

import torch

from ..references import NotApplicable, Reference


def padded_dims(x: torch.Tensor, pad) -> list[tuple[int, int, int]]:
    """(dim, before, after) for each padded dim."""
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > x.dim():
        raise NotApplicable(f"pad={pad} for a {x.dim()}-D input")
    return [(x.dim() - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]


def source_position(q: int, size: int, mode: str) -> int | None:
    """The input position output q reads (None: the constant fill)."""
    if 0 <= q < size:
        return q
    if mode == "constant":
        return None
    if mode == "replicate":
        return min(max(q, 0), size - 1)
    if mode == "circular":
        return q % size
    if mode == "reflect":
        if size == 1:
            raise NotApplicable("reflecting a side of 1")
        period = 2 * (size - 1)
        q = q % period
        return q if q < size else period - q
    raise NotApplicable(f"mode={mode!r}")


def pad_reference(mode: str) -> Reference:
    def reference(inputs, kwargs):
        x = inputs[0]
        if not isinstance(x, torch.Tensor):
            raise NotApplicable("input 0 is not a tensor")
        if kwargs.get("mode", mode) != mode:
            raise NotApplicable(f"mode={kwargs.get('mode')!r}")
        # the fill in x's own dtype (never through the default dtype: 0.1 would round)
        fill = torch.tensor(kwargs.get("value", 0) or 0, dtype=x.dtype)
        out = x
        for dim, before, after in padded_dims(x, kwargs["pad"]):
            size = out.shape[dim]
            length = size + before + after
            if length < 0:
                raise NotApplicable("a pad crops more than the side")
            sources = [source_position(j - before, size, mode) for j in range(length)]
            if size == 0:
                if any(s is not None for s in sources):
                    raise NotApplicable("padding an empty side by reflection")
                shape = list(out.shape)
                shape[dim] = length
                filled = fill.expand(shape).clone()
                # all fill: still on the graph (adding an empty sum), its gradient 0
                out = filled + out.sum() * 0 if out.requires_grad else filled
                continue
            index = torch.tensor([0 if s is None else s for s in sources], dtype=torch.int64)
            taken = out.index_select(dim, index)
            if any(s is None for s in sources):
                inside = torch.tensor([s is not None for s in sources], dtype=torch.bool)
                shape = [1] * out.dim()
                shape[dim] = length
                taken = torch.where(inside.reshape(shape), taken, fill)
            out = taken
        return out.clone() if out is x else out
    return reference


FORMULAS: dict[str, Reference] = {
    "pad_constant": pad_reference("constant"),
    "pad_reflect": pad_reference("reflect"),
    "pad_replicate": pad_reference("replicate"),
    "pad_circular": pad_reference("circular"),
}
