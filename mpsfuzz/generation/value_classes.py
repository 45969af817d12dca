"""What kind of value an argument took, in words a coverage report can list.

A value gets a set of *labels*: its class (``'mean'``, ``True``, ``None``, ``negative``,
``zero``, ``positive``, ``inf``, ``nan``, ``sequence``, ``tensor``, ``dtype`` ...) and the
wildcards a documented range may name instead (``given``: anything but None;
``default``/``other``: equal to the parameter's default or not; ``non-negative``).
A parameter's documented range is a tuple of labels; it is covered when each label was
seen on some value.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from . import dtypes as dt
from .recipes import DtypeArg
from .signatures import REQUIRED, Unparsed


class _Marker:
    def __init__(self, label: str):
        self.label = label

    def __repr__(self) -> str:
        return f"<{self.label}>"


# A tensor input bound to the parameter (its values, shapes and layouts are the dressing's).
TENSOR = _Marker("tensor")
# The device the target runs on (every call's, and a factory's ``device=``).
TARGET_DEVICE = _Marker("device")

GIVEN, DEFAULT, OTHER, NON_NEGATIVE = "given", "default", "other", "non-negative"
WILDCARDS = (GIVEN, DEFAULT, OTHER, NON_NEGATIVE)


def value_class(value: Any) -> str:
    """The one class a value belongs to."""
    if isinstance(value, _Marker):
        return value.label
    if value is None:
        return "None"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return "nan"
        if isinstance(value, float) and math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return "negative" if value < 0 else "zero" if value == 0 else "positive"
    if isinstance(value, (tuple, list)):
        return "sequence" if value else "empty sequence"
    if isinstance(value, (DtypeArg, torch.dtype)):
        return "dtype"
    if isinstance(value, Unparsed):
        return value.text
    return type(value).__name__


def _as_dtype(value: Any):
    """A dtype named any way (``DtypeArg("int64")``, ``torch.long``, the documented text
    ``torch.int64``) as a torch.dtype, or None."""
    if isinstance(value, torch.dtype):
        return value
    if isinstance(value, DtypeArg):
        return dt.to_torch(value.name)
    if isinstance(value, Unparsed) and value.text.startswith("torch."):
        found = getattr(torch, value.text.removeprefix("torch."), None)
        return found if isinstance(found, torch.dtype) else None
    return None


def _same(a: Any, b: Any) -> bool:
    if _as_dtype(a) is not None and _as_dtype(b) is not None:
        return _as_dtype(a) == _as_dtype(b)
    if isinstance(a, _Marker) or isinstance(b, _Marker):
        return a is b
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 (values of foreign types: unequal)
        return False


def labels(value: Any, default: Any = REQUIRED) -> frozenset[str]:
    """Every label ``value`` carries, given its parameter's ``default``."""
    cls = value_class(value)
    out = {cls}
    if value is not None:
        out.add(GIVEN)
    if cls in ("zero", "positive"):
        out.add(NON_NEGATIVE)
    if default is not REQUIRED:
        out.add(DEFAULT if _same(value, default) else OTHER)
    return frozenset(out)


def default_range(default: Any, annotation: str = "") -> tuple[str, ...]:
    """The range a parameter is held to where nothing more is declared: both values of a
    flag (a bool default, or a required parameter documented as ``bool``), None and a
    value for a documented ``None`` default, the default and another value otherwise,
    any value for a required one."""
    if default is REQUIRED:
        return ("False", "True") if annotation in ("bool", "<class 'bool'>") else (GIVEN,)
    if default is None:
        return ("None", GIVEN)
    if isinstance(default, bool):
        return ("False", "True")
    return (DEFAULT, OTHER)
