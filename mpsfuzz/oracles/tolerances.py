"""One ``{dtype: (rtol, atol)}`` table, starting from ``torch.testing.assert_close``'s."""
from __future__ import annotations

TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex32": (1e-3, 1e-5),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}
EXACT = (0.0, 0.0)  # integers and bool compare exactly

# When the reference had to be computed in a wider dtype and cast back (CPU has no
# kernel for the dtype), both sides round differently: allow this factor more.
WIDENED_FACTOR = 4.0


def tolerance(dtype_name: str, *, rtol_scale: float = 1.0, atol_scale: float = 1.0,
              widened: bool = False) -> tuple[float, float]:
    rtol, atol = TOLERANCES.get(dtype_name, EXACT)
    factor = WIDENED_FACTOR if widened else 1.0
    return rtol * rtol_scale * factor, atol * atol_scale * factor
