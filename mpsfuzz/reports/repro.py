"""Standalone repro scripts: a finding's minimal case as a Python script that needs only
torch.

The script builds each input with literal values when it is small (exact bit patterns:
``-0.0``, ``torch.nan``, subnormals written as the float64 literal they convert from
exactly) and with an explicit seeded recipe otherwise, then makes the exact layout *on
the device* (slices, permute, expand after the tensor is there: ``.to(device)`` would
make a view dense again). It calls the op, and checks: values against the eager CPU
reference with the finding's tolerance (``torch.testing.assert_close``), gradients the
same way (only the one that is wrong), a random op's draws against eager CPU's (a
two-sample Kolmogorov-Smirnov test), or the error, the crash or the hang itself.

Lines that run on the device under test end with :data:`MARKER`. Run directly on a
torch device (``mps``, ``cuda``) the script needs nothing else; for a target that is not
a device of its own (the fault-injecting test target, any ``module:attr`` target) the
small shim in :mod:`mpsfuzz.reports.shim` runs exactly those lines inside the target's
``run``. :mod:`mpsfuzz.reports.verify` runs the script in a fresh interpreter: a script
is shown as a repro only when that run reproduces the finding.
"""
from __future__ import annotations

import ast
import copy
import inspect
import keyword
import math
import os
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from .. import __version__
from ..corpus.finding import Finding, now_iso
from ..execution.executor import OUT_FILLER
from ..generation import catalogue
from ..generation.arg_extremes import extreme_arguments
from ..generation import dtypes as dt
from ..generation.opspec import aliased_out_input
from ..generation.recipes import (DEVICE_GENERATED, GAP_FILLER, HASH_CHUNK, MATRIX_DISTRIBUTIONS, Case, TensorRecipe,
                                  hash_bounds, index_hash_values, integer_bounds, main_input, out_cast_dtype_of, resolve_kwargs,
                                  special_positions)
from ..generation.settings import installed as installed_settings
from ..oracles.grads import BACKWARD_SCALE
from ..oracles.values import dut_alone_scale, leaf_tolerance
from . import wrong_backend
from .source import Rendering, SourceError, literal, public_name, text_literal

MARKER = "# device under test"
# Inputs with at most this many elements in their buffer are written as literals.
LITERAL_MAX = 64
# Larger inputs whose distribution has no seeded recipe below are written as literals
# up to this size; past it there is no standalone script.
LITERAL_HARD_MAX = 4096
LEAK_CALLS = 100
RESERVED = {"torch", "device", "actual", "expected", "out", "g", "grad", "before", "grown", "used", "resource",
            "math", "op", "canonical", "values"} | wrong_backend.SCRIPT_NAMES
# Other names a script binds at its top level (no helper may take them).
SCRIPT_NAMES = ({"sys", "exc", "whole", "outside", "cdf", "at", "d", "limit", "o", "call"}
                | {f"out{i}" for i in range(16)} | wrong_backend.SCRIPT_NAMES)


# Exception names a script can catch without importing anything.
_BUILTIN_ERRORS = {"RuntimeError", "IndexError", "ValueError", "TypeError", "NotImplementedError"}


class ReproError(ValueError):
    """No standalone script can be written for this finding (the reason says why)."""


@dataclass
class Script:
    text: str
    # What running it shows when it reproduces: {"outcome": "assertion" | "raises" |
    # "signal" | "timeout", plus "type"/"message" (raises) or "signal"}.
    expect: dict
    body_lines: int
    # Of body_lines, those of helper functions copied from the catalogue (e.g. the
    # canonicaliser that compares decompositions through their reconstruction).
    helper_lines: int = 0


# -- values --------------------------------------------------------------------------------

def _scalar(value, dtype_name: str) -> str:
    if dtype_name == "bool":
        return "True" if value else "False"
    if dtype_name in dt.COMPLEX:
        c = complex(value)
        if all(math.isfinite(p) and not (p == 0 and math.copysign(1, p) < 0) for p in (c.real, c.imag)):
            return repr(c)
        return f"complex({literal(c.real)}, {literal(c.imag)})"
    if dtype_name in dt.INTEGRAL:
        return str(int(value))
    text = literal(float(value))
    return text[:-2] + "." if text.endswith(".0") else text


def _nested(values: torch.Tensor, dtype_name: str) -> str:
    if values.dim() == 0:
        return _scalar(values.item(), dtype_name)
    return "[" + ", ".join(_nested(v, dtype_name) for v in values) + "]"


# torch.tensor infers these from the literal (Python floats, ints, bools).
_INFERRED_DTYPES = {"float32", "int64", "bool"}


def _dtype_arg(dtype_name: str) -> str:
    return "" if dtype_name in _INFERRED_DTYPES else f", dtype={dt.to_torch(dtype_name)}"


def _base_buffer(recipe: TensorRecipe) -> torch.Tensor:
    """The flat CPU buffer the view is taken from, exactly as materialize fills it."""
    torch_dtype = dt.to_torch(recipe.dtype)
    flat = torch.full((recipe.layout.offset + math.prod(recipe._dense_base_shape()),),
                      True if recipe.dtype == "bool" else GAP_FILLER, dtype=torch_dtype)
    recipe._view_of(flat).copy_(recipe.cpu_values())
    return flat


def _view_steps(recipe: TensorRecipe) -> str:
    """The view ops after the dense base: gaps, permutation, expansion."""
    lay, rank = recipe.layout, recipe.rank
    steps = ""
    if lay.gaps and any(g > 1 for g in lay.gaps):
        perm = lay.permutation or tuple(range(rank))
        index = ["::"] * rank
        for j, step in enumerate(lay.gaps):
            index[perm[j]] = f"::{step}" if step > 1 else ":"
        index = [":" if i == "::" else i for i in index]
        while index and index[-1] == ":":
            index.pop()
        steps += "[" + ", ".join(index) + "]"
    if lay.moves_dims():
        p = tuple(lay.permutation)
        if rank == 2:
            steps += ".t()"
        elif p == (*range(rank - 2), rank - 1, rank - 2):
            steps += ".transpose(-2, -1)"
        else:
            steps += f".permute{p}"
    if lay.bit:
        # the storage holds the values with the bit undone (TensorRecipe._view_of)
        steps += {"conj": ".conj()", "neg": "._neg_view()"}[lay.bit]
    if lay.expanded:
        steps += f".expand{tuple(recipe.shape) if recipe.rank != 1 else '(' + str(recipe.shape[0]) + ')'}"
    return steps


def _seeded_values(recipe: TensorRecipe) -> list[str] | None:
    """Source lines making ``values`` (the logical values, before expansion) exactly as
    the recipe does, from its seed; None when only a literal can."""
    v = recipe.values
    shape = recipe._value_shape()
    real = dt.real_dtype_name(recipe.dtype)
    if recipe.dtype == "bool" or v.distribution in MATRIX_DISTRIBUTIONS + DEVICE_GENERATED + ("cast_edges",):
        return None
    integral = recipe.dtype in dt.INTEGRAL
    if integral or v.distribution in ("small_int", "int_range"):
        # (what generate_values draws: int64 integers in the range, as float64 for a float)
        low, high = integer_bounds(v, real)
        one = f"torch.randint({low}, {high + 1}, {shape}, generator=g, dtype=torch.int64)"
        if not integral:
            one += ".to(torch.float64)"
    elif v.distribution == "bool":
        return None
    elif v.distribution == "normal":
        one = f"torch.randn({shape}, generator=g, dtype=torch.float64)"
        if v.high is not None and v.high != 1.0:
            one += f" * {v.high!r}"
    else:
        low, high = ((-1.0, 1.0) if v.distribution == "uniform" else (0.125, 8.0))
        low = v.low if v.low is not None else low
        high = v.high if v.high is not None else high
        one = f"torch.rand({shape}, generator=g, dtype=torch.float64) * {high - low!r} + {low!r}"
    if not (integral or v.distribution in ("small_int", "int_range")):
        info = torch.finfo(dt.to_torch(real))
        one = f"({one}).clamp({float(info.min)!r}, {float(info.max)!r})"
    expr = f"torch.complex({one}, {one})" if recipe.dtype in dt.COMPLEX else one
    lines = [f"g = torch.Generator().manual_seed({int(v.seed) & 0xFFFF_FFFF_FFFF})",
             f"values = {expr}.to({dt.to_torch(recipe.dtype)})"]
    flat = recipe.cpu_values().reshape(-1)
    for position, _ in v.specials:
        if flat.numel():
            p = position % flat.numel()
            lines.append(f"values.view(-1)[{p}] = {_scalar(flat[p].item(), recipe.dtype)}")
    return lines


def _hash_source() -> list[str]:
    """``index_hash_values`` as a script defines it: the function the harness makes
    ``index_hash`` inputs with, on the device (its source without the docstring, and
    without annotations: ``int | None`` is an error before Python 3.10)."""
    tree = ast.parse(inspect.getsource(index_hash_values))
    fn = tree.body[0]
    if isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant):
        fn.body = fn.body[1:]
    fn.returns = None
    for arg in fn.args.args:
        arg.annotation = None
    return ["# Each element of an index_hash input is a hash of its flat index, computed on the device:",
            *ast.unparse(tree).splitlines()]


def _split_expand(steps: str) -> tuple[str, str]:
    """``steps`` (from _view_steps) as the view before expansion and the expansion."""
    if ".expand" not in steps:
        return steps, ""
    head, tail = steps.rsplit(".expand", 1)
    return head, ".expand" + tail


def _index(position: int, shape: tuple) -> str:
    """Source of the index of flat logical ``position`` in a tensor of ``shape``."""
    index = []
    for n in reversed(shape):
        index.append(position % n)
        position //= n
    return ", ".join(str(i) for i in reversed(index)) or "()"


def _hash_fill_lines(recipe: TensorRecipe, name: str) -> list[str]:
    """Lines that fill ``name`` (the input's view before expansion, on the device) as
    ``TensorRecipe.fill_generated`` does: rows block by block from the hash, then the
    specials."""
    shape, dtype, seed = recipe._value_shape(), dt.to_torch(recipe.dtype), recipe.values.seed
    low, high = hash_bounds(recipe.values, recipe.dtype)
    bounds = "" if low is None else f", {low}, {high}"
    if not shape:
        lines = [f"{name}.fill_(index_hash_values({seed}, 0, 1, {dtype}, device{bounds})[0])"]
    else:
        row, numel = math.prod(shape[1:]), math.prod(shape)
        step = max(1, HASH_CHUNK // max(1, row))
        lines = [
            f"for first in range(0, {shape[0]}, {step}):  # {numel:,} elements, made block by block",
            f"    last = min({shape[0]}, first + {step})",
            f"    {name}[first:last].copy_(index_hash_values({seed}, first * {row}, (last - first) * {row}, "
            f"{dtype}, device{bounds}).view((last - first,) + {tuple(shape[1:])}))"]
    for position, value in special_positions(recipe.values, math.prod(shape), recipe.dtype):
        text = _scalar(value, recipe.dtype)
        if isinstance(value, int) and value >= 2**63:
            text = f"torch.tensor({text}, dtype={dtype})"     # (uint64's max: no int64 scalar holds it)
        lines.append(f"{name}[{_index(position, shape)}] = {text}")
    return lines


def _generated_lines(recipe: TensorRecipe, name: str) -> list[str]:
    """An ``index_hash`` input (made on the device, whatever its size): a filled buffer
    on the device viewed as the recipe says, its values from the hash (the function
    defined earlier in the script), then the expansion, as materialize does."""
    dense = recipe._dense_base_shape()
    offset = recipe.layout.offset
    fill = "True" if recipe.dtype == "bool" else str(GAP_FILLER)
    view = f"[{offset}]" if not dense else (f"[{offset}:]" if offset else "") + f".view{tuple(dense)}"
    steps, expand = _split_expand(_view_steps(recipe))
    lines = [f"{name} = torch.full(({recipe.base_numel},), {fill}, dtype={dt.to_torch(recipe.dtype)}, "
             f"device=device){view}{steps}"]
    lines += _hash_fill_lines(recipe, name)
    return lines + ([f"{name} = {name}{expand}"] if expand else [])


def tensor_lines(recipe: TensorRecipe, name: str, *, hash_defined: bool = False) -> list[str]:
    """Source lines that leave ``name`` bound to the input, built on ``device`` (an
    ``index_hash`` input with the hash function's definition first, unless
    ``hash_defined``)."""
    if recipe.values.distribution in DEVICE_GENERATED:
        return ([] if hash_defined else _hash_source()) + _generated_lines(recipe, name)
    dense = recipe._dense_base_shape()
    offset = recipe.layout.offset
    steps = _view_steps(recipe)
    base = _base_buffer(recipe)
    seeded = _seeded_values(recipe) if base.numel() > LITERAL_MAX else None
    if seeded is None and base.numel() > LITERAL_HARD_MAX:
        raise ReproError(f"input {name} has {base.numel()} elements and no seeded recipe for "
                         f"'{recipe.values.distribution}' values")
    dtype = dt.to_torch(recipe.dtype)
    if seeded is None:
        if math.prod(dense) == 0 and offset == 0:
            return [f"{name} = torch.empty({tuple(dense)}, dtype={dtype}, device=device){steps}"]
        if offset == 0:
            text = _nested(base.view(dense), recipe.dtype)
            return [f"{name} = torch.tensor({text}{_dtype_arg(recipe.dtype)}, device=device){steps}"]
        text = _nested(base, recipe.dtype)
        head = f"torch.tensor({text}{_dtype_arg(recipe.dtype)}, device=device)"
        if not dense:
            view = f"[{offset}]"
        else:
            view = f"[{offset}:]" + (f".view{tuple(dense)}" if len(dense) != 1 else "")
        return [f"{name} = {head}{view}{steps}"]
    # Big: a filled buffer on the device, viewed, then the seeded values copied in.
    steps, expand = _split_expand(steps)
    fill = "True" if recipe.dtype == "bool" else str(GAP_FILLER)
    view = (f"[{offset}:]" if offset else "") + f".view{tuple(dense) if len(dense) != 1 else '(' + str(dense[0]) + ',)'}"
    lines = [f"{name} = torch.full(({base.numel()},), {fill}, dtype={dtype}, device=device){view}{steps}"]
    lines += seeded
    lines.append(f"{name}.copy_(values)" if not expand else f"{name} = {name}.copy_(values){expand}")
    return lines


def _sliced_rows(spec, case: Case) -> dict[int, list]:
    """{input: its blocks of rows} that the reference of a large row-wise op sees: what
    its ``reference_inputs`` says (``.blocks``), else input 0's boundary blocks."""
    from ..generation.large_sizes import boundary_blocks
    declared = getattr(spec.reference_inputs, "blocks", None)
    return declared(case) if declared is not None else {0: boundary_blocks(case.inputs[0].shape)}


def _slice_view(storage: str, start: int, recipe: TensorRecipe) -> str:
    """Source of ``recipe``'s view into the flat ``storage`` whose base buffer begins at
    ``start``: the dense part after the offset, viewed, then gaps, permutation, expansion."""
    dense = recipe._dense_base_shape()
    first = start + recipe.layout.offset
    if not dense:
        head = f"{storage}[{first}]"
    else:
        head = f"{storage}[{first}:{first + math.prod(dense)}]" + (f".view{tuple(dense)}" if len(dense) != 1 else "")
    return head + _view_steps(recipe)


def input_lines(case: Case, names: list[str]) -> list[str]:
    """Source lines that leave each of ``names`` bound to its input on ``device``. Inputs
    that share a storage are views of one buffer made on the device, filled exactly as
    the case fills it (each input's values in turn: a later input wins where they
    overlap). The hash function comes first where an input is made from it."""
    generated = case.generated_storages()
    lines = _hash_source() if generated else []
    if not case.is_aliased():
        return lines + [line for recipe, name in zip(case.inputs, names)
                        for line in tensor_lines(recipe, name, hash_defined=True)]
    plan = case.storage_plan()
    members: dict[int, list[int]] = {}
    for i, (storage, _) in enumerate(plan):
        members.setdefault(storage, []).append(i)
    taken = set(names)
    storages = None
    for storage, group in members.items():
        if len(group) == 1:
            lines += tensor_lines(case.inputs[group[0]], names[group[0]], hash_defined=True)
            continue
        buffer = next(n for n in ("storage", "shared") + tuple(f"storage{k}" for k in range(len(names) + 1))
                      if n not in taken)
        taken.add(buffer)
        if storage in generated:
            lines += _generated_storage_lines(case, group, names, buffer)
            continue
        storages = storages or case.cpu_storages()[0]
        lines += _literal_storage_lines(case, group, names, buffer, storages[storage])
    # Inputs in the order of the call, whatever storage they are in.
    return lines


def _literal_storage_lines(case: Case, group: list[int], names: list[str], buffer: str, flat) -> list[str]:
    """A shared storage written as a literal (built on the host as the case builds it),
    and each input of ``group`` viewed into it."""
    dtype_name = case.inputs[group[0]].dtype
    if flat.numel() > LITERAL_HARD_MAX:
        raise ReproError(f"the storage that {', '.join(names[i] for i in group)} share has {flat.numel()} "
                         "elements: too many for a literal")
    together = " and ".join(names[i] for i in group)
    plan = case.storage_plan()
    return ([f"{buffer} = torch.tensor({_nested(flat, dtype_name)}{_dtype_arg(dtype_name)}, device=device)"
             f"  # one storage: {together} are views of it"]
            + [f"{names[i]} = {_slice_view(buffer, plan[i][1], case.inputs[i])}" for i in group])


def _generated_storage_lines(case: Case, group: list[int], names: list[str], buffer: str) -> list[str]:
    """A shared storage that holds an index_hash input, made on the device as
    ``Case.materialize`` makes it: the gap filler, then each input of ``group`` viewed
    into it and filled in turn (from the hash, or from its seeded or literal values)."""
    first = case.inputs[group[0]]
    size = case.storage_sizes()[group[0]]
    fill = "True" if first.dtype == "bool" else str(GAP_FILLER)
    lines = [f"{buffer} = torch.full(({size},), {fill}, dtype={dt.to_torch(first.dtype)}, device=device)"
             f"  # one storage: {' and '.join(names[i] for i in group)} are views of it"]
    plan = case.storage_plan()
    for i in group:
        recipe, name = case.inputs[i], names[i]
        view, expand = _split_expand(_slice_view(buffer, plan[i][1], recipe))
        lines.append(f"{name} = {view}")
        if recipe.values.distribution in DEVICE_GENERATED:
            lines += _hash_fill_lines(recipe, name)
        else:
            lines += _values_lines(recipe, name) + [f"{name}.copy_(values)"]
        lines += [f"{name} = {name}{expand}"] if expand else []
    return lines


def _values_lines(recipe: TensorRecipe, name: str) -> list[str]:
    """Lines that leave ``values`` bound to the input's logical values on the host: its
    seeded recipe, else a literal where it is small enough."""
    seeded = _seeded_values(recipe)
    if seeded is not None:
        return seeded
    values = recipe.cpu_values()
    if values.numel() > LITERAL_HARD_MAX:
        raise ReproError(f"input {name} has {values.numel()} elements and no seeded recipe for "
                         f"'{recipe.values.distribution}' values")
    return [f"values = torch.tensor({_nested(values, recipe.dtype)}{_dtype_arg(recipe.dtype)})"]


# -- names and calls ------------------------------------------------------------------------

def input_names(case: Case, spec) -> list[str]:
    names: list[str] = []
    try:
        params = [p.name for p in inspect.signature(spec.fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    fallback = ["x", "y", "z", "w", "v", "u"]
    for i in range(len(case.inputs)):
        name = params[i] if i < len(params) else ""
        if (not name.isidentifier() or keyword.iskeyword(name) or name in RESERVED or name in names
                or name in ("input", "self")):
            name = next(f for f in fallback + [f"t{j}" for j in range(len(case.inputs))] if f not in names)
        names.append(name)
    return names


def _kwargs_source(case: Case) -> dict[str, str]:
    out = {}
    for key, value in resolve_kwargs(case.kwargs).items():
        text = literal(value)
        if text is None:
            raise ReproError(f"argument {key}={value!r} has no literal form")
        out[key] = text
    return out


def _inference_devices(b) -> tuple[str, ...]:
    """Where the generator may run the op to learn its outputs' shapes: the meta device,
    and eager CPU, only for a finding whose case already ran in a worker without dying.
    The generator runs in the campaign's own process: a crash or hang finding's case
    never runs here, on no device. Eager CPU crashes on some inputs (a soak's daemon died
    of torch 2.13's float16 conv_transpose2d backward, SIGSEGV, writing its script), and
    some crashes are in shape logic that the meta device runs too (issue 30, H200: SDPA's
    GQA divides by the number of key heads, 0, SIGFPE: the campaign died writing the
    script of a flaky crash finding)."""
    return () if _dies_possibly(b) else ("meta", "cpu")


def _dies_possibly(b) -> bool:
    """Whether running the finding's case may kill the process: a crash or hang, or a
    case holding an argument at an extreme, on which eager CPU has died (conv1d's
    backward with a stride of 2^31 - 1, SIGFPE; triu after a diagonal of 2^31, a heap
    corruption that aborted a campaign at its exit, its summary printed and its exit
    code lost: docs/real-findings.md)."""
    return b.finding.failure.oracle in ("crash", "hang") or bool(extreme_arguments(b.case))


# Run in a child interpreter: the op's result on the meta device (else eager CPU) as
# JSON metadata, for a case that may kill the process that runs it. It is handed this
# process's GenerationSettings with the case (a user's kernel files, the host bound).
_CHILD_INFERENCE = """
import json, sys, torch
from mpsfuzz.generation import catalogue, settings
from mpsfuzz.generation.recipes import Case, resolve_kwargs
given = json.loads(sys.stdin.read())
settings.install(settings.GenerationSettings.from_json(given["settings"]))
case = Case.from_json(given["case"])
spec = catalogue.get(case.op)
def meta(o):
    if isinstance(o, torch.Tensor):
        return {"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", "")}
    return [meta(x) for x in o] if isinstance(o, (tuple, list)) else None
for device in ("meta", "cpu"):
    try:
        out = spec.fn(*[t.to(device) for t in case.materialize("cpu")], **resolve_kwargs(case.kwargs))
    except Exception:
        continue
    print(json.dumps(meta(out)))
    break
"""
CHILD_INFERENCE_TIMEOUT_S = 120.0


def _result_metadata_in_a_child(case: Case):
    """The op's result for ``case`` as empty meta tensors (a tuple for several), learnt
    by a child interpreter: the case may crash or hang the process that runs it (a
    crash or hang finding), and this is the campaign's own."""
    import json
    import subprocess
    try:
        given = {"case": case.to_json(), "settings": installed_settings().to_json()}
        done = subprocess.run([sys.executable, "-c", _CHILD_INFERENCE], input=json.dumps(given),
                              capture_output=True, text=True, timeout=CHILD_INFERENCE_TIMEOUT_S)
        meta = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 and done.stdout.strip() \
            else None
    except (subprocess.TimeoutExpired, OSError, ValueError, IndexError):
        meta = None
    if meta is None:
        raise ReproError("cannot infer the out= tensor: the case dies or hangs on meta and on CPU")

    def tensors(m):
        if isinstance(m, dict):
            return torch.empty(m["shape"], dtype=getattr(torch, m["dtype"]), device="meta")
        return tuple(tensors(x) for x in m)
    return tensors(meta)


def _out_lines(spec, case: Case, kwargs: dict, devices: tuple[str, ...] = ("meta", "cpu")) -> tuple[list[str], str]:
    """``out=`` tensors like the ones the executor makes, from the result's metadata
    (computed on the meta device where it can run the op, else by eager CPU where
    ``devices`` allows). Returns the lines and the ``out=`` argument: a tensor, or a
    tuple of them when the op returns a tuple (of one, too), as the executor passes it."""
    result = None
    if not devices:   # a case that may kill the process: learnt in a child
        result = _result_metadata_in_a_child(case)
    for device in devices:
        inputs = [r.materialize("cpu").to(device) for r in case.inputs]
        try:
            result = spec.fn(*inputs, **kwargs)
            break
        except Exception as exc:
            failed = exc
    if result is None:
        raise ReproError(f"cannot infer the out= tensor: {type(failed).__name__}") from None
    single = isinstance(result, torch.Tensor)
    leaves = [result] if single else list(result)
    lines, names = [], []
    for i, leaf in enumerate(leaves):
        name = "out" if single else f"out{i}"
        shape, dtype = tuple(leaf.shape), leaf.dtype
        if case.variant == "out-cast":
            dtype = dt.to_torch(out_cast_dtype_of(case))
        fill = "True" if dtype == torch.bool else str(OUT_FILLER)
        if case.variant == "out-resized":
            text = f"torch.full((0,), {fill}, dtype={dtype}, device=device)"
        elif case.variant in ("out", "out-cast") or (len(shape) > 0 and leaf.numel() <= 1):
            text = f"torch.full({shape}, {fill}, dtype={dtype}, device=device)"
        elif len(shape) == 0:
            text = f"torch.full((2,), {fill}, dtype={dtype}, device=device)[1]"
        elif len(shape) >= 2:
            swapped = shape[:-2] + (shape[-1], shape[-2])
            text = f"torch.full({swapped}, {fill}, dtype={dtype}, device=device).transpose(-2, -1)"
        else:
            text = f"torch.full(({2 * shape[0]},), {fill}, dtype={dtype}, device=device)[::2]"
        lines.append(f"{name} = {text}")
        names.append(name)
    return lines, names[0] if single else "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"


KERNEL_LOADER = "_load_kernel_file"


def kernel_file_loader(text: str, path: str) -> str:
    """The script's source that runs a user's kernel file (its ``text``) as the module
    ``kernels``: without the file, and without mpsfuzz (``@mpsfuzz.kernel`` and
    ``mpsfuzz.tensor`` are stand-ins that change nothing)."""
    text = text if text.endswith("\n") else text + "\n"
    base = os.path.basename(path)
    return "\n".join([
        f"# The kernel file (mpsfuzz run --kernels {base}), its text as it was when this script was written.",
        f"KERNEL_FILE = {text_literal(text)}",
        "",
        "",
        f"def {KERNEL_LOADER}(text, filename):",
        '    """The kernel file run as a module: its source in linecache for inspect.getsource (triton.jit',
        '    reads it), its folder importable for what it imports beside it, mpsfuzz\'s declarations as',
        '    no-ops."""',
        "    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)",
        "    sys.path.append(os.path.dirname(filename))",
        "    stub = types.ModuleType('mpsfuzz')",
        "    stub.kernel = lambda fn=None, **declared: fn if fn is not None else (lambda f: f)",
        "    stub.tensor = lambda **declared: None",
        "    module = types.ModuleType('user_kernels')",
        "    module.__file__ = filename",
        "    sys.modules['user_kernels'] = module",
        "    real = sys.modules.get('mpsfuzz')",
        "    sys.modules['mpsfuzz'] = stub",
        "    try:",
        "        exec(compile(text, filename, 'exec'), module.__dict__)",
        "    finally:",
        "        if real is None:",
        "            del sys.modules['mpsfuzz']",
        "        else:",
        "            sys.modules['mpsfuzz'] = real",
        "    return module",
        "",
        "",
        f"kernels = {KERNEL_LOADER}(KERNEL_FILE, {path!r})"])


class _Builder:
    def __init__(self, finding: Finding, device: str, compiled: bool, dynamic: bool = False):
        self.finding = finding
        self.case = finding.case
        try:
            self.spec = catalogue.get(self.case.op)
        except KeyError:
            raise ReproError(f"op {self.case.op!r} is not in this mpsfuzz's catalogue") from None
        self.device = device
        self.compiled = compiled
        self.dynamic = dynamic      # torch.compile(dynamic=True)
        # Triage met the failure only when the call was compiled a second time (after a
        # first compilation and a Dynamo reset): the script compiles it twice too.
        self.second_compilation = compiled and bool((finding.reproducibility or {}).get("second_compilation"))
        self.names = input_names(self.case, self.spec)
        # Helpers copied into the script must not take a name the script binds.
        self.render = Rendering(reserved=(RESERVED - {"op", "canonical"}) | set(self.names)
                                | {f"{n}_cpu" for n in self.names} | SCRIPT_NAMES, eager_preparation=compiled)
        self.kwargs = _kwargs_source(self.case)
        self.imports = ["import torch"]

    def call(self, args: list[str], *, variant: str | None = None, out: str | None = None,
             reference: bool = False) -> str:
        """Source of the op's call; ``reference``: the CPU reference's call (a user's
        kernel's declared reference, copied in, instead of the kernel)."""
        variant = variant or self.case.variant
        kwargs = dict(self.kwargs)
        if variant == "autocast":
            inner = self.call(args, variant="functional", out=out, reference=reference)
            if reference:   # the reference never runs under autocast
                return inner
            self.render.helpers["autocast"] = _AUTOCAST_HELPER
            return f"_autocast(lambda: {inner})"
        if variant == "method":
            return f"{args[0]}.{self.spec.method}({', '.join(args[1:] + [f'{k}={v}' for k, v in kwargs.items()])})"
        if variant == "inplace":
            return f"{args[0]}.{self.spec.inplace}({', '.join(args[1:] + [f'{k}={v}' for k, v in kwargs.items()])})"
        if out is not None:
            kwargs["out"] = out
        fn = self.spec.as_reference().fn if reference else self.spec.fn
        from_file = self._kernel_file_call(fn, args, kwargs)
        if from_file is not None:
            return from_file
        try:
            return self.render.call(fn, args, kwargs)
        except SourceError as exc:
            raise ReproError(str(exc)) from None

    def _kernel_file_call(self, fn, args: list[str], kwargs: dict) -> str | None:
        """A user's kernel (or its reference) called from the user's own file, whose text
        the script carries and runs as a module: a kernel may call what cannot be copied
        into a script on its own (a torch.library op, a compiled Metal library, a Triton
        kernel), and the script must run where the file is not. None for torch's ops, and
        for a function its file does not bind under its own name (copied in)."""
        if self.spec.source_file is None:
            return None
        module = sys.modules.get(getattr(fn, "__module__", None) or "")
        name = getattr(fn, "__name__", None)
        path = getattr(module, "__file__", None)
        if not (path and name and getattr(module, name, None) is fn):
            return None
        if "kernels" not in self.render.helpers:
            try:
                text = Path(path).read_text()
            except (OSError, UnicodeDecodeError) as exc:
                raise ReproError(f"the kernel file {path}: {exc}") from None
            self.render.helpers["kernels"] = kernel_file_loader(text, path)
            self.render.helpers[KERNEL_LOADER] = ""   # its name is taken
            self.imports += ["import linecache", "import os", "import sys", "import types"]
        return f"kernels.{name}({', '.join(list(args) + [f'{k}={v}' for k, v in kwargs.items()])})"

    def on_cpu(self, expr: str, index: int | None = None) -> str:
        """A CPU copy of the device tensor ``expr`` for the reference. On a CPU device
        ``.cpu()`` returns the tensor itself: the reference would write into the inputs
        the device then reads (index_add_, running statistics), so it gets a clone.
        Input ``index`` gapped or expanded is copied as the same view of a copy of its
        storage: ``.cpu()`` makes such a view dense, and the executor's reference gets
        the view (an H200 run, docs/real-findings.md: eager CPU's batch_norm of a gapped input took another path
        than of a dense one, in its values and its result's memory format, and the
        scripts could not show what the campaign had judged)."""
        if index is not None and _densified_by_copy(self.case.inputs[index].layout):
            self.render.helpers["cpu_view"] = _CPU_VIEW_HELPER
            return f"_cpu_view({expr})"
        return f"{expr}.cpu()" if torch.device(self.device).type != "cpu" else f"{expr}.clone()"

    def use_reference_helpers(self) -> None:
        """The helpers that compare each backend with the recorded references."""
        self.render.helpers["_off_reference"] = wrong_backend.REFERENCE_HELPERS
        for name in wrong_backend.HELPER_NAMES:
            self.render.helpers.setdefault(name, "")    # (their names are taken)

    def on_target(self, args: list[str], *, variant: str | None = None, out: str | None = None) -> str:
        """Source of the op's call on the target. A compiled target compiles what the
        executor hands it (issue 37): the op's function itself, never inlined into
        another expression (torch.compile traces the function it is given, and an
        inlined call is another program: ``linalg.solve(out=)`` loses out='s resize only
        when out= reaches the op through its function's ``**kw``), or the executor's
        method and out= wrappers around it, with every tensor an argument (the inputs or
        their copies, ``out=``): what makes the inputs runs eagerly. With
        ``second_compilation``: compiled and called once on copies, Dynamo reset, and
        compiled again, as triage met the failure."""
        variant = variant or self.case.variant
        if not self.compiled:
            return self.call(args, variant=variant, out=out)
        if variant == "autocast":   # the executor enters autocast around the compiled call
            self.render.helpers["autocast"] = _AUTOCAST_HELPER
            return f"_autocast(lambda: {self.on_target(args, variant='functional', out=out)})"
        compiled, handed = self._compiled_callable(args, variant, out)
        if self.second_compilation:
            self.render.helpers["compiled_again"] = _COMPILED_AGAIN_HELPER
            dynamic = ", _dynamic=True" if self.dynamic else ""
            return f"_compiled_again({compiled}, {', '.join(handed)}{dynamic})"
        dynamic = ", dynamic=True" if self.dynamic else ""
        return f"torch.compile({compiled}{dynamic})({', '.join(handed)})"

    def _compiled_callable(self, args: list[str], variant: str, out: str | None) -> tuple[str, list[str]]:
        """(source of the callable the executor compiles for ``variant``, the source of
        each argument handed to it)."""
        keywords = [f"{k}={v}" for k, v in self.kwargs.items()]
        if variant in ("method", "inplace"):
            name = self.spec.method if variant == "method" else self.spec.inplace
            return f"lambda *t, **k: t[0].{name}(*t[1:], **k)", list(args) + keywords
        op = self._op_source()
        if op is None:   # only its call has source (an OpInfo op): that call, its tensors arguments
            params, handed = list(self.names[:len(args)]), list(args)
            out_param = params[args.index(out)] if out is not None and out in args else None
            if out is not None and out_param is None:
                out_param = next(n for n in ("out", "out_", "out__") if n not in params)
                params.append(out_param)
                handed.append(out)
            expr = self.call(params[:len(args)], variant=variant, out=out_param)
            return f"lambda {', '.join(params)}: {expr}", handed
        if out is None:
            return op, list(args) + keywords
        if out in args:
            self.render.helpers["into_self"] = _INTO_SELF_HELPER.format(op=op)
            return "_into_self", list(args) + keywords
        self.render.helpers["with_out"] = _WITH_OUT_HELPER.format(op=op)
        return "_with_out", list(args) + [f"out={out}"] + keywords

    def _op_source(self) -> str | None:
        """The op's function by its name in the script: torch's own by its public name, a
        user's kernel from its file, any other copied as a helper (``op``); None where
        only its call has source."""
        fn = self.spec.fn
        if callable(getattr(fn, "render_call", None)):
            return None
        name = public_name(fn)
        if name is not None:
            return name
        from_file = self._kernel_file_call(fn, [], {})
        if from_file is not None:
            return from_file[:-len("()")]
        try:
            return self.render.helper(fn, "op" if getattr(fn, "__name__", "") == "<lambda>" else None)
        except SourceError as exc:
            raise ReproError(str(exc)) from None


def _densified_by_copy(layout) -> bool:
    return any(g > 1 for g in layout.gaps) or bool(layout.expanded)


_COMPILED_AGAIN_HELPER = """def _compiled_again(fn, *args, _dynamic=None, **kwargs):
    # The failure shows when the call is compiled a second time: compiled and called
    # once on copies of the tensors (same sizes, strides, offsets and shared storages;
    # what it returns is not judged), Dynamo reset, then compiled and called again.
    storages = {}

    def copy(t):
        if isinstance(t, (tuple, list)):
            return type(t)(copy(u) for u in t)
        if not isinstance(t, torch.Tensor):
            return t
        storage = t.untyped_storage()
        if storage.data_ptr() not in storages:
            storages[storage.data_ptr()] = storage.clone()
        c = torch.empty(0, dtype=t.dtype, device=t.device)
        c.set_(storages[storage.data_ptr()], t.storage_offset(), t.size(), t.stride())
        c = c.conj() if t.is_conj() else c
        c = c._neg_view() if t.is_neg() else c
        return c.requires_grad_() if t.requires_grad else c
    try:
        torch.compile(fn, dynamic=_dynamic)(*copy(args), **{k: copy(v) for k, v in kwargs.items()})
    except Exception:
        pass
    torch._dynamo.reset()
    return torch.compile(fn, dynamic=_dynamic)(*args, **kwargs)"""


# The executor's out= wrappers (execution/executor.py), compiled as a whole.
_WITH_OUT_HELPER = """def _with_out(*a, out, **k):
    {op}(*a, **k, out=out)
    return out"""

_INTO_SELF_HELPER = """def _into_self(*a, **k):
    {op}(*a, **k, out=a[0])
    return a[0]"""


_CPU_VIEW_HELPER = """def _cpu_view(t):
    # the same view of the same values on the CPU: t.cpu() would make it dense
    storage = t.untyped_storage()
    storage = storage.clone() if storage.device.type == 'cpu' else storage.cpu()
    view = torch.empty(0, dtype=t.dtype).set_(storage, t.storage_offset(), t.size(), t.stride())
    view = view.conj() if t.is_conj() else view
    return view._neg_view() if t.is_neg() else view"""


_AUTOCAST_HELPER = """def _autocast(call):
    # the call as a model under torch.autocast makes it, on the device under test
    with torch.autocast(device_type=torch.device(device).type):
        return call()


def _as_autocast_sees(t):
    # a floating input as autocast hands it to the kernel (rounded to its dtype), in float32
    low = torch.get_autocast_dtype(torch.device(device).type)
    return t.to(low).float() if t.is_floating_point() else t
"""


# A device fault raised asynchronously (a device-side assert) surfaces at the next
# synchronisation: in the campaign a later call made one, in a script that ends after
# the call nothing does (issue 37). The script synchronises the device itself.
_SYNCHRONIZE_HELPER = """def _synchronize(device):
    # an asynchronous device fault surfaces at the next synchronisation of its device
    kind = torch.device(device).type
    if kind in ('cuda', 'mps'):
        getattr(torch, kind).synchronize()"""


def _tolerance(finding: Finding, spec, *, dut_alone: bool, grads: bool = False) -> tuple[float, float]:
    profile = finding.failure.details.get("error_profile") if isinstance(finding.failure.details, dict) else None
    if isinstance(profile, dict) and "rtol" in profile:
        return float(profile["rtol"]), float(profile["atol"])
    main = finding.case.inputs[0].dtype if finding.case.inputs else "float32"
    scale = dut_alone_scale(spec) if dut_alone else 1.0
    if grads:
        scale *= BACKWARD_SCALE
    return leaf_tolerance(spec, main, scale=scale, widened="wider dtype" in finding.failure.message)


def _assert_close(rtol: float, atol: float, actual: str = "actual", expected: str = "expected") -> str:
    return (f"torch.testing.assert_close({actual}, {expected}, rtol={rtol:g}, atol={atol:g}, "
            "equal_nan=True, check_device=False)")


def _leak_plan(finding: Finding, device: str) -> tuple[int, int, bool]:
    """(calls, bytes per call that must not be exceeded, read the device allocator?) for a
    leak's script. The threshold follows what the finding measured: half of what each
    call kept (so the leak shows with a margin), at least 64 bytes. A device allocator
    counts exact bytes; where the script can only read the process's peak memory (CPU,
    or a leak seen in RSS), enough calls are made for a small leak to show."""
    m = finding.failure.details if isinstance(finding.failure.details, dict) else {}
    threshold = float(m.get("device_threshold", 64 * 1024))
    on_allocator = float(m.get("device_per_call", 0)) >= threshold
    kept = float(m.get("device_per_call", 0)) if on_allocator else float(m.get("rss_per_call", 0))
    per_call = max(64, int(kept // 2)) if kept > 0 else 64 * 1024
    allocator = on_allocator and torch.device(device).type in ("cuda", "mps")
    calls = LEAK_CALLS if allocator else min(20_000, max(LEAK_CALLS, -(-(4 << 20) // per_call)))
    return calls, per_call, allocator


def _memory_lines(device: str) -> tuple[list[str], list[str]]:
    kind = torch.device(device).type
    if kind == "cuda":
        return [], ["used = torch.cuda.memory_allocated"]
    if kind == "mps":
        return [], ["used = torch.mps.current_allocated_memory"]
    # Resident memory now (Linux; the peak would not move while a leak reuses memory
    # freed earlier, e.g. at import), else the peak (macOS: in bytes).
    return ["import resource", "import sys"], [
        "used = lambda: (int(open('/proc/self/statm').read().split()[1]) * resource.getpagesize() "
        "if sys.platform.startswith('linux') else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"]


# The oracles whose script shows the symptom on the device alone: a finding of both
# backends' gets the same script run on eager CPU alone first (wrong_backend.cpu_alone_lines).
_DEVICE_ALONE = ("crash", "errors", "layout", "variants")


def generate(finding: Finding, *, device: str | None = None, target_name: str | None = None) -> Script:
    """The repro script of ``finding`` for ``device`` (default: the one that found it).
    A finding of eager CPU's (``cpu-bug``) or of both backends' (``both``) gets a script
    that shows the backend that is wrong (issue 37): see :mod:`.wrong_backend`."""
    device = device or finding.device
    target_name = target_name or finding.target_name
    b, body, expect = _body(finding, device, target_name)
    if finding.failure.blame == "both" and finding.failure.oracle in _DEVICE_ALONE:
        # The same lines on eager CPU alone first, in a child interpreter: CPU shows it too.
        child, child_body, _ = _body(finding, "cpu", "cpu")
        body = wrong_backend.cpu_alone_lines(_assemble(child, child_body, header=[], markers=False)) + body
        b.imports += ["import signal", "import subprocess", "import sys"]
        b.render.helpers["_ending"] = wrong_backend.ENDING_HELPER
        expect = dict(expect, cpu_alone=wrong_backend.cpu_alone_ending(expect, finding))
    header = [f"# mpsfuzz {__version__} repro of finding {finding.signature}: {finding.failure.title}"]
    if finding.explanation_text:
        header.append(f"# {finding.explanation_text}")
    header.append(f"# Found on {finding.target_name} ({finding.device}), torch {finding.torch_version}. "
                  f"Lines marked '{MARKER}' run on the target.")
    text = _assemble(b, body, header=header)
    helpers = [h for h in b.render.helpers.values() if h]
    return Script(text=text, expect=expect, body_lines=count_body_lines(text),
                  helper_lines=count_body_lines("\n".join(helpers)))


def _assemble(b: "_Builder", body: list[str], *, header: list[str], markers: bool = True) -> str:
    """The script's text: header, imports, helpers, body (``markers`` False: without the
    device-under-test marks, for a script run on eager CPU alone)."""
    helpers = [h for h in b.render.helpers.values() if h]
    if not markers:
        body = [line.replace(f"  {MARKER}", "") for line in body]
    return "\n".join(header + sorted(set(b.imports)) + [""] + helpers + ([""] if helpers else []) + body) + "\n"


def _scripted_oracle(finding: Finding) -> str:
    """The oracle whose script shows the finding: for eager CPU's wrong values, gradients
    or shapes (the arbiter's cpu-wrong, keyed by the oracle it judged), that oracle."""
    failure = finding.failure
    if failure.blame == "cpu" and failure.oracle == "arbiter" and len(failure.dedup_key) > 1 \
            and failure.dedup_key[1] in ("values", "grads", "metadata"):
        return str(failure.dedup_key[1])
    return failure.oracle


# What a script of eager CPU's bug covers: (the oracle it shows, the failure's kind).
_CPU_SCRIPTS = {("values", "cpu-wrong"), ("values", "cpu-layout"), ("grads", "cpu-wrong"), ("grads", "cpu-layout"),
                ("metadata", "cpu-wrong"), ("errors", "ref-resizes-self"), ("crash", "crash")}


def _body(finding: Finding, device: str, target_name: str) -> tuple["_Builder", list[str], dict]:
    """(the builder, the script's body, what running it shows)."""
    oracle, kind = _scripted_oracle(finding), finding.failure.kind
    blame = finding.failure.blame
    if blame == "cpu" and (oracle, kind) not in _CPU_SCRIPTS:
        raise ReproError(f"no repro template for eager CPU's {oracle} finding ({kind})")
    b = _Builder(finding, device, target_name.endswith("-compiled"), target_name.endswith("-dynamic-compiled"))
    spec, case, names = b.spec, b.case, b.names
    body: list[str] = [f"device = {device!r}"]
    body += input_lines(case, names)
    expect: dict = {"outcome": "assertion"}
    cpu_names = [b.on_cpu(n, i) for i, n in enumerate(names)]
    if spec.reference_inputs is not None and case.inputs and case.inputs[0].values.distribution in DEVICE_GENERATED:
        # A row-wise op of the large sizes: the reference sees only the rows its result
        # is compared on, cut from the device's inputs (the same values).
        for i, rows in _sliced_rows(spec, case).items():
            cpu_names[i] = "torch.cat([" + ", ".join(f"{names[i]}[{a}:{b_}]" for a, b_ in rows) + "]).cpu()"
    # The executor computed the CPU reference in a wider dtype where CPU has no kernel:
    # value findings say so; an error finding's script asks eager CPU itself.
    widened = case.variant != "autocast" and (
        "wider dtype" in finding.failure.message or (oracle == "errors" and _cpu_lacks_kernel(b)))

    def reference(args: list[str], *, cast_back: bool = True) -> str:
        if widened:
            args = [f"{a}.to({dt.to_torch(dt.WIDER[r.dtype])})" if r.dtype in dt.WIDER else a
                    for a, r in zip(args, case.inputs)]
        if case.variant == "inplace" and not args[0].endswith(".clone()"):
            args = [f"{args[0]}.clone()"] + args[1:]
        if case.variant == "autocast":
            b.render.helpers["autocast"] = _AUTOCAST_HELPER
            args = [f"_as_autocast_sees({a})" for a in args]
        expr = b.call(args, variant="functional" if case.variant.startswith("out") else case.variant, reference=True)
        if case.variant == "out-cast" and cast_back:
            # computed in the result's own dtype, then cast into the out= tensor's
            return f"{expr}.to({dt.to_torch(out_cast_dtype_of(case))})"
        if widened and cast_back:
            expr = f"{expr}.to({dt.to_torch(case.inputs[0].dtype)})"
        return expr

    def dut_variant() -> list[str]:
        """Lines that leave the DUT's result in ``actual``."""
        aliased = aliased_out_input(case.variant)
        if aliased is not None:
            return [f"{b.on_target(names, out=names[aliased])}  {MARKER}", f"actual = {names[aliased]}"]
        if case.variant.startswith("out"):
            lines, out = _out_lines(spec, case, resolve_kwargs(case.kwargs), _inference_devices(b))
            return lines + [f"{b.on_target(names, out=out)}  {MARKER}", f"actual = {out}"]
        if case.variant == "inplace":
            return [f"{b.on_target(names)}  {MARKER}", f"actual = {names[0]}"]
        return [f"actual = {b.on_target(names)}  {MARKER}"]

    if oracle in ("crash", "hang"):
        if oracle == "crash":
            expect = {"outcome": "signal", "signal": str(finding.failure.details.get("signal", ""))}
        else:
            expect = {"outcome": "timeout"}
        if blame == "cpu":
            # The device's calls return (or raise); the same calls on eager CPU kill the process.
            body += _device_calls_then_cpus(b)
            expect["stdout"] = wrong_backend.DEVICE_RETURNED
        else:
            body += _executor_calls(b)
    elif oracle == "leak":
        # The executor confirms a leak by calling the variant again and again, each time
        # with fresh out= tensors (an out= that must be resized is resized every time).
        calls, per_call, allocator = _leak_plan(finding, device)
        imports, mem = _memory_lines(device if allocator else "cpu")
        b.imports += imports
        setup, call = _variant_call(b)
        if case.variant.startswith("out"):
            setup, call = [], "; ".join(setup + [call])
        body += setup + mem
        body += [f"for _ in range(3): {call}  {MARKER}",
                 "before = used()",
                 f"for _ in range({calls}): {call}  {MARKER}",
                 "grown = used() - before",
                 f"print(f'memory in use grew by {{grown / {calls}:.0f}} bytes per call')",
                 f"assert grown < {calls} * {per_call}, 'memory grows with every call'"]
    elif oracle == "errors" and kind == "ref-resizes-self":
        body += _resized_self_lines(b)
        expect = {"outcome": "assertion", "message": wrong_backend.RESIZED}
    elif oracle == "errors" and blame == "both":
        # Both backends raise on the non-contiguous inputs and accept contiguous copies:
        # no CPU call here (it raises too); the child run shows eager CPU alone.
        copies = [f"{n}.contiguous()" for n in names]
        body.append(f"works = {b.on_target(copies, variant='functional')}  {MARKER}")
        body.append("print('contiguous copies of the inputs work')")
        body += dut_variant()
        expect = {"outcome": "raises"}
        match = re.search(r"raised (\w+): (.*)", finding.failure.message)
        if match:
            expect.update(type=match.group(1), message=match.group(2).strip()[:80])
    elif oracle == "errors":
        grad = None
        if case.variant == "grad":
            grad = _grad_parts(b, _differentiated(b))
        if grad is not None:
            # The error may come from the backward: both sides run forward and backward.
            cpu_lines, ref = grad.reference(b)
            body += grad.lines + cpu_lines
            dut_lines = [f"actual = {grad.dut(b)}  {MARKER}"]
        else:
            ref = reference(cpu_names, cast_back=False)  # shown, never compared
            dut_lines = dut_variant()
            if case.variant.startswith("out"):
                # The executor calls the functional form first (out= takes its shapes
                # from it): an error there is the out= call's error too.
                dut_lines = [f"{b.on_target(names, variant='functional')}  {MARKER}"] + dut_lines
        if kind == "device-fault":
            b.render.helpers["synchronize"] = _SYNCHRONIZE_HELPER
            dut_lines = dut_lines + [f"_synchronize(device)  {MARKER}"]
        if kind == "ref-raises":
            body += dut_lines
            body.append("print('the device returned:', actual)")
            body.append(f"expected = {ref}  # eager CPU raises")
            expect = {"outcome": "raises", "stdout": "the device returned:"}
        elif finding.failure.details.get("cpu_raised"):
            # A device fault where CPU rejects the input too: CPU's clean error is shown,
            # the device's fault is the bug.
            cpu_error = finding.failure.details["cpu_raised"]
            body += ["try:", f"    expected = {ref}  # eager CPU rejects the input with a clean error",
                     f"except {cpu_error if cpu_error in _BUILTIN_ERRORS else 'Exception'} as exc:",
                     "    print('eager CPU raises:', type(exc).__name__, exc)"]
            body += dut_lines
            expect = {"outcome": "raises"}
        else:
            body.append(f"expected = {ref}  # eager CPU: works")
            body += dut_lines
            expect = {"outcome": "raises"}
        message = finding.failure.message
        match = re.search(r"raised (\w+): (.*)", message)
        if match:
            expect.update(type=match.group(1), message=match.group(2).strip()[:80])
        if kind == "device-fault":
            expect["fault"] = True
    elif oracle == "grads":
        lines, expect = _grad_lines(b, finding)
        body += lines
    elif oracle == "distribution":
        repeated = re.search(r"the (\d+) slices along dim (\d+) of", finding.failure.message)
        run = re.search(r"the (\d+) values from flat position ([\d,]+) repeat those from flat position ([\d,]+)",
                        finding.failure.message)
        if repeated:
            body += _repeated_slices_lines(b, int(repeated.group(2)))
        elif run:
            body += _repeated_run_lines(b, *(int(g.replace(",", "")) for g in run.groups()))
        else:
            body += _distribution_lines(b)
    elif oracle == "layout":
        # Inputs that share a storage or sit at an offset get fresh copies, as the layout
        # oracle's do (Case.copied_inputs).
        fresh = case.copied_inputs()
        copies = [f"{n}.clone(memory_format=torch.contiguous_format)" if i in fresh else f"{n}.contiguous()"
                  for i, n in enumerate(names)]
        if kind == "contiguous-raises":
            # The non-contiguous call works; the same values in contiguous copies raise.
            body += dut_variant()
            body.append("print('non-contiguous inputs give:', actual)")
            body.append(f"expected = {b.on_target(copies)}  {MARKER}")
            expect = {"outcome": "raises", "stdout": "non-contiguous inputs give:"}
            raised = re.match(r"(\w+): (.*)", finding.failure.message)
            if raised:
                expect.update(type=raised.group(1), message=raised.group(2).strip()[:80])
        else:
            body.append(f"expected = {b.on_target(copies)}  {MARKER}")
            body += dut_variant()
            body.append("print('non-contiguous:', actual, 'contiguous copies:', expected, sep='\\n')")
            body.append(_assert_close(*_tolerance(finding, spec, dut_alone=True)))
    elif oracle == "variants":
        body += _variant_lines(b, finding, dut_variant)
    elif oracle == "metadata":
        body.append(f"expected = {reference(cpu_names)}  {_cpu_comment(finding)}")
        body += dut_variant()
        if blame == "cpu":
            checked = wrong_backend.meta_shape_lines(finding)
            if checked is None:
                raise ReproError("the meta kernel's shapes were not recorded")
            b.use_reference_helpers()
            body += checked[0]
            expect = {"outcome": "assertion", "message": checked[1]}
        else:
            which = re.match(r"output (\d+):", finding.failure.message)
            if which:  # one output of several differs
                body.append(f"actual, expected = actual[{which.group(1)}], expected[{which.group(1)}]")
            body.append(_metadata_check(kind))
    elif oracle in ("values", "arbiter"):
        body.append(f"expected = {reference(cpu_names)}  {_cpu_comment(finding)}")
        helper = None
        if spec.canonicalise is not None:
            try:
                helper = b.render.helper(spec.canonicalise, "canonical")
            except SourceError as exc:
                raise ReproError(str(exc)) from None
            # canonical() reads the inputs as the op got them (executor.run_side): an
            # input the device overwrites is another finding, not this one. It is given
            # the call's arguments it declares (canonical_kwargs: the dim topk gathers along).
            read = "".join(f", {k}={b.kwargs[k]}" for k in spec.canonical_kwargs if k in b.kwargs)
            body += [f"expected = {helper}([{', '.join(cpu_names)}], expected{read})",
                     f"before = [{', '.join(f'{n}.clone()' for n in names)}]"]
        body += dut_variant()
        if helper is not None:
            body.append(f"actual = {helper}(before, actual{read})")
        if case.variant == "autocast":
            # in the dtypes the device's autocast chose
            body.append("expected = expected.to(actual.dtype) if isinstance(actual, torch.Tensor) else "
                        "tuple(e.to(a.dtype) for e, a in zip(expected, actual))")
        verdict, expect = _verdict_lines(b, finding, grads=False)
        body += verdict
    else:
        raise ReproError(f"no repro template for the {oracle!r} oracle")
    return b, body, expect


def _cpu_lacks_kernel(b: _Builder) -> bool:
    """Eager CPU has no kernel for the case's narrow dtypes (the executor then computes
    the reference in the wider dtype of :data:`dtypes.WIDER`)."""
    from ..execution.executor import is_unsupported
    if not any(r.dtype in dt.WIDER for r in b.case.inputs) or _dies_possibly(b):
        return False
    try:
        with torch.random.fork_rng(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            b.spec.as_reference().fn(*b.case.materialize("cpu"), **resolve_kwargs(b.case.kwargs))
    except Exception as exc:
        return is_unsupported(exc)
    return False


def _differentiable_paths(out, path: tuple = ()) -> list[tuple]:
    """Index paths (``(0,)``, ``(1, 2)``) of the outputs that carry a gradient, in the order
    the executor visits them (so upstream gradient i goes to the same output)."""
    if isinstance(out, torch.Tensor):
        return [path] if out.requires_grad and (out.is_floating_point() or out.is_complex()) else []
    if isinstance(out, (tuple, list)):
        return [p for i, o in enumerate(out) for p in _differentiable_paths(o, path + (i,))]
    return []


def _outputs_expr(call: str, paths: list[tuple]) -> str:
    """``call`` reduced to its differentiable outputs: the call itself for a single
    tensor, ``call[0]`` for one output of several, else a list naming each."""
    if paths == [()]:
        return call
    if len(paths) == 1:
        return call + "".join(f"[{i}]" for i in paths[0])
    items = ["".join(f"[{i}]" for i in p) for p in paths]
    return f"[(o := {call}){items[0]}, " + ", ".join(f"o{i}" for i in items[1:]) + "]"


def _tensor_source(t: torch.Tensor, seeded: str | None = None) -> str:
    """Source of a CPU tensor on ``device``: a literal while it is small, else ``seeded``
    (an expression that makes it exactly) when given. A tensor with no elements is
    ``torch.empty`` of its shape (a nested literal would lose the shape: ``[]``)."""
    if t.numel() == 0:
        return f"torch.empty({tuple(t.shape)}, dtype={t.dtype}, device=device)"
    if seeded is not None and t.numel() > LITERAL_MAX:
        return seeded
    if t.numel() > LITERAL_HARD_MAX:
        raise ReproError(f"a tensor of {t.numel()} elements is too large for a literal")
    return f"torch.tensor({_nested(t, dt.name_of(t.dtype))}, dtype={t.dtype}, device=device)"


@dataclass
class _Grad:
    """What a gradient call needs: the lines making the inputs differentiable and the
    upstream gradient ``g``, and the pieces of ``torch.autograd.grad(outputs, wrt, g)``.
    ``rows``: {input: blocks of rows} where the reference sees those rows alone (the
    @huge class): eager CPU differentiates the op on them, and the device's gradients
    are cut to them, as the executor's ``judged_grads`` cuts them."""
    lines: list[str]
    wrt: list[int]
    paths: list[tuple]       # the differentiable outputs, as the executor visits them
    allow: str               # ", allow_unused=True" where an input does not reach the outputs
    rows: dict | None = None

    def call(self, b: "_Builder", args: list[str], wrt_names: list[str], g: str = "g") -> str:
        outputs = _outputs_expr(b.call(args, variant="functional", reference=bool(self.rows)), self.paths)
        return f"torch.autograd.grad({outputs}, [{', '.join(wrt_names)}], {g}{self.allow})"

    def reference(self, b: "_Builder") -> tuple[list[str], str]:
        """Lines making CPU copies of the differentiable inputs, and the same gradient
        call on eager CPU."""
        cpu = {i: f"{b.names[i]}_cpu" for i in self.wrt}
        lines = [f"{cpu[i]} = {self._on_cpu(b, b.names[i] + '.detach()', i)}.requires_grad_()" for i in self.wrt]
        args = [cpu.get(i, self._on_cpu(b, n, i)) for i, n in enumerate(b.names)]
        g_cpu = "g.cpu()" if len(self.paths) == 1 else "[t.cpu() for t in g]"
        return lines, self.call(b, args, [cpu[i] for i in self.wrt], g_cpu)

    def _on_cpu(self, b: "_Builder", expr: str, i: int) -> str:
        """Input ``i`` on the CPU for the reference: its compared rows alone, where the
        reference sees only those (a fresh tensor: no clone needed)."""
        if self.rows and i in self.rows:
            return f"{_rows_source(expr, self.rows[i])}.cpu()"
        return b.on_cpu(expr, i)

    def dut(self, b: "_Builder") -> str:
        # A compiled target compiles the forward; the backward runs from its graph.
        outputs = _outputs_expr(b.on_target(b.names, variant="functional"), self.paths)
        call = f"torch.autograd.grad({outputs}, [{', '.join(b.names[i] for i in self.wrt)}], g{self.allow})"
        if not self.rows:
            return call
        rows = [self.rows.get(i) for i in self.wrt]
        return f"tuple(t if r is None else torch.cat([t[a:b] for a, b in r]) for t, r in zip({call}, {rows!r}))"


def _rows_source(expr: str, blocks) -> str:
    """Source of the rows ``[a, b)`` of each block of ``expr``, one after the other."""
    return "torch.cat([" + ", ".join(f"{expr}[{a}:{b}]" for a, b in blocks) + "])"


def _reference_rows(b: _Builder) -> dict:
    """{input: its blocks of rows} where the case's reference sees those rows alone (a
    row-wise op of the large sizes, its inputs made on the device), else {}."""
    spec, case = b.spec, b.case
    if spec.reference_inputs is not None and case.inputs and case.inputs[0].values.distribution in DEVICE_GENERATED:
        return _sliced_rows(spec, case)
    return {}


def _differentiated(b: _Builder) -> list[int]:
    """The inputs the executor's grad variant differentiates, read off the inputs its
    reference ran on (a few rows for the @huge class: never the whole input on the host)."""
    from ..execution.executor import grad_inputs, judged_inputs
    return grad_inputs(b.spec, judged_inputs(b.spec, b.case)[1])


def _grad_parts(b: _Builder, wrt: list[int]) -> _Grad | None:
    """The gradient of the op's differentiable outputs w.r.t. ``inputs[wrt]`` with the
    executor's seeded upstream gradients (``executor._backward``); None when no output
    carries a gradient (the executor then runs the forward alone)."""
    from ..execution.executor import judged_inputs, upstream_gradient
    case, names = b.case, b.names
    out = inputs = None
    if not _inference_devices(b):
        raise ReproError("its case may crash the process: the outputs are not inferred here")
    # (the reference's inputs and function: for the @huge class its rows, whose result
    # has the shape of the device's cut result)
    spec, base = judged_inputs(b.spec, case)
    for device in _inference_devices(b):
        inputs = [t.to(device) for t in base]
        for i in wrt:
            inputs[i].requires_grad_(True)
        try:
            out = spec.fn(*inputs, **resolve_kwargs(case.kwargs))
            break
        except Exception as exc:
            failed = exc
    if out is None:
        raise ReproError(f"cannot infer the outputs for the gradient: {type(failed).__name__}") from None
    paths = _differentiable_paths(out)
    if not paths or not wrt:
        return None
    seed = case.inputs[0].values.seed if case.inputs else 0
    leaves = [_at(out, p) for p in paths]
    gs = [upstream_gradient(o.shape, o.dtype, i, seed) for i, o in enumerate(leaves)]
    try:
        unused = any(r is None for r in torch.autograd.grad(leaves, [inputs[i] for i in wrt],
                                                             [g.to(leaves[0].device) for g in gs],
                                                             allow_unused=True))
    except Exception:
        unused = True
    sources = []
    for i, (o, g) in enumerate(zip(leaves, gs)):
        # upstream_gradient's own recipe, for a gradient too large to write out.
        gen = (seed + 7919 * (i + 1)) & 0xFFFF_FFFF
        seeded = (f"torch.randn({tuple(o.shape)}, generator=torch.Generator().manual_seed({gen}), "
                  f"dtype=torch.float64).to({g.dtype}).to(device)")
        sources.append(_tensor_source(g, seeded))
    lines = [f"{names[i]} = {names[i]}.detach().requires_grad_()" for i in wrt]
    lines.append(f"g = {sources[0]}" if len(sources) == 1 else f"g = [{', '.join(sources)}]")
    return _Grad(lines=lines, wrt=list(wrt), paths=paths, allow=", allow_unused=True" if unused else "",
                 rows=_reference_rows(b))


def _grad_taken_at_run_time(b: _Builder, wrt: list[int]) -> tuple[list[str], str]:
    """A forward and backward whose differentiable outputs the script finds as it runs
    (ones as their upstream gradients): for a crash or hang, whose case the generator
    must not run to learn them (_inference_devices). A crash does not hang on the
    upstream gradient's values."""
    names = b.names
    lines = [f"{names[i]} = {names[i]}.detach().requires_grad_()" for i in wrt]
    lines.append(f"out = [o for o in torch.utils._pytree.tree_leaves({b.on_target(names, variant='functional')}) "
                 f"if isinstance(o, torch.Tensor) and o.requires_grad]  {MARKER}")
    call = (f"torch.autograd.grad(out, [{', '.join(names[i] for i in wrt)}], [torch.ones_like(o) for o in out], "
            f"allow_unused=True) if out else None")
    return lines, call


def _grad_lines(b: _Builder, finding: Finding) -> tuple[list[str], dict]:
    wrt = _differentiated(b)
    # Ask only for the gradient that is wrong (the grads oracle names it) when it names one.
    wrong = re.match(r"gradient of input (\d+)", finding.failure.message)
    if wrong and int(wrong.group(1)) < len(wrt):
        wrt = [wrt[int(wrong.group(1))]]
    grad = _grad_parts(b, wrt)
    if grad is None:
        raise ReproError("no output carries a gradient to the inputs")
    cpu_lines, reference = grad.reference(b)
    lines = grad.lines + cpu_lines
    lines.append(f"expected = {reference}  {_cpu_comment(finding)}")
    lines.append(f"actual = {grad.dut(b)}  {MARKER}")
    verdict, expect = _verdict_lines(b, finding, grads=True)
    return lines + verdict, expect


def _device_calls_then_cpus(b: _Builder) -> list[str]:
    """A crash of eager CPU's (the executor met it in its reference, after the device's
    calls): the calls on the device (an error there is printed: the executor went on to
    CPU's), then the same calls on eager CPU, its inputs made again there."""
    cpu = copy.copy(b)
    cpu.compiled = False        # eager CPU: no torch.compile around its calls
    lines = [f"try:  {MARKER}"] + ["    " + line.replace(f"  {MARKER}", "") for line in _executor_calls(b)]
    lines += ["except Exception as exc:",
              "    print(f'{device} raises', type(exc).__name__, exc)",
              f"print(f'{{device}}: {wrong_backend.DEVICE_RETURNED}', flush=True)",
              "device = 'cpu'"]
    lines += input_lines(b.case, b.names)
    return lines + [line.replace(f"  {MARKER}", "  # eager CPU") for line in _executor_calls(cpu)]


def _resized_self_lines(b: _Builder) -> list[str]:
    """An in-place call that eager CPU lets resize self (broadcasting it to a larger
    shape) where the device raises, as an in-place op must."""
    names, x = b.names, b.names[0]
    cpu_args = [f"{x}_cpu"] + [b.on_cpu(n, i) for i, n in enumerate(names)][1:]
    return [f"{x}_cpu = {b.on_cpu(x, 0)}",
            f"try:  {MARKER}",
            f"    {b.on_target(names)}",
            "    print(f'{device}: no error')",
            "except Exception as exc:",
            "    print(f'{device} raises', type(exc).__name__, exc)",
            f"shape_before = tuple({x}_cpu.shape)",
            f"{b.call(cpu_args)}  # eager CPU",
            f"print('eager CPU turned self of shape', shape_before, 'into', tuple({x}_cpu.shape))",
            f"assert tuple({x}_cpu.shape) == shape_before, {wrong_backend.RESIZED!r}"]


def _cpu_comment(finding: Finding) -> str:
    """What the line computing eager CPU's result says: the reference, unless eager CPU
    is (one of) the backends the finding is about."""
    return "# eager CPU" if finding.failure.blame in ("cpu", "both") else "# eager CPU reference"


def _verdict_lines(b: _Builder, finding: Finding, *, grads: bool) -> tuple[list[str], dict]:
    """The end of a values or gradients script, once ``expected`` (eager CPU) and
    ``actual`` (the device) are there, and what running it shows: a target's finding
    compares the two (the references printed beside them); eager CPU's, or both
    backends', compares each with the references that decided who is wrong."""
    rtol, atol = _tolerance(finding, b.spec, dut_alone=False, grads=grads)
    if finding.failure.blame not in ("cpu", "both"):
        return (["print('expected (CPU):', expected, 'actual:', actual, sep='\\n')"] + jury_lines(finding)
                + [_assert_close(rtol, atol)], {"outcome": "assertion"})
    checked = wrong_backend.reference_lines(finding, rtol, atol)
    if checked is None:
        raise ReproError("no reference's values at the disputed positions were recorded: nothing shows which "
                         "backend is wrong")
    b.use_reference_helpers()
    return (["print('eager CPU:', expected, f'{device}:', actual, sep='\\n')"] + checked[0],
            {"outcome": "assertion", "message": checked[1]})


def jury_lines(finding: Finding) -> list[str]:
    """Comment lines saying who decided who is wrong, and one line that prints the
    independent references' values at the disputed positions beside the two backends'
    (as the campaign recorded them; the script prints its own ``actual`` and
    ``expected`` whole just before)."""
    jury = finding.failure.details.get("jury") if isinstance(finding.failure.details, dict) else None
    if not isinstance(jury, dict) or not jury.get("positions"):
        return []
    votes = [v for v in jury.get("votes", []) if v.get("juror") in jury.get("decided_by", [])] \
        or [v for v in jury.get("votes", []) if v.get("witness") == "independent"]
    if not votes:
        return []
    lines = [f"# Who is wrong: {jury.get('verdict')}"
             + (f", decided by {', '.join(jury.get('decided_by', []))}" if jury.get("decided_by") else "")
             + (f" ({jury.get('reason')})" if jury.get("reason") else "")
             + ": references that share no kernel with eager CPU"]
    lines += [f"#   {v['juror']}: {v.get('reference', '')}" for v in votes]
    shown = {}
    for i, position in enumerate(jury["positions"]):
        where = f"output {int(position.get('leaf', 0))} at {list(position.get('index', ()))}"
        refs = {v["juror"]: v["values"][i] for v in votes if i < len(v.get("values", []))}
        if refs:
            shown[where] = {"target": position.get("target"), "eager CPU": position.get("cpu"), **refs}
    if shown:
        lines.append(f"print('independent references at the disputed positions:', {shown!r})")
    return lines


def _variant_call(b: _Builder) -> tuple[list[str], str]:
    """(setup lines, one statement): the op called on the DUT once, exactly as the
    executor's variant call does: ``out=`` into freshly made tensors, the grad variant
    as forward and backward with the executor's upstream gradients (every input that
    takes a gradient, every differentiable output)."""
    case, names = b.case, b.names
    if case.variant == "grad":
        wrt = _differentiated(b)
        if _dies_possibly(b):
            return _grad_taken_at_run_time(b, wrt)
        grad = _grad_parts(b, wrt)
        if grad is None:
            return [], b.on_target(names, variant="functional")
        return grad.lines, grad.dut(b)
    if aliased_out_input(case.variant) is not None:   # out= is the input itself
        return [], b.on_target(names, out=names[aliased_out_input(case.variant)])
    if case.variant.startswith("out"):
        lines, out = _out_lines(b.spec, case, resolve_kwargs(case.kwargs), _inference_devices(b))
        return lines, b.on_target(names, out=out)
    return [], b.on_target(names)


def _executor_calls(b: _Builder) -> list[str]:
    """Every call the executor makes on the DUT for this case, in its order, for findings
    where the process itself fails (crash, hang) and any of them may be the one: the
    functional form first (out= takes its shapes from it; the variants oracle compares
    methods with it), the variant, then (functional cases with awkward layouts) the call
    on contiguous copies that the layout oracle makes."""
    case, names = b.case, b.names
    lines = []
    if case.variant not in ("functional", "grad"):
        lines += ["# mpsfuzz calls the functional form first, then the variant",
                  f"{b.on_target(names, variant='functional')}  {MARKER}"]
    setup, call = _variant_call(b)
    lines += setup + [f"{call}  {MARKER}"]
    if (case.variant == "functional" and any(not r.layout.is_plain() for r in case.inputs)
            and not ({"random", "undefined-values"} & set(b.spec.semantics))):
        lines += ["# then on contiguous copies of the inputs",
                  f"{b.on_target([f'{n}.contiguous()' for n in names])}  {MARKER}"]
    return lines


def _at(out, path: tuple):
    for i in path:
        out = out[i]
    return out


# Two-sample Kolmogorov-Smirnov test of the DUT's draws against eager CPU's: about this
# many draws a side, and the critical value's c(alpha) for alpha = 1e-6, so a script that
# fails shows a real difference in distribution, not bad luck.
DISTRIBUTION_DRAWS = 2000
KS_C_ALPHA = 2.69


def _repeated_slices_lines(b: _Builder, dim: int) -> list[str]:
    """A sample whose slices along ``dim`` all repeat the first (the distribution
    oracle's variety check): one draw shows it, as it has no chance to happen by luck."""
    variant = None if b.case.variant in ("functional", "method", "inplace") else "functional"
    return [f"actual = {b.on_target(b.names, variant=variant)}.to('cpu', copy=True)  {MARKER}",
            f"repeats = bool((actual == actual.narrow({dim}, 0, 1)).all())",
            f"print(f'{{tuple(actual.shape)}} sample; every slice along dim {dim} equals the first: {{repeats}}')",
            f"assert not repeats, 'the slices along dim {dim} repeat one another: a random sample would not'"]


def _repeated_run_lines(b: _Builder, k: int, later: int, earlier: int) -> list[str]:
    """A draw judged on windows (rand@huge, generation/huge_samples.py) in which a run of
    ``k`` values repeats another run (the distribution oracle's check of repeated runs):
    one draw shows it, as chance gives one with probability below 1e-6."""
    from ..generation.huge_samples import rng_windows
    shape = b.case.inputs[0].shape
    windows = rng_windows(math.prod(shape), shape[0] if shape else 1)

    def index(position: int) -> int:
        """Where flat position ``position`` of the draw lies among the windows' values."""
        before = 0
        for a, c in windows:
            if a <= position < c:
                return before + position - a
            before += c - a
        raise ReproError(f"flat position {position} lies in no window judged")
    i, j = index(later), index(earlier)
    return [f"actual = {b.on_target(b.names)}.to('cpu', copy=True)  {MARKER}",
            f"repeats = torch.equal(actual[{i}:{i + k}], actual[{j}:{j + k}])",
            f"print(f'the {k} values drawn from flat position {later:,} equal those from {earlier:,}: {{repeats}}')",
            f"assert not repeats, 'a run of {k} values repeats another: chance gives that with probability "
            "below 1e-6'"]


def _distribution_lines(b: _Builder) -> list[str]:
    """Random ops: the two generators differ, so the script compares distributions, not
    values: many draws on the DUT and on eager CPU, then a two-sample KS test."""
    case, names = b.case, b.names
    if _dies_possibly(b):
        raise ReproError("its case may crash the process: no sample is drawn here")
    try:
        with torch.random.fork_rng():
            sample = b.spec.fn(*case.materialize("cpu"), **resolve_kwargs(case.kwargs))
    except Exception as exc:
        raise ReproError(f"cannot draw a sample on CPU: {type(exc).__name__}") from None
    if not isinstance(sample, torch.Tensor):
        raise ReproError("distribution repros cover ops with one tensor output")
    calls = max(1, min(DISTRIBUTION_DRAWS, math.ceil(DISTRIBUTION_DRAWS / max(sample.numel(), 1))))
    as_real = "torch.view_as_real({}).double()" if sample.is_complex() else "{}.double()"

    def draws(call: str) -> str:
        one = as_real.format(f"{call}.to('cpu', copy=True)")
        return f"torch.cat([{one}.flatten() for _ in range({calls})])"
    cpu_names = [b.on_cpu(n, i) for i, n in enumerate(names)]
    variant = None if case.variant in ("functional", "method", "inplace") else "functional"
    return ["torch.manual_seed(2024)",
            f"actual = {draws(b.on_target(names, variant=variant))}  {MARKER}",
            f"expected = {draws(b.call(cpu_names, variant=variant))}  # eager CPU draws",
            # searchsorted cannot look up NaN: it counts as +inf (above every number).
            "actual, expected = (t.nan_to_num(torch.inf, torch.inf, -torch.inf) for t in (actual, expected))",
            "cdf = lambda x, at: torch.searchsorted(x.sort().values, at, right=True) / len(x)",
            "at = torch.cat([actual, expected])",
            "d = (cdf(actual, at) - cdf(expected, at)).abs().max().item()",
            f"limit = {KS_C_ALPHA} * (1 / len(actual) + 1 / len(expected)) ** 0.5",
            "print(f'means {actual.mean():.4g} (device) vs {expected.mean():.4g} (CPU); "
            "KS distance {d:.3g}, limit {limit:.3g}')",
            "assert d <= limit, 'the device draws from another distribution than eager CPU'"]


def _variant_lines(b: _Builder, finding: Finding, dut_variant) -> list[str]:
    kind, names = finding.failure.kind, b.names
    if kind == "writes-outside-view":
        # The whole storage under self, before and after; compared where the view is not.
        x = names[0]
        return ([f"whole = {x}.as_strided(({x}.untyped_storage().nbytes() // {x}.element_size(),), (1,), 0)",
                 "before = whole.clone()"] + dut_variant()
                + ["outside = torch.ones(whole.shape, dtype=torch.bool, device=device)",
                   f"outside.as_strided({x}.shape, {x}.stride(), {x}.storage_offset()).fill_(False)",
                   "print('outside the view, before:', before[outside], 'after:', whole[outside], sep='\\n')",
                   _assert_close(0, 0, "whole[outside]", "before[outside]")])
    if kind == "input-modified":
        match = re.search(r"input (\d+)", finding.failure.title)
        i = int(match.group(1)) if match else 1
        name = names[i] if i < len(names) else names[-1]
        return ([f"before = {name}.clone()"] + dut_variant()
                + [f"print('{name} before:', before, '{name} after:', {name}, sep='\\n')",
                   _assert_close(0, 0, name, "before")])
    lines = [f"expected = {b.on_target(names, variant='functional')}  {MARKER}"] + dut_variant()
    lines.append(f"print('functional:', expected, '{finding.case.variant}:', actual, sep='\\n')")
    lines.append(_assert_close(*_tolerance(finding, b.spec, dut_alone=True)))
    return lines


def _metadata_check(kind: str) -> str:
    if kind == "wrong-memory-format":
        cl = "memory_format=torch.channels_last"
        return (f"assert actual.is_contiguous({cl}) == expected.is_contiguous({cl}), "
                "f'strides {actual.stride()} vs CPU {expected.stride()}'")
    if kind == "wrong-dtype":
        return "assert actual.dtype == expected.dtype, f'{actual.dtype} vs CPU {expected.dtype}'"
    return "assert actual.shape == expected.shape, f'{tuple(actual.shape)} vs CPU {tuple(expected.shape)}'"


def count_body_lines(text: str) -> int:
    """Lines of the script that are neither imports, comments nor blank."""
    return sum(1 for line in text.splitlines()
               if line.strip() and not line.lstrip().startswith("#")
               and not line.startswith(("import ", "from ")))


def repro_for(finding: Finding, *, verify: bool = True, target_override: str | None = None,
              timeout_s: float = 60.0, warm: bool = False) -> dict:
    """Generate ``finding``'s script and (unless ``verify`` is False) run it in a fresh
    interpreter on the target (``warm``: forked from the workers' zygote, verify.py).
    The result is what the finding keeps as ``repro``."""
    from .verify import run_and_judge
    spec = target_override or finding.target_spec
    device, name = finding.device, finding.target_name
    if target_override:
        from ..execution.targets import TargetError, load_target
        try:
            target = load_target(target_override)
        except TargetError as exc:
            raise ReproError(str(exc)) from None
        device, name = str(target.device), target.name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ComplexHalf is experimental, and so on: not the user's concern here
        script = generate(finding, device=device, target_name=name)
    record = {"script": script.text, "lines": script.body_lines, "helper_lines": script.helper_lines,
              "expect": script.expect, "verified": None,
              "detail": "not run", "target": spec, "device": device}
    if finding.repro and finding.repro.get("script") == script.text and finding.repro.get("verified") is not None:
        # The same script was already judged: keep its verdict unless asked again.
        record.update({k: finding.repro[k] for k in ("verified", "detail", "output", "torch_version", "date", "target")
                       if k in finding.repro})
    if verify:
        verdict = run_and_judge(script, target_spec=spec, timeout_s=_timeout_for(finding, timeout_s), warm=warm)
        record.update(verified=verdict.reproduced, detail=verdict.detail, output=verdict.output,
                      torch_version=torch.__version__, date=now_iso(), target=spec)
    return record


def _timeout_for(finding: Finding, timeout_s: float) -> float:
    if finding.failure.oracle == "hang":
        # Interpreter start-up plus a few times the campaign's own timeout.
        match = re.search(r"in ([\d.]+)s", finding.failure.title)
        hang_after = float(match.group(1)) if match else 10.0
        return min(timeout_s, max(15.0, 3 * hang_after + 10))
    return timeout_s
