"""What a case check sees: the case, the op spec, and each side's outputs or error."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Raised:
    type: str
    message: str
    unsupported: bool = False   # "not implemented for this device/dtype", not a bug


@dataclass
class Observation:
    case: Any                   # recipes.Case
    spec: Any                   # catalogue.OpSpec
    target_name: str
    dut: Any                    # outputs moved to CPU, or Raised
    ref: Any                    # CPU outputs, or Raised
    ref_widened: bool = False   # reference computed in a wider dtype and cast back
