"""Large sizes in real allocations: row-wise ops over inputs past 2^31 elements (issue 14,
point 1), the part a stride-0 view cannot reach (a copy, a cast or an elementwise kernel
that indexes with 32 bits writes wrong elements past 2^31; a constant input hides it).

Memory stays bounded on both sides:

- The input is made on the device itself (``index_hash`` values: an integer hash of each
  element's index, recipes.index_hash_values), block of rows by block of rows: the host
  neither builds nor sends it. Its size is drawn within ``--max-bytes`` at
  ``BYTES_PER_ELEMENT`` a logical element (the input, a result of up to 4 bytes, a
  kernel's temporaries), so ``--max-bytes 40GB`` draws 2^31 +- a few rows.
- Every op here maps row i of its input (dim 0) to row i of its result, and the op's
  result is compared on a few blocks of rows only: those holding the elements at flat
  offsets 0, 2^31 - 1, 2^31, 2^32 - 1, 2^32 and the last (:func:`boundary_blocks`, at
  most 6 blocks of 3 rows). On the device the op runs on the whole input and those rows
  are cut from its result; the CPU reference builds the same rows of the input from the
  hash and runs the op on them alone. The host holds at most 18 rows of input and result
  (a row here is at most 4,096 elements): well under a megabyte.

The values are small integers (floats: multiples of 1/4 up to 30), so every op here is
exact on every backend and no float64 arbiter is needed. Off by default, with the rest
of the large family (``--large``, ``--ops large``); with the default ``--max-bytes``
(1 GB) the inputs have 2^22 elements or so: the same path, at a size CI can run.
"""
from __future__ import annotations

import torch

from ..large_sizes import boundary_blocks
from ..opspec import OpSpec, integers_once, register, sampled_once
from ..recipes import max_bytes

FAMILY = "large"

# Device memory one logical element may need: the input (1-2 bytes), a result of up to
# 4 bytes (a cast to float32), and as much again for a kernel's temporaries.
BYTES_PER_ELEMENT = 12
_BOUNDARIES = (2**31, 2**32)
_ROW_LENGTHS = (1024, 4096, 1000, 3)       # 1,000 and 3: rows that do not divide 2^31
_MEDIUM = 1 << 22                           # what --max-bytes allows when no boundary fits


def row_sizes(draw, budget) -> tuple:
    """(rows, row length): just past or just below 2^31 or 2^32 elements where
    ``--max-bytes`` allows BYTES_PER_ELEMENT an element, else about 2^22."""
    length = draw(sampled_once(_ROW_LENGTHS))
    limit = max_bytes() // BYTES_PER_ELEMENT
    targets = tuple(t for t in _BOUNDARIES if t + 2 * length <= limit) or (min(_MEDIUM, limit),)
    target = draw(sampled_once(targets))
    rows = target // length + draw(integers_once(-1, 2))      # below, at and past the boundary
    return ((max(1, rows), length),)


def reference_inputs(case) -> list[torch.Tensor]:
    """The CPU reference's input: only the boundary blocks' rows, made from the hash."""
    recipe = case.inputs[0]
    return [recipe.rows_values(boundary_blocks(recipe.shape))]


def _rows_of(op):
    """The op on the whole input, then only the boundary blocks' rows of its result
    (slices at their offsets: no kernel of ours reads past 2^31)."""
    def fn(x, **kwargs):
        y = op(x, **kwargs)
        return torch.cat([y[a:b] for a, b in boundary_blocks(tuple(x.shape))])
    fn.__name__ = fn.__qualname__ = f"rows_of_{op.__name__}"
    return fn


def large_rows(name: str, op, dtypes, doc: str) -> OpSpec:
    return OpSpec(name=name, family=FAMILY, fn=_rows_of(op), shapes=row_sizes, dtypes=dtypes, doc=doc,
                  input_values=("index_hash",), allow_specials=False, allow_nonfinite=False,
                  reference_fn=op, reference_inputs=reference_inputs, min_rank=2,
                  semantics=frozenset({"large"}))


def _clone(x):
    return x.clone()


def _to_float32(x):
    return x.to(torch.float32)


def _add_one(x):
    return x + 1


def _clamp_min_zero(x):
    return torch.clamp(x, min=0)


def _flip_rows(x):
    return x.flip(-1)


def _zeros_like(x):
    return torch.zeros_like(x)


def _full_like(x):
    return torch.full_like(x, 3)


def _sum_rows(x):
    return x.sum(-1)


def _amax_rows(x):
    return x.amax(-1)


SMALL = ("int8", "uint8", "bool", "float16")
ARITH = ("int8", "uint8", "float16")

register(
    large_rows("clone_large", _clone, SMALL, "clone (a copy kernel) of an input past 2^31 elements"),
    large_rows("to_float32_large", _to_float32, SMALL, "cast to float32 of an input past 2^31 elements"),
    large_rows("add_large", _add_one, ARITH, "x + 1 (elementwise) over an input past 2^31 elements"),
    large_rows("clamp_large", _clamp_min_zero, ("int8", "float16"),
               "clamp(min=0) over an input past 2^31 elements"),
    large_rows("zeros_like_large", _zeros_like, SMALL,
               "zeros_like of an input past 2^31 elements (a fill of more than 4 GB in float16: pytorch#164108)"),
    large_rows("full_like_large", _full_like, ARITH, "full_like(x, 3) of an input past 2^31 elements"),
    large_rows("flip_large", _flip_rows, SMALL, "flip of the last dim of an input past 2^31 elements"),
    large_rows("sum_rows_large", _sum_rows, ("int8", "uint8", "bool"),
               "sum of each row of an input past 2^31 elements"),
    large_rows("amax_rows_large", _amax_rows, ARITH, "amax of each row of an input past 2^31 elements"),
)
