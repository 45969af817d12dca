"""Dtype names, classes and value ranges shared by recipes, strategies and oracles.

Names are torch's own attribute names (``float32``, ``complex32`` ...) so that a JSON
recipe is readable by anyone who knows torch; ``chalf``/``half`` aliases are accepted.
"""
from __future__ import annotations

import torch

ALL_DTYPE_NAMES = (
    "float16", "bfloat16", "float32", "float64",
    "complex32", "complex64", "complex128",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "bool",
)
_ALIASES = {"chalf": "complex32", "half": "float16", "float": "float32", "double": "float64",
            "cfloat": "complex64", "cdouble": "complex128", "long": "int64", "int": "int32",
            "short": "int16"}

FLOAT = ("float16", "bfloat16", "float32", "float64")
COMPLEX = ("complex32", "complex64", "complex128")
# Dtypes whose gradients are compared (the grad variant): float32, float16 and bfloat16,
# plus float64, which costs nothing extra on CPU and covers double-precision backward.
GRAD = ("float32", "float16", "bfloat16", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTEGRAL = SIGNED + UNSIGNED
BOOL = ("bool",)
LOW_PRECISION = ("float16", "bfloat16", "complex32")

# The dtypes of an ``out=`` of another dtype (the ``out-cast`` variant), by the dtype of
# the case's main input: narrower ones of the same kind, where torch allows the cast of a
# result of that kind (issue 38: CUDA's `maximum(a, b_int64, out=uint8)` computed in
# uint8, pytorch#173110; `fmin` of int64 into int16, pytorch#183391). A case takes one of
# them by its main input's value seed (:func:`out_cast_dtype`). Integer dtypes only, whose
# casts are exact (modular): a float kernel rounds its internal result into out= once
# where the functional result cast rounds twice, and which of the two a backend does is
# its choice (sigmoid of float16 into bfloat16 filed as a bug of both backends).
OUT_CASTS = {"int64": ("uint8", "int16"), "int32": ("int16", "uint8"), "int16": ("int8",), "int8": ("uint8",),
             "uint8": ("int8",), "uint16": ("uint8",), "uint32": ("uint8", "int16"), "uint64": ("uint8",)}


def out_cast_dtype(main_dtype: str, seed: int) -> str | None:
    """The dtype ``out-cast`` writes into for a main input of ``main_dtype`` whose values
    have ``seed``: one case, one dtype, on every device; None where there is none."""
    choices = OUT_CASTS.get(main_dtype)
    return choices[seed % len(choices)] if choices else None


# Groups op specs use to declare what they accept.
GROUPS = {
    "float": FLOAT, "complex": COMPLEX, "signed": SIGNED, "unsigned": UNSIGNED,
    "integral": INTEGRAL, "bool": BOOL, "all": ALL_DTYPE_NAMES,
    "floating_and_complex": FLOAT + COMPLEX, "numeric": FLOAT + COMPLEX + INTEGRAL,
    "real": FLOAT + INTEGRAL, "real_and_bool": FLOAT + INTEGRAL + BOOL,
    "integral_and_bool": INTEGRAL + BOOL,
}

# Where CPU lacks a kernel, the reference is computed in this wider dtype and cast back.
WIDER = {"float16": "float32", "bfloat16": "float32", "complex32": "complex64",
         "uint16": "int32", "uint32": "int64", "uint64": "int64"}

# The integers each dtype holds exactly, (lowest, highest): floats up to 2^mantissa;
# uint64 up to int64's top (torch's integer samplers stop there). The random ops draw
# their integer ranges from these, and the distribution oracle judges random_ by them.
EXACT_INTEGERS = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (-2**31, 2**31 - 1),
                  "int64": (-2**63, 2**63 - 1), "uint8": (0, 255), "uint16": (0, 65535),
                  "uint32": (0, 2**32 - 1), "uint64": (0, 2**63 - 1),
                  "float16": (-2048, 2048), "bfloat16": (-256, 256),
                  "float32": (-2**24, 2**24), "float64": (-2**53, 2**53)}


def canonical(name: str) -> str:
    name = _ALIASES.get(name, name)
    if name not in ALL_DTYPE_NAMES:
        raise ValueError(f"unknown dtype {name!r}; expected one of {', '.join(ALL_DTYPE_NAMES)}")
    return name


def to_torch(name: str) -> torch.dtype:
    return getattr(torch, canonical(name))


def name_of(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_class(name: str) -> str:
    """The class a dtype belongs to for deduplication: float, complex, integral, bool.
    Signed and unsigned integers share a class: kernels are templated over both."""
    if name in FLOAT:
        return "float"
    if name in COMPLEX:
        return "complex"
    if name in INTEGRAL:
        return "integral"
    return "bool"


def expand_groups(spec) -> tuple[str, ...]:
    """Turn ``("float", "int64")`` style declarations into a tuple of dtype names."""
    out: list[str] = []
    for item in ([spec] if isinstance(spec, str) else spec):
        for name in GROUPS.get(item, (item,)):
            name = canonical(name)
            if name not in out:
                out.append(name)
    return tuple(out)


def finfo_or_iinfo(name: str):
    dt = to_torch(name)
    if name == "bool":
        return None
    if name in COMPLEX:
        dt = {"complex32": torch.float16, "complex64": torch.float32, "complex128": torch.float64}[name]
    return torch.finfo(dt) if dt.is_floating_point else torch.iinfo(dt)


def real_dtype_name(name: str) -> str:
    return {"complex32": "float16", "complex64": "float32", "complex128": "float64"}.get(name, name)


GRAD_TORCH_DTYPES = tuple(to_torch(n) for n in GRAD)
