"""Independent float64 references from the documented formulas, one module per group of
nn, linalg and factory ops, merged into :data:`FORMULAS` (catalogue op name -> reference).

Each reference follows the contract in ``references.py``: ``ref(inputs, kwargs)`` returns
what the op's catalogue call returns, computed in torch's elementary ops on float64
tensors with index maps and weights worked out in Python, so that autograd through them
gives gradients too, and no kernel of eager CPU's call (nor a composite that reaches
one) runs: ``tests/test_formula_references.py`` checks both against eager CPU on
ordinary inputs.
"""
from __future__ import annotations

from ..references import Reference
from . import (attention, casts, class_losses, convolution, ctc, embeddings, factories, margin_losses, norms, padding, pointwise_losses,
               pooling, products, resampling)

FORMULAS: dict[str, Reference] = {}
for _module in (resampling, pooling, padding, norms, pointwise_losses, margin_losses, class_losses, ctc,
                convolution, products, embeddings, factories, attention, casts):
    for _name, _reference in _module.FORMULAS.items():
        if _name in FORMULAS:
            raise ValueError(f"formula for {_name!r} defined twice")
        FORMULAS[_name] = _reference

__all__ = ["FORMULAS"]
