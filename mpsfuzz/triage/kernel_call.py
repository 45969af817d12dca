"""One aten call, on the device and on CPU copies of its arguments: what the localiser
(triage/localise.py) compares.

The copies keep the values, sizes, strides and storage offsets of the device arguments
over a copy of each storage (views of one storage share one copy), so a
layout-dependent kernel sees what the device kernel saw. A call is described as data
(kernel, arguments, the storages' values before the call as exact literals), which the
kernel-level repro (triage/kernel_repro.py) renders. Its two sides are compared: the
outputs (shape, dtype, channels_last-ness, values with the dtype tolerance and NaN
positions), the arguments the schema lets the kernel write, and the bytes of every
argument storage it may not write.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_map

from ..generation import dtypes as dt

# Divergences of one call.
WRONG_VALUES, WRONG_SHAPE, WRONG_DTYPE, WRONG_FORMAT = "wrong-values", "wrong-shape", "wrong-dtype", "wrong-memory-format"
WRITES_INPUT, WRITES_OUTSIDE = "writes-input", "writes-outside-view"
RAISES_ON_DEVICE, RAISES_ON_CPU = "raises-on-device", "raises-on-cpu"
CRASH, HANG = "crash", "hang"

STORAGE_BYTES_MAX = 64 << 20  # larger argument storages are not copied (not compared)
LITERAL_MAX = 4096          # storages up to this many elements are recorded as literals
# A list argument of more tensors is recorded by its length alone (a cat of 65,537
# slices would make a record of megabytes, and no literal script of it is short).
LIST_ITEMS_MAX = 256
# Ops that return (or leave) uninitialised memory: only their metadata is compared.
UNINITIALISED = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
                 "aten::new_empty_strided", "aten::resize_", "aten::resize_as_", "aten::_resize_output_",
                 "aten::empty_permuted", "aten::_empty_affine_quantized", "aten::set_"}
_CHANNELS_LAST_RANKS = (4, 5)

def kernel_name(func) -> str:
    """``aten::mm.default``, ``aten::add.out``: the namespace, name and overload."""
    schema = func._schema
    return f"{schema.name}.{schema.overload_name or 'default'}"


def _packet_name(func) -> str:
    return func._schema.name


def kernel_family(kernel: str) -> str:
    """``aten::add`` for ``aten::add.Tensor``, ``aten::add_.Tensor`` and ``aten::add.out``:
    the functional, in-place and ``out=`` forms of one op share one implementation in
    most backends (structured kernels), so a bug key names the family (corpus/bugs.py)."""
    packet = kernel.rsplit(".", 1)[0] if "." in kernel.partition("::")[2] else kernel
    namespace, _, name = packet.rpartition("::")
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    return f"{namespace}::{name}" if namespace else name


def kernel_form(func) -> str:
    """``out`` (it writes keyword-only ``out=`` arguments), ``inplace`` (``add_``) or
    ``functional``."""
    schema = func._schema
    written = [a for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    if any(a.kwarg_only for a in written):
        return "out"
    name = schema.name.partition("::")[2]
    return "inplace" if name.endswith("_") and not name.endswith("__") else "functional"


class Uncomparable(Exception):
    """An argument this localiser cannot copy (sparse, nested, too large...)."""


# -- describing a call -----------------------------------------------------------------------

def _scalar_json(x):
    """A JSON-safe scalar: non-finite floats and complex numbers as tagged text."""
    if isinstance(x, bool) or x is None or isinstance(x, (int, str)):
        return x
    if isinstance(x, float):
        return x if x == x and x not in (float("inf"), float("-inf")) else {"float": repr(x)}
    if isinstance(x, complex):
        return {"complex": [_scalar_json(x.real), _scalar_json(x.imag)]}
    return {"repr": repr(x)}


def _storage_values(flat: torch.Tensor) -> list:
    return [_scalar_json(v) for v in flat.tolist()]


@dataclass(eq=False)
class _Storage:
    """One device storage under a call's arguments, and its CPU copy."""
    index: int
    device_storage: object
    nbytes: int
    device: torch.device
    before: torch.Tensor            # uint8 CPU copy of the bytes before the call
    cpu: torch.Tensor               # uint8 CPU bytes the CPU kernel runs on
    dtype: torch.dtype | None = None    # the element dtype it is described in


def _device_bytes(storage, nbytes: int, device) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8, device=device).set_(storage, 0, (nbytes,), (1,))


@dataclass(eq=False)
class _Arg:
    """A tensor argument: where it is in the call, the device tensor and its CPU copy."""
    device: torch.Tensor
    cpu: torch.Tensor
    storage: _Storage
    mutated: bool
    name: str
    meta: dict = field(default_factory=dict)   # as the kernel got it (a kernel may resize its out=)


@dataclass
class Snapshot:
    storages: dict = field(default_factory=dict)     # key -> _Storage
    tensors: list = field(default_factory=list)      # _Arg, in argument order
    cpu_args: tuple = ()
    cpu_kwargs: dict = field(default_factory=dict)
    # id of a device tensor -> its first _Arg (a call of 65,537 tensors looked each up in
    # the list: minutes); the tensors stay alive in ``tensors``, so the ids stay theirs
    by_id: dict = field(default_factory=dict)

    def arg_of(self, t: torch.Tensor) -> "_Arg | None":
        return self.by_id.get(id(t))

    def copy_tensor(self, t: torch.Tensor, mutated: bool, name: str) -> torch.Tensor:
        if (t.layout != torch.strided or t.is_quantized or getattr(t, "is_nested", False)
                or t.device.type == "meta" or type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter)):
            raise Uncomparable(f"argument {name} is not a plain strided tensor")
        storage = t.untyped_storage()
        nbytes = storage.nbytes()
        if nbytes > STORAGE_BYTES_MAX:
            raise Uncomparable(f"argument {name}'s storage is too large to copy")
        key = (storage.data_ptr(), nbytes, str(t.device)) if nbytes else ("empty", id(t))
        s = self.storages.get(key)
        if s is None:
            before = _device_bytes(storage, nbytes, t.device).to("cpu", copy=True)
            s = self.storages[key] = _Storage(len(self.storages), storage, nbytes, t.device, before, before.clone(),
                                              t.dtype)
        copy = torch.empty(0, dtype=t.dtype).set_(s.cpu.untyped_storage(), t.storage_offset(), tuple(t.shape),
                                                  tuple(t.stride()))
        if t.is_conj():
            copy = copy.conj()
        if t.is_neg():
            copy = torch._neg_view(copy)
        meta = {"kind": "tensor", "dtype": dt.name_of(t.dtype), "shape": list(t.shape), "stride": list(t.stride()),
                "offset": t.storage_offset(), "storage": s.index, "conj": bool(t.is_conj()), "neg": bool(t.is_neg())}
        arg = _Arg(t, copy, s, mutated, name, meta)
        self.tensors.append(arg)
        self.by_id.setdefault(id(t), arg)
        return copy


def _written_arguments(func) -> set[str]:
    """Names of the schema arguments the op may write (``Tensor(a!)``)."""
    return {a.name for a in func._schema.arguments if a.alias_info is not None and a.alias_info.is_write}


def snapshot(func, args: tuple, kwargs: dict) -> Snapshot:
    snap = Snapshot()
    written = _written_arguments(func)
    schema_args = func._schema.arguments

    def copy_all(value, mutated: bool, name: str):
        def one(x):
            if isinstance(x, torch.Tensor):
                return snap.copy_tensor(x, mutated, name)
            if isinstance(x, torch.device) and x.type != "cpu":
                return torch.device("cpu")
            if isinstance(x, torch.Generator):
                raise Uncomparable("a generator argument")
            return x
        return tree_map(one, value)

    cpu_args = []
    for i, a in enumerate(args):
        name = schema_args[i].name if i < len(schema_args) else f"arg{i}"
        cpu_args.append(copy_all(a, name in written, name))
    snap.cpu_args = tuple(cpu_args)
    snap.cpu_kwargs = {k: copy_all(v, k in written, k) for k, v in kwargs.items()}
    return snap


def _describe_value(x, snap: Snapshot | None) -> dict:
    if isinstance(x, torch.Tensor):
        arg = snap.arg_of(x) if snap is not None else None
        if arg is not None:
            return dict(arg.meta)
        return {"kind": "tensor", "dtype": dt.name_of(x.dtype), "shape": list(x.shape), "stride": list(x.stride()),
                "offset": x.storage_offset(), "storage": None}
    if isinstance(x, (list, tuple)):
        kind = "list" if isinstance(x, list) else "tuple"
        if len(x) > LIST_ITEMS_MAX:
            return {"kind": kind, "length": len(x), "items": None}
        return {"kind": kind, "items": [_describe_value(v, snap) for v in x]}
    if isinstance(x, torch.dtype):
        return {"kind": "dtype", "name": dt.name_of(x)}
    if isinstance(x, torch.device):
        return {"kind": "device", "type": x.type}
    if isinstance(x, torch.layout):
        return {"kind": "layout", "name": str(x).removeprefix("torch.")}
    if isinstance(x, torch.memory_format):
        return {"kind": "memory_format", "name": str(x).removeprefix("torch.")}
    if x is None or isinstance(x, (bool, int, float, complex, str)):
        return {"kind": "value", "value": _scalar_json(x)}
    return {"kind": "other", "repr": repr(x)[:200]}


def _storage_json(s: _Storage) -> dict:
    dtype = s.dtype or torch.uint8
    size = torch.empty(0, dtype=dtype).element_size()
    numel = s.nbytes // size
    values = None
    if numel <= LITERAL_MAX and s.nbytes % size == 0:
        flat = torch.empty(0, dtype=dtype).set_(s.before.untyped_storage(), 0, (numel,), (1,))
        if dtype == torch.complex32:
            flat = flat.to(torch.complex64)
        values = _storage_values(flat)
    return {"index": s.index, "dtype": dt.name_of(dtype), "numel": numel, "values": values}


def describe_call(func, args: tuple, kwargs: dict, snap: Snapshot | None) -> dict:
    """The call as data: kernel, arguments (tensors: dtype, shape, stride, storage
    offset and storage index), keyword arguments, and the storages' values before the
    call (exact literals; they are tiny in a minimal case)."""
    return {"kernel": kernel_name(func), "form": kernel_form(func),
            "args": [_describe_value(a, snap) for a in args],
            "kwargs": {k: _describe_value(v, snap) for k, v in kwargs.items()},
            "written": sorted(_written_arguments(func)),
            "storages": [_storage_json(s) for s in sorted((snap.storages.values() if snap else ()),
                                                            key=lambda s: s.index)]}


# -- comparing the two sides of a call ------------------------------------------------------

def _to_cpu(x):
    return x.detach().to("cpu", copy=True) if isinstance(x, torch.Tensor) else x


def _resolved(t: torch.Tensor) -> torch.Tensor:
    """Values with the conjugate and negative bits applied (the comparison arithmetic
    must not depend on lazy views)."""
    return t.detach().resolve_conj().resolve_neg()


def _channels_last(t: torch.Tensor) -> bool:
    return ((t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous())
            or (t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d) and not t.is_contiguous()))


@dataclass
class Judge:
    """How the calls of one case are compared: the op's tolerance scales, and whether
    values can be compared at all (``undefined-values``)."""
    rtol_scale: float = 1.0
    atol_scale: float = 1.0
    compare_values: bool = True
    # A random op: its random kernels are never compared. Elsewhere a random kernel
    # that gives the same result with two seeds (dropout p=0) is compared.
    random_op: bool = False

    def tolerance(self, dtype: torch.dtype) -> tuple[float, float]:
        from ..oracles.tolerances import tolerance
        return tolerance(dt.name_of(dtype), rtol_scale=self.rtol_scale, atol_scale=self.atol_scale)

    def tensors(self, actual: torch.Tensor, expected: torch.Tensor, values: bool) -> tuple[str, str] | None:
        from ..oracles.values import compare_tensors
        if actual.shape != expected.shape:
            return WRONG_SHAPE, f"shape {tuple(actual.shape)} on the device, {tuple(expected.shape)} on CPU"
        if actual.dtype != expected.dtype:
            return WRONG_DTYPE, f"dtype {actual.dtype} on the device, {expected.dtype} on CPU"
        if expected.dim() in _CHANNELS_LAST_RANKS and _channels_last(actual) != _channels_last(expected):
            return WRONG_FORMAT, (f"strides {tuple(actual.stride())} on the device, {tuple(expected.stride())} on "
                                  "CPU (channels_last on one side only)")
        if not (values and self.compare_values):
            return None
        rtol, atol = self.tolerance(expected.dtype)
        problem = compare_tensors(_resolved(_to_cpu(actual)), _resolved(expected), rtol, atol)
        return (WRONG_VALUES, problem) if problem else None

    def scalars(self, actual, expected) -> tuple[str, str] | None:
        numbers = isinstance(actual, (int, float)) and isinstance(expected, (int, float))
        if type(actual) is not type(expected) and not numbers:
            return WRONG_VALUES, f"{actual!r} on the device, {expected!r} on CPU"
        if isinstance(expected, (float, complex)) and self.compare_values:
            if expected != expected and actual != actual:
                return None
            rtol, atol = self.tolerance(torch.float64 if isinstance(expected, float) else torch.complex128)
            if abs(actual - expected) <= atol + rtol * abs(expected):
                return None
            return WRONG_VALUES, f"{actual!r} on the device, {expected!r} on CPU"
        if isinstance(expected, (bool, int)) and actual != expected and self.compare_values:
            return WRONG_VALUES, f"{actual!r} on the device, {expected!r} on CPU"
        return None


def _byte_mask(storage: _Storage, views: list[torch.Tensor]) -> torch.Tensor:
    """True for each byte of ``storage`` that one of ``views`` (tensors over it) covers."""
    mask = torch.zeros(storage.nbytes, dtype=torch.bool)
    for v in views:
        size = v.element_size()
        n = storage.nbytes // size
        if v.numel() == 0 or n == 0:
            continue
        elements = torch.arange(n).as_strided(tuple(v.shape), tuple(v.stride()), v.storage_offset()).reshape(-1)
        starts = elements * size
        mask[(starts.unsqueeze(1) + torch.arange(size)).reshape(-1).clamp_(max=storage.nbytes - 1)] = True
    return mask


def tensor_leaves(out) -> list:
    leaves, _ = tree_flatten(out)
    return leaves


def compare_call(func, snap: Snapshot, out, cpu_out, judge: Judge) -> list[tuple[str, str, dict]]:
    """Every divergence of one call whose both sides returned: [(kind, detail, where)],
    ``where`` naming the output (``{"output": i}``), the written argument
    (``{"argument": name}``) or the storage (``{"storage": k, "argument": name}``)."""
    found: list[tuple[str, str, dict]] = []
    values = _packet_name(func) not in UNINITIALISED
    dev_leaves, cpu_leaves = tensor_leaves(out), tensor_leaves(cpu_out)
    if len(dev_leaves) != len(cpu_leaves):
        found.append((WRONG_SHAPE, f"{len(dev_leaves)} outputs on the device, {len(cpu_leaves)} on CPU", {}))
    else:
        many = len(cpu_leaves) > 1
        for i, (a, e) in enumerate(zip(dev_leaves, cpu_leaves)):
            if isinstance(e, torch.Tensor) and isinstance(a, torch.Tensor):
                problem = judge.tensors(a, e, values)
            elif isinstance(e, torch.Tensor) or isinstance(a, torch.Tensor):
                problem = (WRONG_SHAPE, f"output {i}: a tensor on one side only")
            else:
                problem = judge.scalars(a, e)
            if problem:
                found.append((problem[0], (f"output {i}: " if many else "") + problem[1],
                              {"output": i, "outputs": len(cpu_leaves)}))
                break
    # Arguments the kernel may write: what it wrote.
    for position, arg in enumerate(snap.tensors):
        if arg.mutated:
            problem = judge.tensors(arg.device, arg.cpu, values)
            if problem:
                found.append((problem[0], f"argument {arg.name} (written by the kernel): {problem[1]}",
                              {"argument": arg.name, "position": position}))
                break
    found += _unexpected_writes(snap)
    return found


def _unexpected_writes(snap: Snapshot) -> list[tuple[str, str, dict]]:
    """Bytes of an argument storage that the schema does not let the kernel write, and
    that it changed on the device but not on CPU."""
    found = []
    for s in snap.storages.values():
        written = [a.device for a in snap.tensors if a.storage is s and a.mutated]
        if s.device_storage.nbytes() != s.nbytes:
            continue  # resized by the kernel (an out= argument): its values were compared above
        after = _device_bytes(s.device_storage, s.nbytes, s.device).to("cpu", copy=True)
        free = ~_byte_mask(s, written) if written else torch.ones(s.nbytes, dtype=torch.bool)
        changed = (after != s.cpu) & free
        if not bool(changed.any()):
            continue
        readers = [a for a in snap.tensors if a.storage is s and not a.mutated]
        inside = [a for a in readers if bool((_byte_mask(s, [a.device]) & changed).any())]
        if inside:
            found.append((WRITES_INPUT, f"argument {inside[0].name} changed on the device, although the kernel's "
                                        "schema does not let it write it (CPU leaves it unchanged)",
                          {"storage": s.index, "argument": inside[0].name}))
        else:
            found.append((WRITES_OUTSIDE, f"{int(changed.sum())} byte(s) of an argument's storage outside every "
                                          "view the kernel may write changed on the device", {"storage": s.index}))
    return found


# -- the CPU side ---------------------------------------------------------------------------

def is_seeded(func) -> bool:
    return torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())


def _widened_cpu_call(func, snap: Snapshot):
    """The CPU call in the wider dtype where CPU has no kernel for a narrow one (as the
    executor does for the reference); outputs cast back. Written arguments are not
    comparable then (they are not written)."""
    narrow = {t.cpu.dtype for t in snap.tensors if dt.name_of(t.cpu.dtype) in dt.WIDER}
    if not narrow or any(t.mutated for t in snap.tensors):
        return None
    back = {dt.to_torch(dt.WIDER[dt.name_of(d)]): d for d in narrow}

    def up(x):
        return x.to(dt.to_torch(dt.WIDER[dt.name_of(x.dtype)])) if isinstance(x, torch.Tensor) and x.dtype in narrow else x

    def down(x):
        return x.to(back[x.dtype]) if isinstance(x, torch.Tensor) and x.dtype in back else x
    return tree_map(down, func(*tree_map(up, snap.cpu_args), **tree_map(up, snap.cpu_kwargs)))


def _fresh_cpu_args(args: tuple, kwargs: dict, snap: Snapshot):
    """Another set of CPU copies of the call's arguments, from the bytes before the call."""
    fresh = {id(s): s.before.clone() for s in snap.storages.values()}

    def one(x):
        if isinstance(x, torch.Tensor):
            arg = snap.arg_of(x)
            t = torch.empty(0, dtype=x.dtype).set_(fresh[id(arg.storage)].untyped_storage(), x.storage_offset(),
                                                   tuple(x.shape), tuple(x.stride()))
            t = t.conj() if x.is_conj() else t
            return torch._neg_view(t) if x.is_neg() else t
        if isinstance(x, torch.device) and x.type != "cpu":
            return torch.device("cpu")
        return x
    return tree_map(one, tuple(args)), tree_map(one, dict(kwargs))


def _same_bits(a, b) -> bool:
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return a == b or (a != a and b != b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a, b = _resolved(a).contiguous(), _resolved(b).contiguous()
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    if a.is_floating_point():
        return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())
    return torch.equal(a, b)


def deterministic(func, args, kwargs, snap: Snapshot, cpu_out, output: int) -> bool:
    """Whether a second CPU run of the call, on fresh copies, gives output ``output``
    again (bit for bit, NaN where NaN)."""
    try:
        cpu_args, cpu_kwargs = _fresh_cpu_args(args, kwargs, snap)
        again = func(*cpu_args, **cpu_kwargs)
        return _same_bits(tensor_leaves(cpu_out)[output], tensor_leaves(again)[output])
    except Exception:
        return True   # cannot tell: the divergence stands


def seed_independent(func, args, kwargs, snap: Snapshot) -> bool:
    """Whether a random kernel gives the same result on CPU with two different seeds
    (dropout with p=0, attention without dropout): then it is compared like any call.
    The CPU generator's state is restored: on a CPU target it is the device's."""
    try:
        with _disable_current_modes(), torch.random.fork_rng(devices=[]):
            results = []
            for seed in (1, 2):
                torch.manual_seed(seed)
                cpu_args, cpu_kwargs = _fresh_cpu_args(args, kwargs, snap)
                out = func(*cpu_args, **cpu_kwargs)
                written = [x for x in tree_flatten((cpu_args, cpu_kwargs))[0] if isinstance(x, torch.Tensor)]
                results.append(tensor_leaves(out) + written)
        return len(results[0]) == len(results[1]) and all(_same_bits(a, b) for a, b in zip(*results))
    except Exception:
        return False


def cpu_call(func, snap: Snapshot):
    """(result, exception) of the CPU kernel on the copies, with no mode active. Grad
    mode is left as the device call had it: some kernels read it (an RNN's workspace
    output exists only when gradients are wanted). A random kernel (one that turned out
    not to depend on its seed) runs with the CPU generator's state restored after."""
    with torch.random.fork_rng(devices=[], enabled=is_seeded(func)):
        return _unseeded_cpu_call(func, snap)


_DEVICE_MISMATCH = ("same device", "different device", "two devices", "different devices",
                    "to be on the same", "is on a different", "but got device", "expected device")


def _device_mismatch(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(p in text for p in _DEVICE_MISMATCH)


def _unseeded_cpu_call(func, snap: Snapshot):
    from ..execution.executor import is_unsupported
    with _disable_current_modes():
        try:
            return func(*snap.cpu_args, **snap.cpu_kwargs), None
        except Exception as exc:
            if is_unsupported(exc):
                try:
                    widened = _widened_cpu_call(func, snap)
                except Exception:
                    widened = None
                if widened is not None:
                    return widened, None
                return None, Uncomparable(f"CPU has no kernel: {exc}")
            if _device_mismatch(exc):
                # Something the copy could not move (a device named inside an opaque
                # argument, a tensor the schema hides): the CPU call is not the device
                # call's twin, so its error says nothing about the kernel.
                return None, Uncomparable(f"the CPU copy of the call still refers to the device: {exc}")
            return None, exc
