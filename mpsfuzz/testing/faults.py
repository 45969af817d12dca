"""A fault-injecting CPU target that emulates historical MPS bugs.

There is no Mac in CI, so the fuzzer's oracles are proved against this target: it runs
every op on eager CPU under a :class:`~torch.utils._python_dispatch.TorchDispatchMode`
that misbehaves when a watched aten op is called with arguments that meet a fault's
trigger condition. The faults are modelled on bugs fixed in PyTorch releases (see the MPS
release notes): wrong results on non-contiguous inputs, crashes on mixed dtypes, hangs,
leaks, and so on. The fuzzer knows nothing of them; it has to find them by generating
the trigger.

Load it in the fuzzer's workers with ``--target mpsfuzz.testing.faults:target``; the
environment variable ``MPSFUZZ_FAULTS`` picks the faults (unset: all of them; ``""`` or
``none``: none, i.e. a clean target that runs the same dispatch mode; otherwise a comma
separated list of names from :data:`FAULTS`).

Effects:

``corrupt``
    compute the real result, then change the first element (in flat, logical order) of
    every output tensor with elements, deterministically and well beyond any tolerance.
``raise``
    ``RuntimeError(message)``, like an MPSGraph or kernel error.
``unsupported``
    ``NotImplementedError('"<op>_mps" not implemented for '<Dtype>'')``, which the fuzzer
    must classify as an unsupported combination, not a bug.
``abort`` / ``segfault``
    kill the process with SIGABRT / SIGSEGV.
``hang``
    never return.
``leak``
    compute the real result and keep 1 MiB alive per call.
``noop``
    an in-place op returns ``self`` untouched (the kernel wrote nothing).
``densify``
    compute the real result and return a contiguous copy (the memory format is lost).
``ignore_strides``
    run the op on its inputs read as if they were contiguous: every non-contiguous
    tensor argument is replaced by the dense run of its storage that starts at its
    storage offset, as a kernel that ignores strides would read it (the commonest MPS
    layout bug).
``clobber_input``
    compute the real result, then overwrite the first element of the first tensor
    argument in place, although the op's schema does not let it write that argument
    (like CUDA ``linalg_eig`` overwriting a transposed input).
``corrupt_and_clobber``
    both ``corrupt`` and ``clobber_input``: wrong values, and the input overwritten
    (one kernel, two symptoms: the ``values`` and the ``variants`` oracles each see one).
``poison``
    raise a CUDA-style sticky error ("device-side assert triggered"); from then on every
    op in this process raises it too, as a real device context would.
``overflow_naively``
    (``hypot``) compute ``sqrt(x*x + y*y)`` in the input dtype, so the squares overflow
    where a careful kernel does not: a legitimate implementation choice, not a bug.
``accumulate_in_dtype``
    (``sum``) add the elements one by one in the input's own (half) precision, as a
    kernel without a float32 accumulator does: less accurate, within what
    half-precision accumulation may cost, not a bug.
``inflate``
    compute the real result and multiply it by 1.25 (a moderate but real error).
``leak_output``
    compute the real result and keep a copy of it alive on every call (a leak as small
    as one output-sized tensor per call).
``cache_once``
    compute the real result and, on the first call in a process only, keep a copy alive
    (a cache or workspace built once: not a leak).
``split_transform`` / ``split_transform_badly``
    (``_fft_c2c``) transform over many dims as transforms over groups of at most 3 dims,
    as cuFFT does where CPU's library gives up: a capability, not a bug; the bad form
    forgets the last group (a wrong result CPU cannot show, a smaller call can).
``skip_bounds_check``
    (``index_select``) clamp out-of-range indices instead of raising: a missing check.
``nudge_input``
    compute the op on its first input moved up by one unit of roundoff of the precision
    a kernel computes in (float32 for the half types), finite inputs only, as a kernel
    whose intermediate rounding differs: the same result except at a discontinuity
    (rounding ties), where both results are right.
``pairwise_product``
    (``prod``) multiply pairwise (a tree, as a parallel reduction does), in the dtype:
    intermediates overflow where a sequential product reaches a zero first.
``fault_later``
    compute the real result, then fail the *next* synchronisation with a CUDA-style
    sticky error, as an asynchronous device-side assert does (the process's device
    context is unusable from then on).
``rewrite``
    compute the real result and return ``fault.rewrite(func, args, kwargs, result)``:
    a result that is also valid where the op's result is not unique, e.g. another
    subgradient at a kink, tied elements sorted the other way, another basis of an
    eigenspace. The fuzzer must not report these (gradients at such points are undefined).
``reimplement``
    return ``fault.instead(func, args, kwargs)`` in place of the kernel: another
    implementation of the op (of an in-place op too, whose real result would already
    have written its self).
``skew``
    compute the real result, then move every element of every output (x -> 2x + 3 for
    numbers, all True for bools): a random op that draws from the wrong distribution.

Besides the faults modelled on real bugs (:data:`FAULTS`, what "all" means), the *broad*
faults of :data:`BROAD_FAULTS` misbehave in every aten call of a kind (every forward
kernel, every backward kernel, every random kernel): whatever op is fuzzed, its result,
gradient, draws, process or memory goes wrong. Tests pick them by name to obtain a real
finding of each op and variant (the repro-script test does); "all" never includes them.

Only top-level calls reach the mode: calls that a kernel makes internally do not, while a
CompositeImplicit op (e.g. ``torch.linalg.lu_factor``) is seen as the ops it decomposes
into (``aten::linalg_lu_factor_ex``). A fault on such an op as a whole (``aten::gru.input``,
whose CUDA path hands the call to cuDNN before any decomposition) names the public
function instead (``torch.gru``): those faults are applied by a ``TorchFunctionMode``
(:class:`FunctionFaultMode`), which sees calls of torch's functions before dispatch.
"""
from __future__ import annotations

import functools
import math
import os
import signal
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from ..execution.dispatch_modes import DenseHigherOrderOps
from ..generation.large_sizes import MAX_ELEMENTS

EFFECTS = ("corrupt", "raise", "unsupported", "abort", "segfault", "hang", "leak", "noop", "densify",
           "ignore_strides", "poison", "spill", "overflow_naively", "accumulate_in_dtype", "inflate",
           "leak_output", "cache_once", "split_transform", "split_transform_badly", "skip_bounds_check", "rewrite",
           "nudge_input", "pairwise_product", "fault_later",
           "clobber_input", "corrupt_and_clobber", "skew", "wrap_int32", "repeat_slices", "reimplement")

# What torch's C++ error messages call each dtype ("not implemented for 'Long'").
_CPP_DTYPE_NAMES = {
    torch.float16: "Half", torch.bfloat16: "BFloat16", torch.float32: "Float",
    torch.float64: "Double", torch.complex32: "ComplexHalf", torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble", torch.int8: "Char", torch.int16: "Short",
    torch.int32: "Int", torch.int64: "Long", torch.uint8: "Byte", torch.uint16: "UInt16",
    torch.uint32: "UInt32", torch.uint64: "UInt64", torch.bool: "Bool",
}

# Where eager CPU has no kernel for a low-precision dtype, a corrupting or leaking fault
# computes the "real" result in this wider dtype and casts it back (as MPS would have
# produced a result of the narrow dtype).
_WIDER = {torch.float16: torch.float32, torch.bfloat16: torch.float32,
          torch.complex32: torch.complex64}

POISON_MESSAGE = "CUDA error: device-side assert triggered"
# Set by a ``fault_later`` fault: the next synchronize() raises (and poisons the process).
_FAULT_AT_NEXT_SYNC: list[str] = []
# Set by a ``poison`` fault: the (emulated) device context of this process is unusable.
_POISONED: list[str] = []

LEAK_CHUNK_BYTES = 1 << 20
# Tensors kept alive by ``leak`` faults (module level: it is process memory that leaks).
_LEAKED: list[torch.Tensor] = []
# ``cache_once`` faults that have built their cache in this process.
_CACHED: dict[str, bool] = {}

Trigger = Callable[[Any, tuple, dict], bool]


@dataclass(frozen=True)
class Fault:
    """A misbehaviour of one or more aten ops under a condition on their arguments.

    ``ops`` holds op names: ``"aten::triu"`` matches every overload of ``aten::triu``
    (not the in-place ``aten::triu_``), ``"aten::add.Tensor"`` exactly that overload
    (``"aten::sqrt.default"`` the default one). ``OpOverloadPacket``/``OpOverload``
    objects are also accepted. ``when(func, args, kwargs)`` sees the arguments as they
    arrive at dispatch. ``outputs`` restricts a ``corrupt`` fault to those output
    indices (None: every output tensor).
    """

    name: str
    emulates: str
    ops: tuple
    when: Trigger
    effect: str
    message: str = ""
    outputs: tuple[int, ...] | None = None
    # ``rewrite`` effect: (func, args, kwargs, real result) -> the result to return.
    rewrite: Callable | None = None
    # ``reimplement`` effect: (func, args, kwargs) -> the result, the kernel not run.
    instead: Callable | None = None
    # ``wrap_int32`` effect: the element index that wraps to 0 (None: INT32_LIMIT).
    wrap_at: int | None = None

    def __post_init__(self):
        if self.effect not in EFFECTS:
            raise ValueError(f"fault {self.name!r}: unknown effect {self.effect!r}; "
                             f"expected one of {', '.join(EFFECTS)}")
        if isinstance(self.ops, (str, bytes)):
            raise TypeError(f"fault {self.name!r}: ops must be a tuple of op names")
        if (self.effect == "rewrite") != (self.rewrite is not None):
            raise ValueError(f"fault {self.name!r}: a rewrite function goes with the 'rewrite' effect only")
        if (self.effect == "reimplement") != (self.instead is not None):
            raise ValueError(f"fault {self.name!r}: an 'instead' function goes with the 'reimplement' effect only")

    def matches(self, func) -> bool:
        return any(_op_matches(op, func) for op in self.ops)

    @property
    def on_functions(self) -> bool:
        """Whether it names torch functions (``torch.gru``) rather than aten ops."""
        return all(_is_function(op) for op in self.ops)

    def triggered(self, func, args: tuple, kwargs: dict) -> bool:
        """Whether this fault fires for this call. A trigger that cannot evaluate the
        arguments (an unexpected argument kind) does not fire."""
        if not self.matches(func):
            return False
        try:
            return bool(self.when(func, args, kwargs))
        except Exception:
            return False

    def apply(self, func, args: tuple, kwargs: dict):
        """Misbehave for this call (the mode is not active here)."""
        effect = self.effect
        if effect == "corrupt":
            return _corrupt(func, _real_result(func, args, kwargs), self.outputs)
        if effect == "poison":
            _POISONED.append(self.name)
            raise RuntimeError(POISON_MESSAGE)
        if effect == "noop":
            return _input(func, args, kwargs)
        if effect == "wrap_int32":
            return _wrapped_past_int32(_real_result(func, args, kwargs), self.wrap_at)
        if effect == "repeat_slices":
            out = _real_result(func, args, kwargs)
            return out.copy_(out.narrow(0, 0, 1).expand_as(out)) if out.dim() and out.numel() else out
        if effect == "densify":
            out = _real_result(func, args, kwargs)
            return tree_map(lambda t: t.contiguous() if isinstance(t, torch.Tensor) else t, out)
        if effect == "ignore_strides":
            return func(*tree_map(_read_as_contiguous, tuple(args)), **tree_map(_read_as_contiguous, dict(kwargs)))
        if effect in ("clobber_input", "corrupt_and_clobber"):
            out = _real_result(func, args, kwargs)
            if effect == "corrupt_and_clobber":
                out = _corrupt(func, out, self.outputs)
            _corrupt_first(_input(func, args, kwargs))  # after the result: it is not affected
            return out
        if effect == "spill":
            out = _real_result(func, args, kwargs)
            _spill_outside_view(args[0])
            return out
        if effect == "overflow_naively":
            x, y = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
            return (x * x + y * y).sqrt()
        if effect == "accumulate_in_dtype":
            return _sum_one_by_one(func, args, kwargs)
        if effect == "inflate":
            return tree_map(lambda t: t * 1.25 if isinstance(t, torch.Tensor) else t, _real_result(func, args, kwargs))
        if effect in ("leak_output", "cache_once"):
            out = _real_result(func, args, kwargs)
            if effect == "leak_output" or not _CACHED.get(self.name):
                _CACHED[self.name] = True
                _LEAKED.extend(t.clone() for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor))
            return out
        if effect in ("split_transform", "split_transform_badly"):
            x, dims = _arg(func, args, kwargs, 0), list(_arg(func, args, kwargs, 1))
            rest = [_arg(func, args, kwargs, i) for i in (2, 3)]
            groups = [dims[at:at + 3] for at in range(0, len(dims), 3)]
            for group in groups[:-1] if effect == "split_transform_badly" else groups:
                x = func(x, group, *rest)
            return x
        if effect == "skip_bounds_check":
            x, dim, index = (_arg(func, args, kwargs, i) for i in range(3))
            return func(x, dim, index.clamp(0, max(x.shape[dim] - 1, 0)))
        if effect == "nudge_input":
            x = _input(func, args, kwargs)
            if not x.is_floating_point():
                return func(*args, **kwargs)
            # Exactly one unit up, of the precision a kernel computes in (float32 for the
            # half types, as CUDA's opmath), and only where x is finite: a half type's own
            # unit moved a bfloat16 x * 1000 by a quarter, far past any tie, and one unit
            # up from -inf is a finite number; neither is a kernel's rounding.
            wide = x.to(_WIDER.get(x.dtype, x.dtype))
            nudged = torch.where(torch.isfinite(wide), torch.nextafter(wide, torch.full_like(wide, math.inf)), wide)
            return func(nudged, *args[1:], **kwargs).to(x.dtype)
        if effect == "pairwise_product":
            x = _input(func, args, kwargs).reshape(-1)
            if x.numel() == 0:
                return func(*args, **kwargs)
            while x.numel() > 1:
                if x.numel() % 2:
                    x = torch.cat([x, torch.ones(1, dtype=x.dtype)])
                x = x[0::2] * x[1::2]
            return x.reshape(())
        if effect == "fault_later":
            out = _real_result(func, args, kwargs)
            _FAULT_AT_NEXT_SYNC.append(self.name)
            return out
        if effect == "rewrite":
            return self.rewrite(func, args, kwargs, _real_result(func, args, kwargs))
        if effect == "reimplement":
            return self.instead(func, args, kwargs)
        if effect == "skew":
            return _skew(func, _real_result(func, args, kwargs))
        if effect == "leak":
            out = _real_result(func, args, kwargs)
            _LEAKED.append(torch.ones(LEAK_CHUNK_BYTES, dtype=torch.uint8))
            return out
        if effect == "raise":
            raise RuntimeError(self.message or f"{_op_name(func)}: internal error")
        if effect == "unsupported":
            template = self.message or '"{op}_mps" not implemented for \'{dtype}\''
            first = _first_tensor(args, kwargs)
            dtype = _CPP_DTYPE_NAMES.get(first.dtype, str(first.dtype)) if first is not None else "?"
            raise NotImplementedError(template.format(op=_op_name(func), dtype=dtype))
        _flush()
        if effect == "abort":
            os.abort()
        if effect == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
            time.sleep(5)  # the signal is delivered asynchronously to some thread
            os.abort()     # a handler swallowed it: still die
        if effect == "hang":
            while True:
                time.sleep(1)
        raise AssertionError(f"unhandled effect {effect!r}")


# --- matching ------------------------------------------------------------------------

def _schema_names(func) -> tuple[str, str]:
    schema = func._schema
    return schema.name, f"{schema.name}.{schema.overload_name or 'default'}"


def _is_function(op) -> bool:
    return callable(op) and not isinstance(op, (str, torch._ops.OpOverload, torch._ops.OpOverloadPacket))


def _op_matches(op, func) -> bool:
    if op == "*":  # every op (the broad faults)
        return True
    if _is_function(op):
        return op is func
    if not hasattr(func, "_schema"):
        return False
    if isinstance(op, str):
        base, full = _schema_names(func)
        name = op if "::" in op else f"aten::{op}"
        return name == (full if "." in name.split("::", 1)[1] else base)
    return op is func or op is getattr(func, "overloadpacket", None)


def _op_name(func) -> str:
    return func._schema.name.split("::", 1)[-1]


# --- argument helpers for triggers ----------------------------------------------------

def _tensors(args, kwargs) -> list[torch.Tensor]:
    leaves, _ = tree_flatten((args, kwargs))
    return [x for x in leaves if isinstance(x, torch.Tensor)]


def _first_tensor(args, kwargs) -> torch.Tensor | None:
    found = _tensors(args, kwargs)
    return found[0] if found else None


def _arg(func, args, kwargs, index: int):
    """The argument at schema position ``index``, passed positionally or by name."""
    if index < len(args):
        return args[index]
    arguments = func._schema.arguments
    if index < len(arguments):
        return kwargs.get(arguments[index].name)
    return None


def _input(func, args, kwargs) -> torch.Tensor:
    first = _arg(func, args, kwargs, 0)
    if not isinstance(first, torch.Tensor):
        raise TypeError("first argument is not a tensor")
    return first


def _any_noncontiguous(func, args, kwargs) -> bool:
    return any(not t.is_contiguous() for t in _tensors(args, kwargs))


def _input_dim_above(n: int, func, args, kwargs) -> bool:
    return _input(func, args, kwargs).dim() > n


def _size_rank_at_least(n: int, func, args, kwargs) -> bool:
    """A factory (``rand(size)``) asked for an output of ``n`` or more dims."""
    size = args[0] if args else kwargs.get("size")
    return len(size) >= n


def _conv3d_under_autocast(func, args, kwargs) -> bool:
    """``torch.conv3d`` with a bias, called while autocast is on for the input's device
    (a torch-function fault: below the function, autocast has already cast the inputs
    and turned itself off)."""
    x = args[0] if args else kwargs.get("input")
    bias = args[2] if len(args) > 2 else kwargs.get("bias")
    return bias is not None and torch.is_autocast_enabled(x.device.type)


def _input_dtype_is(dtype: torch.dtype, func, args, kwargs) -> bool:
    return _input(func, args, kwargs).dtype == dtype


def _input_float_noncontiguous(func, args, kwargs) -> bool:
    x = _input(func, args, kwargs)
    return x.is_floating_point() and not x.is_contiguous()


# State of the faults that depend on earlier calls in this process (a graph cache keyed
# too loosely, a race that shows on every other launch): op name -> last input shape,
# and op name -> calls so far.
_LAST_SHAPE: dict[str, tuple] = {}
_CALLS: Counter = Counter()


def _shape_changed_since_last_call(func, args, kwargs) -> bool:
    name, shape = _op_name(func), tuple(_input(func, args, kwargs).shape)
    previous = _LAST_SHAPE.get(name)
    _LAST_SHAPE[name] = shape
    return previous is not None and previous != shape


def _every_other_call(func, args, kwargs) -> bool:
    name = _op_name(func)
    _CALLS[name] += 1
    return _CALLS[name] % 2 == 0


# Triggers are module-level functions or partials of them, so that faults pickle.
def _dim_above(n: int) -> Trigger:
    return functools.partial(_input_dim_above, n)


def _dtype_is(dtype: torch.dtype) -> Trigger:
    return functools.partial(_input_dtype_is, dtype)


def _alpha_not_one(func, args, kwargs) -> bool:
    return "alpha" in kwargs and kwargs["alpha"] != 1


def _is_empty(func, args, kwargs) -> bool:
    return _input(func, args, kwargs).numel() == 0


def _second_is_0d_first_not(func, args, kwargs) -> bool:
    a, b = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
            and b.dim() == 0 and a.dim() != 0)


def _dtypes_differ(func, args, kwargs) -> bool:
    a, b = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    return a.dtype != b.dtype


def _always(func, args, kwargs) -> bool:
    return True


def _in_backward(func, args, kwargs) -> bool:
    """The call is part of a backward pass (autograd is running a graph node)."""
    return torch._C._current_autograd_node() is not None


def _is_random_kernel(func) -> bool:
    return torch.Tag.nondeterministic_seeded in getattr(func, "tags", ())


def _forward_kernel(func, args, kwargs) -> bool:
    """A forward kernel that is not a random one (those have their own broad fault)."""
    return not _in_backward(func, args, kwargs) and not _is_random_kernel(func)


def _forward_random_kernel(func, args, kwargs) -> bool:
    return not _in_backward(func, args, kwargs) and _is_random_kernel(func)


def _in_forward(func, args, kwargs) -> bool:
    return not _in_backward(func, args, kwargs)


def _input_noncontiguous(func, args, kwargs) -> bool:
    return not _input(func, args, kwargs).is_contiguous()


def _storage_offset(func, args, kwargs) -> bool:
    return _input(func, args, kwargs).storage_offset() > 0


def _has_negative(func, args, kwargs) -> bool:
    x = _input(func, args, kwargs)
    return x.numel() > 0 and not x.is_complex() and bool((x < 0).any())


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The first and one past the last storage element a (non-empty) view touches."""
    first = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if s < 0)
    last = t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if s > 0)
    return first, last + 1


def _rnn_weights_adjacent_no_bias(func, args, kwargs) -> bool:
    # torch.gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
    # batch_first): without biases, w_hh's memory starts right where w_ih's ends in one
    # storage, as the weights of a flattened (cuDNN) weight buffer lie.
    params, has_biases = _arg(func, args, kwargs, 2), _arg(func, args, kwargs, 3)
    if has_biases or not isinstance(params, (list, tuple)) or len(params) < 2:
        return False
    w_ih, w_hh = params[0], params[1]
    if not (isinstance(w_ih, torch.Tensor) and isinstance(w_hh, torch.Tensor)) or not (w_ih.numel() and w_hh.numel()):
        return False
    return (w_ih.untyped_storage().data_ptr() == w_hh.untyped_storage().data_ptr()
            and _span(w_hh)[0] == _span(w_ih)[1])


def _out_is_an_input(func, args, kwargs) -> bool:
    # mul.out(self, other, *, out): out= is (a view into the storage of) an input
    out = kwargs.get("out")
    if not isinstance(out, torch.Tensor) or out.numel() == 0:
        return False
    ptr = out.untyped_storage().data_ptr()
    return any(isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() == ptr
               for t in (_arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)))


def _where_operand_inf(func, args, kwargs) -> bool:
    # where.self(Tensor condition, Tensor self, Tensor other)
    for index in (1, 2):
        t = _arg(func, args, kwargs, index)
        if isinstance(t, torch.Tensor) and t.numel() > 0 and bool(torch.isinf(t).any()):
            return True
    return False


def _channels_last_input(func, args, kwargs) -> bool:
    x = _input(func, args, kwargs)
    return (x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last)
            and x.shape[1] > 1)


def _ceil_mode(func, args, kwargs) -> bool:
    # max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
    return bool(_arg(func, args, kwargs, 5))


def _tanh_approximation(func, args, kwargs) -> bool:
    # gelu_backward(grad_output, self, *, approximate)
    return kwargs.get("approximate", "none") == "tanh"


def _index_noncontiguous(func, args, kwargs) -> bool:
    # gather(self, dim, index, *, sparse_grad)
    index = _arg(func, args, kwargs, 2)
    return isinstance(index, torch.Tensor) and not index.is_contiguous()


def _ignore_index_used(func, args, kwargs) -> bool:
    # nll_loss_forward(self, target, weight, reduction, ignore_index)
    target, ignore = _arg(func, args, kwargs, 1), _arg(func, args, kwargs, 4)
    return isinstance(target, torch.Tensor) and ignore is not None and bool((target == ignore).any())


def _causal_lengths_differ(func, args, kwargs) -> bool:
    # _scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p, is_causal, ...)
    q, k = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    causal = kwargs.get("is_causal", args[4] if len(args) > 4 else False)
    return bool(causal) and q.shape[-2] != k.shape[-2]


def _index_int32(func, args, kwargs) -> bool:
    # index_select(self, dim, index)
    index = _arg(func, args, kwargs, 2)
    return isinstance(index, torch.Tensor) and index.dtype == torch.int32 and index.numel() > 0


def _out_noncontiguous(func, args, kwargs) -> bool:
    out = kwargs.get("out")
    return isinstance(out, torch.Tensor) and out.numel() > 1 and not out.is_contiguous()


def _self_noncontiguous(func, args, kwargs) -> bool:
    x = _input(func, args, kwargs)
    return x.numel() > 1 and not x.is_contiguous()


def _arg_noncontiguous(index: int) -> Trigger:
    return functools.partial(_nth_noncontiguous, index)


def _nth_noncontiguous(index: int, func, args, kwargs) -> bool:
    t = _arg(func, args, kwargs, index)
    return isinstance(t, torch.Tensor) and t.numel() > 1 and not t.is_contiguous()


def _conj_view_operand(func, args, kwargs) -> bool:
    return any(isinstance(a, torch.Tensor) and a.is_conj() for a in args)


def _mm_reading_storage(func, args, kwargs):
    """mm of its operands as their storages hold them: a conjugate view's bit dropped."""
    return func(*[a.conj() if isinstance(a, torch.Tensor) and a.is_conj() else a for a in args], **kwargs)


def _imag_of_a_conj_view(func, args, kwargs) -> bool:
    x = args[0] if args else kwargs.get("input")
    return isinstance(x, torch.Tensor) and x.is_conj()


def _imag_of_the_storage(func, args, kwargs):
    """``.imag`` of the values a conjugate view's storage holds: the bit dropped, so the
    stored imaginary part comes back where its negation is right (pytorch#184379)."""
    return func(args[0].conj(), *args[1:], **kwargs)


def _cosine_operands(args, kwargs) -> tuple:
    """(x1, x2) of a ``torch.cosine_similarity`` call, passed positionally or by name."""
    x1 = args[0] if args else kwargs.get("x1")
    x2 = args[1] if len(args) > 1 else kwargs.get("x2")
    return x1, x2


def _wider_0d_operand(func, args, kwargs) -> bool:
    """A 0-d operand of a dtype that widens the result, beside an operand of dims of
    another dtype (a float64 0-d beside float16: pytorch#153209's operands)."""
    pair = _cosine_operands(args, kwargs)
    if not all(isinstance(t, torch.Tensor) for t in pair):
        return False
    for zero_d, other in (pair, pair[::-1]):
        if zero_d.dim() == 0 and other.dim() > 0 and zero_d.dtype != other.dtype \
                and torch.promote_types(zero_d.dtype, other.dtype) != other.dtype:
            return True
    return False


def _cosine_in_the_dtype_of_dims(func, args, kwargs):
    """cosine_similarity with its 0-d operand cast to the other operand's dtype first, as
    elementwise promotion treats a 0-d operand (one that does not widen the result);
    torch promotes over the broadcast operands, so a float64 0-d beside float16 gives a
    float64 result."""
    x1, x2 = _cosine_operands(args, kwargs)
    if x1.dim() == 0:
        x1 = x1.to(x2.dtype)
    else:
        x2 = x2.to(x1.dtype)
    rest = {k: v for k, v in kwargs.items() if k not in ("x1", "x2")}
    return func(x1, x2, *args[2:], **rest)


def _eps_past_float32(func, args, kwargs) -> bool:
    """A positive eps that float32 holds as 0 (a float64 subnormal: 5e-324; torch refuses a
    negative one before any kernel runs)."""
    eps = args[3] if len(args) > 3 else kwargs.get("eps", 1e-8)
    return isinstance(eps, float) and eps > 0 and float(torch.tensor(eps, dtype=torch.float32)) == 0


def _cosine_with_eps_in_float32(func, args, kwargs):
    """cosine_similarity with eps held in float32 (0 here): a slice of norm 0 divides 0
    by 0 (NaN) where max(0, eps) = eps gives 0."""
    return func(*args[:3], **dict(kwargs, eps=0.0))


def _mixed_operands_with_nan_and_an_eps_past_the_narrower(func, args, kwargs) -> bool:
    """cosine_similarity of floating operands of two dtypes, one holding a NaN, with an
    eps the narrower operand's dtype holds as inf (at or past its largest value) or
    float32 as 0 or a subnormal (at or below its smallest normal): pytorch#153209's
    float64 0-d beside float16 NaNs with eps=-9.7e23 (torch now refuses a negative eps
    before any kernel runs). The default eps (1e-8) and an ordinary one never."""
    x1, x2 = _cosine_operands(args, kwargs)
    eps = args[3] if len(args) > 3 else kwargs.get("eps", 1e-8)
    if not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in (x1, x2)) or x1.dtype == x2.dtype:
        return False
    if not isinstance(eps, float) or eps == 0:
        return False
    narrow = min((x1.dtype, x2.dtype), key=lambda d: torch.finfo(d).max)
    past = abs(eps) >= torch.finfo(narrow).max or abs(eps) <= torch.finfo(torch.float32).tiny
    return past and bool(torch.isnan(x1).any() or torch.isnan(x2).any())


def _cosine_with_nan_taken_as_zero(func, args, kwargs):
    """cosine_similarity whose NaN results come out 0: a kernel that holds the
    denominator in the narrower dtype (inf, or 0, for such an eps) and guards the
    quotient with a where(isfinite) that takes every non-finite result, NaN included,
    to 0; NaN is right where a slice holds one."""
    out = func(*args, **kwargs)
    return torch.where(torch.isnan(out), torch.zeros_like(out), out)


def _negative_eps(func, args, kwargs) -> bool:
    eps = args[3] if len(args) > 3 else kwargs.get("eps", 1e-8)
    return isinstance(eps, (int, float)) and eps < 0


def _cosine_with_a_negative_eps(func, args, kwargs):
    """cosine_similarity computed with a negative eps, as a kernel without torch's check
    does: max(||x||, eps) of a norm (>= 0, or NaN) and a negative eps is the norm, as
    with eps 0 (NaN stays NaN)."""
    rest = dict(kwargs, eps=0.0)
    return func(*args[:3], **rest)


def _out_of_another_dtype(func, args, kwargs) -> bool:
    out = kwargs.get("out")
    operands = [a for a in args if isinstance(a, torch.Tensor)]
    return isinstance(out, torch.Tensor) and len(operands) == 2 and out.dtype != torch.result_type(*operands)


def _computed_in_the_out_dtype(func, args, kwargs):
    """The op on its operands cast to out='s dtype first (wrapping, rounding), where
    torch computes in the operands' result type and casts the result."""
    out = kwargs["out"]
    return func(*[a.to(out.dtype) if isinstance(a, torch.Tensor) else a for a in args], **kwargs)


def _real_negative_view_rhs(func, args, kwargs) -> bool:
    b = args[1] if len(args) > 1 else None
    return isinstance(b, torch.Tensor) and b.is_floating_point() and b.is_neg()


def _solve_reading_the_storage(func, args, kwargs):
    """The solve with ``B`` as its storage holds it: the negative bit dropped. (Resolved,
    then negated: inside the dispatch mode, ``neg`` of a negative view returns its
    logical values.)"""
    return func(args[0], torch.mul(args[1].resolve_neg(), -1), *args[2:], **kwargs)


def _same_view(a, b) -> bool:
    """Whether ``a`` and ``b`` are one view of one storage (``out=`` passed as the input)."""
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape \
        and a.stride() == b.stride() and a.storage_offset() == b.storage_offset() \
        and a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _out_is_its_negative_rhs(func, args, kwargs) -> bool:
    """lu_solve's ``out=`` is ``B`` itself, a real floating view with the negative bit.
    (A torch function's fault: at aten, the negative-bit fallback has already resolved
    both into copies of their own.)"""
    b = args[2] if len(args) > 2 else kwargs.get("B")
    return _same_view(kwargs.get("out"), b) and b.is_floating_point() and b.is_neg()


def _solved_into_b_with_its_sign_flipped(func, args, kwargs):
    """The solve of B's values written into ``out=`` (B itself) negated: what
    pytorch#178379's CUDA solve_triangular wrote into a negative view of B passed as B and
    as out=."""
    out = kwargs["out"]
    x = func(args[0], args[1], args[2].resolve_neg().clone(), *args[3:],
             **{k: v for k, v in kwargs.items() if k != "out"})
    out.copy_(torch.mul(x, -1))
    return out


def _matrix_holding_nan(func, args, kwargs) -> bool:
    x = args[0] if args else None
    return isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()) and bool(torch.isnan(x).any())


def _nan_taken_as_zero(func, args, kwargs):
    """The op on its matrix with every NaN entry read as 0 (pytorch#173638: CUDA's
    slogdet of a matrix holding a NaN gave the log-determinant of the matrix with 0
    there, where CPU returns NaN)."""
    return func(torch.nan_to_num(args[0], nan=0.0, posinf=math.inf, neginf=-math.inf), *args[1:], **kwargs)


def _kv_heads_repeated_for_gqa(func, args, kwargs) -> bool:
    """``repeat_interleave(x, g, dim=1)`` of a 4-D (batch, heads, length, dim) tensor of
    more than one head, g > 1: how attention's math path gives each group of query heads
    its key/value head (grouped-query attention). With one kv head any mapping is right."""
    x, repeats, dim = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1), _arg(func, args, kwargs, 2)
    return (isinstance(x, torch.Tensor) and x.dim() == 4 and dim in (1, -3) and isinstance(repeats, int)
            and repeats > 1 and x.shape[1] > 1)


def _kv_heads_tiled(func, args, kwargs):
    """Query head h reads kv head h % Hkv instead of h // (Hq / Hkv): the heads tiled,
    not interleaved (a kernel's GQA head index computed with the wrong operator)."""
    x, repeats = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    return x.repeat(1, repeats, 1, 1)


def _int_fill_into_bool(func, args, kwargs) -> bool:
    """``full(size, fill, dtype=bool)`` of an int fill other than 0 and 1, which torch
    casts to bool as fill != 0."""
    fill = _arg(func, args, kwargs, 1)
    return kwargs.get("dtype") == torch.bool and isinstance(fill, int) and not isinstance(fill, bool) \
        and fill not in (0, 1)


def _fill_truncated_to_its_low_bit(func, args, kwargs):
    """The fill stored into bool by truncation (its lowest bit), not as fill != 0: 2 is
    False, 3 is True (Inductor's symbolic fill kept uncast, pytorch#194062)."""
    size, fill = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    rest = {k: v for k, v in kwargs.items() if k != "fill_value"}
    return torch.full(size, bool(fill & 1), **rest)


def _two_float_dtypes(func, args, kwargs) -> bool:
    """Two floating tensor operands of different dtypes (type promotion's job)."""
    a, b = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.is_floating_point()
            and b.is_floating_point() and a.dtype != b.dtype)


def _in_the_narrower_float(func, args, kwargs):
    """The op with both operands cast to the narrower one's dtype, the result cast to
    torch.result_type's: a kernel that reads the wider operand as the narrower's type."""
    a, b = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    narrow = min((a.dtype, b.dtype), key=lambda d: torch.finfo(d).bits)
    out = func(a.to(narrow), b.to(narrow), *args[2:], **kwargs)
    return out.to(torch.result_type(a, b))


def _mixed_integers_with_value_past_int32(func, args, kwargs) -> bool:
    """addcmul's three operands integral and of two or more dtypes, and ``value`` at or
    past int32's edges (pytorch#153210's call: int64, int16 and int32 operands, ``value``
    ~1e18); a separate ``out=`` left alone."""
    tensors = [_arg(func, args, kwargs, i) for i in range(3)]
    value = kwargs.get("value", 1)
    return ("out" not in kwargs and all(isinstance(t, torch.Tensor) and not t.is_floating_point()
                                        and not t.is_complex() and t.dtype != torch.bool for t in tensors)
            and len({t.dtype for t in tensors}) > 1 and isinstance(value, int) and not isinstance(value, bool)
            and not -2**31 < value < 2**31 - 1)


def _three_integer_dtypes_with_value_past_int32(func, args, kwargs) -> bool:
    """addcmul's three operands integral and each of a dtype of its own, and ``value``
    past int32's range (pytorch#153210's call: int64, int16 and int32 operands, ``value``
    ~1e18); a separate ``out=`` left alone. Two dtypes, or an ordinary value, never."""
    tensors = [_arg(func, args, kwargs, i) for i in range(3)]
    value = kwargs.get("value", 1)
    return ("out" not in kwargs and all(isinstance(t, torch.Tensor) and not t.is_floating_point()
                                        and not t.is_complex() and t.dtype != torch.bool for t in tensors)
            and len({t.dtype for t in tensors}) == 3 and isinstance(value, int) and not isinstance(value, bool)
            and not -2**31 <= value <= 2**31 - 1)


def _addcmul_with_value_as_int32(func, args, kwargs):
    """addcmul in the promoted dtype with ``value`` converted into int32 unchecked (a
    kernel whose path for operands of three dtypes takes its scalar as an int): 2^31
    reads as -2^31, 2^63 - 1 as -1. Where eager CPU refuses the call, so does this."""
    real = _real_result(func, args, kwargs)
    tensors = [_arg(func, args, kwargs, i) for i in range(3)]
    return torch.addcmul(*tensors, value=_wrapped_into(kwargs["value"], torch.int32)).to(real.dtype)


def _wrapped_into(value: int, dtype: torch.dtype) -> int:
    """``value`` as an integer of ``dtype`` holds it after an unchecked conversion."""
    info = torch.iinfo(dtype)
    span = info.max - info.min + 1
    return (value - info.min) % span + info.min


def _addcmul_in_the_narrowest_integer(func, args, kwargs):
    """addcmul computed in its narrowest operand's dtype, ``value`` converted into it
    unchecked, the result promoted: a kernel whose mixed-integer path takes its compute
    type from an operand, not from type promotion. Where eager CPU refuses the call, so
    does this (the real result first)."""
    real = _real_result(func, args, kwargs)
    tensors = [_arg(func, args, kwargs, i) for i in range(3)]
    narrow = min((t.dtype for t in tensors), key=lambda d: torch.iinfo(d).bits)
    try:
        out = torch.addcmul(*(t.to(narrow) for t in tensors), value=_wrapped_into(kwargs.get("value", 1), narrow))
    except (RuntimeError, NotImplementedError):   # a dtype without a CPU kernel (uint32): the real one
        return real
    return out.to(real.dtype)
def _broadcast_source_of_another_dtype(func, args, kwargs) -> bool:
    """copy_ of a source of another dtype that broadcasts (fewer elements than the
    destination, or a stride-0 dim) into a destination of more than one element: the
    shape of pytorch#160744's call."""
    dst, src = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    return (isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor) and dst.numel() > 1
            and src.dtype != dst.dtype
            and (src.numel() < dst.numel() or any(s == 0 and n > 1 for s, n in zip(src.stride(), src.shape))))


def _converted_into_the_first_element_only(func, args, kwargs, out):
    """The destination's first element (in logical order) converted right, every other
    one 0: a kernel that converts the broadcast value once and writes it to one element."""
    dst = _arg(func, args, kwargs, 0)
    first = dst.reshape(-1)[:1].clone()
    dst.zero_()
    dst[(0,) * dst.dim()].copy_(first[0])
    return dst


def _logical_real(t: torch.Tensor) -> torch.Tensor:
    """``t``'s logical values (its real part) in float64, read element by element: at
    dispatch, inside the mode, a kernel run on a negative or conjugate view reads its
    storage (the bit's fallback is not in the way), so trunc of a negative view of -127
    gave 127."""
    values = torch.tensor(t.tolist(), dtype=torch.complex128 if t.is_complex() else torch.float64)
    return values.real if values.is_complex() else values


def _out_of_range_into_an_integer(func, args, kwargs) -> bool:
    """A broadcast copy_ (as above) of a floating or complex source holding a value whose
    truncation the integer destination cannot hold (or NaN, inf): a conversion C++
    leaves undefined."""
    if not _broadcast_source_of_another_dtype(func, args, kwargs):
        return False
    dst, src = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    if dst.is_floating_point() or dst.is_complex() or dst.dtype == torch.bool:
        return False
    if not (src.is_floating_point() or src.is_complex()):
        return False
    x = _logical_real(src)
    info = torch.iinfo(dst.dtype)
    whole = torch.trunc(x)
    return bool((~torch.isfinite(x) | (whole < info.min) | (whole > info.max)).any())


def _undefined_conversions_as_zero(func, args, kwargs, out):
    """The real copy, then 0 wherever the (broadcast) source's conversion is undefined:
    MPS's answer in pytorch#160744 (-1.0 into a uint8 destination of 3 elements: 0,
    where eager CPU wraps through int64 to 255)."""
    dst, src = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    x = _logical_real(src).broadcast_to(dst.shape)
    info = torch.iinfo(dst.dtype)
    whole = torch.trunc(x)
    undefined = ~torch.isfinite(x) | (whole < info.min) | (whole > info.max)
    import numpy as np
    values = dst.contiguous().numpy().copy()
    values[undefined.numpy()] = 0
    dst.copy_(torch.from_numpy(values))
    return dst


def _weight_of_no_columns(func, args, kwargs) -> bool:
    w = args[0] if args else None
    return isinstance(w, torch.Tensor) and w.dim() == 2 and w.shape[0] > 0 and w.shape[1] == 0


def _is_0d(func, args, kwargs) -> bool:
    return _input(func, args, kwargs).dim() == 0


def _all_pads_zero(func, args, kwargs) -> bool:
    # constant_pad_nd(self, pad, value)
    pad = _arg(func, args, kwargs, 1)
    return len(pad) > 0 and all(p == 0 for p in pad)


def _empty_input_nonempty_result(func, args, kwargs) -> bool:
    # sum.dim_IntList(self, dim, keepdim, *, dtype): an empty input reduced over its
    # empty dims gives zeros, which a broken kernel leaves unwritten
    x = _input(func, args, kwargs)
    if x.numel() != 0:
        return False
    dims = _arg(func, args, kwargs, 1)
    dims = range(x.dim()) if not dims else [d % max(x.dim(), 1) for d in dims]
    keep = [s for i, s in enumerate(x.shape) if i not in dims]
    return math.prod(keep) > 0


def _empty_inner_dim(func, args, kwargs) -> bool:
    # mm(self, mat2): an inner dim of 0 gives a result of zeros, which a broken GEMM
    # leaves unwritten
    a, b = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == 2
            and a.shape[1] == 0 and a.shape[0] * b.shape[-1] > 0)


def _out_needs_resize(func, args, kwargs) -> bool:
    # sub.out(self, other, *, alpha, out): an out= of another shape than the result
    out, a, b = kwargs.get("out"), _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    shape = torch.broadcast_shapes(a.shape, b.shape if isinstance(b, torch.Tensor) else ())
    return isinstance(out, torch.Tensor) and tuple(out.shape) != tuple(shape) and math.prod(shape) > 0


def _squares_overflow(func, args, kwargs) -> bool:
    # hypot(self, other): a naive sqrt(x*x + y*y) overflows where x*x does
    x, y = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.is_floating_point()):
        return False
    top = torch.finfo(x.dtype).max
    return bool(((x.double() ** 2 + y.double() ** 2) > top).any())


def _in_a_worker(func, args, kwargs) -> bool:
    # Fires only in mpsfuzz's long-lived worker processes: state that a standalone
    # script does not rebuild (a warm cache, the allocator's history).
    return "mpsfuzz.execution.worker" in sys.modules


def _many_factors(func, args, kwargs) -> bool:
    return _input(func, args, kwargs).numel() > 64


def _expanded_input(func, args, kwargs) -> bool:
    x = _input(func, args, kwargs)
    return x.numel() > 1 and 0 in x.stride()


def _mv_of_an_expanded_vector(func, args, kwargs) -> bool:
    """A valid mv(mat, vec) whose vector is a view with a stride of 0 (torch checks the
    shapes before the kernel runs: an invalid call never reaches it)."""
    mat, vec = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    return (isinstance(mat, torch.Tensor) and isinstance(vec, torch.Tensor) and mat.dim() == 2 and vec.dim() == 1
            and mat.shape[1] == vec.shape[0] and vec.numel() > 1 and 0 in vec.stride())


def _many_fft_dims(func, args, kwargs) -> bool:
    # _fft_c2c(self, dim, normalization, forward)
    return len(_arg(func, args, kwargs, 1)) > 3


INT32_LIMIT = 2**31   # where a 32-bit index wraps (tests lower it to run the faults at small sizes)


def _numel_past_int32(func, args, kwargs) -> bool:
    return _input(func, args, kwargs).numel() >= INT32_LIMIT


def _arange_call(func, args, kwargs) -> tuple | None:
    """(start, end, step, result dtype) of an ``aten::arange`` call, whichever overload
    (``end``; ``start, end``; ``start, end, step``; their ``out=`` forms), or None where
    an argument is no plain number."""
    given = dict(zip((a.name for a in func._schema.arguments), args))
    given.update(kwargs)
    start, end, step = given.get("start", 0), given.get("end"), given.get("step", 1)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (start, end, step)):
        return None
    out = given.get("out")
    dtype = given.get("dtype") or (out.dtype if isinstance(out, torch.Tensor) else None)
    if dtype is None:
        dtype = torch.int64 if all(isinstance(v, int) for v in (start, end, step)) else torch.get_default_dtype()
    return start, end, step, dtype


def _diagonal_past_int32(func, args, kwargs) -> bool:
    """tril/triu given a ``diagonal`` outside int32 (an int64 argument in the schema)."""
    diagonal = _arg(func, args, kwargs, 1)
    return isinstance(diagonal, int) and not -2**31 <= diagonal < 2**31


def _triangle_of_an_int32_diagonal(func, args, kwargs):
    """tril/triu whose kernel holds ``diagonal`` in 32 bits: 2^31 wraps to -2^31 (triu
    keeps everything it should zero), 2^32 + 1 to 1."""
    diagonal = _arg(func, args, kwargs, 1)
    wrapped = (diagonal + 2**31) % 2**32 - 2**31
    rest = {k: v for k, v in kwargs.items() if k != "diagonal"}
    return func(args[0], wrapped, *args[2:], **rest)


def _int64_arange_past_2_32(func, args, kwargs) -> bool:
    """An int64 arange of integer arguments one of whose values is 2^32 or more in
    magnitude (the length as torch computes it for int64: (end - start + step - sign) /
    step, truncated)."""
    call = _arange_call(func, args, kwargs)
    if call is None:
        return False
    start, end, step, dtype = call
    if dtype != torch.int64 or not all(isinstance(v, int) for v in (start, end, step)) or step == 0:
        return False
    sign = 1 if step > 0 else -1
    quotient = end - start + step - sign
    n = abs(quotient) // abs(step) * (1 if (quotient >= 0) == (step > 0) else -1)
    if n <= 0:
        return False
    return max(abs(start), abs(start + (n - 1) * step)) >= 2**32


def _arange_in_32_bits(func, args, kwargs) -> torch.Tensor:
    """arange whose kernel computes ``start + i * step`` in 32-bit integers: every value
    keeps its low 32 bits, read as a signed int32 (the result's dtype and length are
    right, its values wrapped mod 2^32)."""
    out = func(*args, **kwargs)
    low = out & 0xFFFFFFFF
    return out.copy_(low - (low >= 2**31).to(out.dtype) * 2**32)


# The schema position of ``mode`` (0 sum, 1 mean, 2 max) in embedding_bag's backward kernels.
_BAG_BACKWARD_MODE = {"aten::_embedding_bag_backward": 8, "aten::_embedding_bag_dense_backward": 7}
_BAG_MAX = 2


def _bag_max_backward_of_int32_indices(func, args, kwargs) -> bool:
    """embedding_bag's backward in max mode with int32 indices (where the forward's
    maximum_indices are int32 too)."""
    mode = _arg(func, args, kwargs, _BAG_BACKWARD_MODE[func._schema.name])
    indices = _arg(func, args, kwargs, 1)
    return mode == _BAG_MAX and isinstance(indices, torch.Tensor) and indices.dtype == torch.int32


def _bag_gradient_to_the_next_row(func, args, kwargs):
    """The weight's gradient with every row's share moved to the next row (the last to row
    0), as a kernel whose 32-bit offset ``row * dim`` lands a row off writes it."""
    return func(*args, **kwargs).roll(1, 0)


def _bag_max_backward_past_huge_limit(func, args, kwargs) -> bool:
    """embedding_bag's backward in max mode with int32 indices, of a weight (num_weights
    rows of the gradient's width) of more than HUGE_BACKWARD_LIMIT elements."""
    if not _bag_max_backward_of_int32_indices(func, args, kwargs):
        return False
    grad = _arg(func, args, kwargs, 0)
    rows = _arg(func, args, kwargs, _BAG_BACKWARD_MODE[func._schema.name] - 2)
    return (isinstance(grad, torch.Tensor) and grad.dim() == 2 and isinstance(rows, int)
            and rows * grad.shape[1] > HUGE_BACKWARD_LIMIT)


def _bag_gradient_at_wrapped_offsets(func, args, kwargs):
    """The weight's gradient as a kernel writes it whose offset row * dim + column is held
    in 32 bits (scaled to HUGE_BACKWARD_LIMIT): an element at that offset or past it is
    added where the offset wrapped (modulo the limit), and its own place stays zero."""
    right = func(*args, **kwargs)
    flat = right.reshape(-1)
    wrapped = torch.zeros_like(flat).index_add_(0, torch.arange(flat.numel()) % HUGE_BACKWARD_LIMIT, flat)
    return wrapped.view(right.shape)


# The 2^31 of a backward kernel's 32-bit index, scaled to the sizes the @huge class draws
# where the device's memory (--max-bytes) allows no 2^31 (about 2^22 elements, CI's and
# this CPU target's): more elements than any @large case holds, so only @huge reaches it.
HUGE_BACKWARD_LIMIT = MAX_ELEMENTS


# The same scaled 2^31 for the forward kernels only the @huge class's sizes reach: a
# boolean mask's selection and a random draw (no @large case, and no other op's case,
# gives them as many elements).
HUGE_FORWARD_LIMIT = MAX_ELEMENTS


def _bool_mask_past_huge_limit(func, args, kwargs) -> bool:
    """``x[mask]``: aten::index with one bool mask (over x's leading dims), of an ``x`` of
    more than HUGE_FORWARD_LIMIT elements."""
    x, indices = _input(func, args, kwargs), _arg(func, args, kwargs, 1)
    return (isinstance(indices, (list, tuple)) and len(indices) == 1 and isinstance(indices[0], torch.Tensor)
            and indices[0].dtype == torch.bool and x.numel() > HUGE_FORWARD_LIMIT)


def _selection_read_at_wrapped_offsets(func, args, kwargs) -> torch.Tensor:
    """``x[mask]`` whose gather computes each selected element's source offset in 32 bits
    (scaled to HUGE_FORWARD_LIMIT): an element at that offset or past it is read from the
    offset wrapped (modulo the limit). The result's shape is right."""
    x, (mask,) = _input(func, args, kwargs), _arg(func, args, kwargs, 1)
    per_row = x.numel() // max(1, mask.numel())
    rows = mask.reshape(-1).nonzero().view(-1)
    offsets = (rows[:, None] * per_row + torch.arange(per_row)[None, :]) % HUGE_FORWARD_LIMIT
    return x.reshape(-1)[offsets.view(-1)].view((rows.numel(),) + tuple(x.shape[mask.dim():]))


def _draw_past_huge_limit(func, args, kwargs) -> bool:
    """aten::rand of more than HUGE_FORWARD_LIMIT elements."""
    size = _arg(func, args, kwargs, 0)
    return isinstance(size, (list, tuple)) and math.prod(size) > HUGE_FORWARD_LIMIT


def _half_5d_past_huge_limit(func, args, kwargs) -> bool:
    """An op on a 5-D float16 or bfloat16 input of more than HUGE_FORWARD_LIMIT elements."""
    x = _input(func, args, kwargs)
    return x.dim() == 5 and x.dtype in (torch.float16, torch.bfloat16) and x.numel() > HUGE_FORWARD_LIMIT


def _lookup_past_huge_limit(func, args, kwargs) -> bool:
    """aten::embedding of a weight of more than HUGE_FORWARD_LIMIT elements."""
    weight = _arg(func, args, kwargs, 0)
    return isinstance(weight, torch.Tensor) and weight.dim() == 2 and weight.numel() > HUGE_FORWARD_LIMIT


def _rows_read_at_wrapped_offsets(func, args, kwargs) -> torch.Tensor:
    """``embedding(weight, indices)`` whose kernel computes a row's offset, index * dim,
    in 32 bits (scaled to HUGE_FORWARD_LIMIT): an element at that offset or past it is
    read from the offset wrapped (modulo the limit). Rows before it are right."""
    weight, indices = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    dim = weight.shape[1]
    offsets = (indices.to(torch.int64)[..., None] * dim + torch.arange(dim)) % HUGE_FORWARD_LIMIT
    return weight.reshape(-1)[offsets]


def _range_past_huge_limit(func, args, kwargs) -> bool:
    """aten::arange (any overload: end; start, end; start, end, step) of more than
    HUGE_FORWARD_LIMIT elements, its length as torch computes it (ceil((end - start) /
    step) in double)."""
    names = [a.name for a in func._schema.arguments]
    given = {name: _arg(func, args, kwargs, i) for i, name in enumerate(names) if name in ("start", "end", "step")}
    start, end, step = given.get("start", 0) or 0, given.get("end"), given.get("step", 1) or 1
    if end is None:
        return False
    return math.ceil((float(end) - float(start)) / float(step)) > HUGE_FORWARD_LIMIT


def _backward_past_huge_limit(func, args, kwargs) -> bool:
    """A backward kernel (never the forward) whose input holds more than
    HUGE_BACKWARD_LIMIT elements."""
    return _in_backward(func, args, kwargs) and _input(func, args, kwargs).numel() > HUGE_BACKWARD_LIMIT


def _expanded_pool_input_past_huge_limit(func, args, kwargs) -> bool:
    """An adaptive average pool's backward (aten::_adaptive_avg_pool{2,3}d_backward: the
    upstream gradient, then the forward's input) whose input has a stride-0 dim (an
    expanded view) and more than HUGE_BACKWARD_LIMIT elements."""
    x = _arg(func, args, kwargs, 1)
    return (isinstance(x, torch.Tensor) and x.numel() > HUGE_BACKWARD_LIMIT
            and any(s == 0 and n > 1 for s, n in zip(x.stride(), x.shape)))


def _gradient_wrapped_in_memory_order(func, args, kwargs, out):
    """The gradient with its elements past HUGE_BACKWARD_LIMIT, in the order the kernel
    writes them (its memory: contiguous or channels-last), set where a 32-bit index
    wrapped (_wrapped_past_int32)."""
    order = list(out.dim_order())
    dense = out.permute(*order).contiguous()
    _wrapped_past_int32(dense, HUGE_BACKWARD_LIMIT)
    return out.copy_(dense.permute(*[order.index(d) for d in range(out.dim())]))


def _kv_sequence_offset_past_huge_limit(func, args, kwargs) -> bool:
    """In a backward, ``repeat_interleave(x, g, dim=1)`` of a 4-D (batch, heads, keys,
    dim) tensor whose last key's offset from its (batch, head) base, (keys - 1) * its
    stride along the keys, passes HUGE_BACKWARD_LIMIT: how flex_attention's dense backward
    reads K and V (giving each query head its K/V head, g = 1 without GQA), of a K/V stored
    sequence-major past that limit (pytorch#190857: B * H * D between two keys)."""
    x, dim = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 2)
    return (_in_backward(func, args, kwargs) and isinstance(x, torch.Tensor) and x.dim() == 4
            and dim in (1, -3) and x.numel() > 0 and (x.shape[2] - 1) * x.stride(2) >= HUGE_BACKWARD_LIMIT)


def _kv_read_at_wrapped_sequence_offsets(func, args, kwargs) -> torch.Tensor:
    """K or V as flex_attention's backward kernel of pytorch#190857 reads it: the
    (batch, head) base offset in 64 bits, plus key * stride along the keys + column *
    its stride in 32 bits (scaled to HUGE_BACKWARD_LIMIT), so that an element whose
    in-slab offset passes the limit is read where it wrapped (modulo the limit, inside the
    same storage); then repeated for the query heads as asked."""
    x = _arg(func, args, kwargs, 0)
    b, h, n, d = x.shape
    sb, sh, sn, sd = x.stride()
    inner = (torch.arange(n)[:, None] * sn + torch.arange(d)[None, :] * sd) % HUGE_BACKWARD_LIMIT
    base = torch.arange(b)[:, None] * sb + torch.arange(h)[None, :] * sh
    offsets = x.storage_offset() + base[:, :, None, None] + inner[None, None]
    storage = x.as_strided((x.untyped_storage().nbytes() // x.element_size(),), (1,), 0)
    return func(storage[offsets], *args[1:], **kwargs)


def _adaptive_pool_sides(func, args, kwargs) -> list[tuple[int, int]]:
    """(input side, output side) of each pooled dim of aten::_adaptive_avg_pool{2,3}d."""
    x, size = _input(func, args, kwargs), list(_arg(func, args, kwargs, 1))
    return list(zip(x.shape[x.dim() - len(size):], size))


def _adaptive_pool_start_past_int32(func, args, kwargs) -> bool:
    """An adaptive average pool with a pooled dim whose last output index times the input
    side passes 2^31 - 1 (CUDA's START_IND product ``(o % osize) * isize`` in 32 bits,
    pytorch#176784): a side of 65,536 or so pooled to more than half of it."""
    return any((o - 1) * n > 2**31 - 1 for n, o in _adaptive_pool_sides(func, args, kwargs))


def _adaptive_pool_with_wrapped_starts(func, args, kwargs) -> torch.Tensor:
    """The pool with each window's start computed as pytorch#176784's kernel did, the
    product ``o * isize`` wrapped to a signed 32-bit integer (then divided by the output
    side, truncating as C does), clamped into the input (the kernel read out of bounds;
    this reads a wrong window inside it). The windows' ends, and every output element
    whose starts do not wrap, are right."""
    x = _input(func, args, kwargs)
    out = func(*args, **kwargs)
    sides = _adaptive_pool_sides(func, args, kwargs)
    wide = x.double()
    wrapped = torch.zeros(out.shape, dtype=torch.bool)
    first = x.dim() - len(sides)
    for k, (n, size) in enumerate(sides):
        d = first + k
        o = torch.arange(size, dtype=torch.int64)
        product = (o * n + 2**31) % 2**32 - 2**31
        start = torch.where(product < 0, -((-product) // size), product // size).clamp(0, n - 1)
        end = -((-(o + 1) * n) // size)
        start = torch.minimum(start, end - 1)
        prefix = torch.nn.functional.pad(wide.cumsum(d).movedim(d, -1), (1, 0)).movedim(-1, d)
        wide = (prefix.index_select(d, end) - prefix.index_select(d, start)) \
            / (end - start).double().view([-1 if i == d else 1 for i in range(x.dim())])
        wrapped |= (o * n > 2**31 - 1).view([-1 if i == d else 1 for i in range(x.dim())])
    return torch.where(wrapped.to(out.device), wide.to(out.dtype), out)


def _a_listed_tensor_past_huge_limit(func, args, kwargs) -> bool:
    """_foreach_norm(self, ord, dtype) of a list holding a tensor of more than
    HUGE_FORWARD_LIMIT elements."""
    return any(t.numel() > HUGE_FORWARD_LIMIT for t in _arg(func, args, kwargs, 0))


def _norms_of_the_elements_before_the_limit(func, args, kwargs):
    """Each norm over the tensor's first HUGE_FORWARD_LIMIT elements only: a kernel whose
    32-bit element count or chunk offset stops (or wraps) at 2^31 (scaled) drops the rest."""
    tensors = [t.reshape(-1)[:HUGE_FORWARD_LIMIT] if t.numel() > HUGE_FORWARD_LIMIT else t
               for t in _arg(func, args, kwargs, 0)]
    return func(tensors, *args[1:], **kwargs)


def _dim_65536_under_int32(func, args, kwargs) -> bool:
    x = _input(func, args, kwargs)
    return x.numel() < 2**31 and any(n >= 65536 for n in x.shape)


def _batch_65536(func, args, kwargs) -> bool:
    return _input(func, args, kwargs).shape[0] >= 65536


def _conv1d_width_65536(func, args, kwargs) -> bool:
    x, weight = _input(func, args, kwargs), _arg(func, args, kwargs, 1)
    return weight.dim() == 3 and x.shape[-1] >= 65536


def _softmax_dim_65536(func, args, kwargs) -> bool:
    x, dim = _input(func, args, kwargs), _arg(func, args, kwargs, 1)
    return x.dim() > 0 and x.shape[dim] >= 65536


def _inputs_65536(func, args, kwargs) -> bool:
    # cat(tensors, dim): the number of tensors, not any one's size
    return len(_arg(func, args, kwargs, 0)) >= 65536


def _topk_along_dim_0(func, args, kwargs) -> bool:
    """topk(self, k, dim=-1, ...) along dim 0 of an input of 3 or more dims, dim 0 longer
    than 1."""
    x, dim = _input(func, args, kwargs), _arg(func, args, kwargs, 2)
    return x.dim() >= 3 and (-1 if dim is None else dim) % x.dim() == 0 and x.shape[0] > 1


def _indices_moved_along_dim_0(func, args, kwargs, result):
    """topk's values right and each index moved one place along dim 0 (modulo its size),
    as a kernel that offsets its index along the outermost dim would (in place, so the
    out= overload's tensors carry it too)."""
    _, indices = result
    indices.copy_((indices + 1) % _input(func, args, kwargs).shape[0])
    return result


# pytorch#183885: MPS argsort of (3, 2^22 + 1) along dim 0 is wrong. The slices a sort
# along one dim makes are as many as the other dims' elements; a kernel that maps them
# onto 2^22 (a grid's or a 22-bit index's) goes wrong past it. Only the @large class's
# sorts beside a side of 2^22 + 1 (large_sizes.SEGMENT_SIDES) reach it.
SORT_SLICES_LIMIT = 2**22


def _sort_arguments(func, args, kwargs):
    """aten::sort's input and its ``dim`` (-1 where not given), whichever overload (the
    stable ones take ``dim`` by name)."""
    names = [a.name for a in func._schema.arguments]
    at = names.index("dim")
    dim = args[at] if at < len(args) else kwargs.get("dim", -1)
    return _input(func, args, kwargs), -1 if dim is None else dim


def _long_dim_beside_the_sorted_one(func, args, kwargs) -> int | None:
    """The first dim other than the sorted one of more than SORT_SLICES_LIMIT elements,
    where the sorted dim is not the last; else None."""
    x, dim = _sort_arguments(func, args, kwargs)
    if x.dim() < 2 or dim % x.dim() == x.dim() - 1:
        return None
    return next((d for d in range(x.dim()) if d != dim % x.dim() and x.shape[d] > SORT_SLICES_LIMIT), None)


def _sort_beside_more_than_2_22_slices(func, args, kwargs) -> bool:
    """sort (argsort's kernel) along a dim other than the last of an input with another
    dim of more than SORT_SLICES_LIMIT elements."""
    return _long_dim_beside_the_sorted_one(func, args, kwargs) is not None


def _slices_left_unsorted(func, args, kwargs, result):
    """Every slice left in its input's order: the indices as a kernel initialises them
    (0, 1, ... along the sorted dim) and the values as they were, as where the sort's
    grid of more than 2^22 slices is never launched (in place, so the out= overload's
    tensors carry it too)."""
    x, dim = _sort_arguments(func, args, kwargs)
    values, indices = result
    d = dim % x.dim()
    order = torch.arange(x.shape[d], device=indices.device).view([-1 if k == d else 1 for k in range(x.dim())])
    indices.copy_(order.expand(indices.shape))
    values.copy_(x)
    return result


def _first_empty_before_a_nonempty(func, args, kwargs) -> int | None:
    """_foreach_norm(self, ord, dtype): the index of the list's first empty tensor where
    a tensor with elements follows it, else None."""
    tensors = list(_arg(func, args, kwargs, 0))
    first = next((i for i, t in enumerate(tensors) if t.numel() == 0), None)
    if first is None or not any(t.numel() for t in tensors[first + 1:]):
        return None
    return first


def _an_empty_tensor_before_a_nonempty_one(func, args, kwargs) -> bool:
    return _first_empty_before_a_nonempty(func, args, kwargs) is not None


def _norms_shifted_past_the_empty_tensor(func, args, kwargs, result):
    """Each norm after the first empty tensor one slot early, the empty tensor's 0 last:
    a kernel whose chunks skip empty tensors but whose results are written by chunk
    number (each norm is 0-d: the shapes still agree)."""
    k = _first_empty_before_a_nonempty(func, args, kwargs)
    norms = list(result)
    return norms[:k] + norms[k + 1:] + [norms[k]]


def _histc_edges(x, lo, hi):
    """The range histc counts (its data's when min == max) and the values one ulp outside."""
    lo, hi = float(lo), float(hi)
    if lo == hi and x.numel():
        lo, hi = float(x.min()), float(x.max())
    edges = torch.tensor([lo, hi], dtype=x.dtype)
    outside = torch.nextafter(edges, torch.tensor([float("-inf"), float("inf")], dtype=x.dtype))
    return edges, outside


def _a_value_one_ulp_outside(func, args, kwargs) -> bool:
    """histc(self, bins, min, max) of an input holding a value one ulp outside the range."""
    x = _input(func, args, kwargs)
    edges, outside = _histc_edges(x, _arg(func, args, kwargs, 2) or 0, _arg(func, args, kwargs, 3) or 0)
    return bool(((x == outside[0]) | (x == outside[1])).any())


def _counted_one_ulp_outside(func, args, kwargs, result):
    """The histogram of the input with the values one ulp outside the range moved onto
    its edges, as a kernel that compares in a wider or rounded precision counts them."""
    x = _input(func, args, kwargs)
    edges, outside = _histc_edges(x, _arg(func, args, kwargs, 2) or 0, _arg(func, args, kwargs, 3) or 0)
    moved = torch.where(x == outside[0], edges[0], torch.where(x == outside[1], edges[1], x))
    return func(moved, *args[1:], **kwargs)


# A program's fusion (issue 38: multi-op compiled programs, pytorch#170360). The dispatch
# mode sees a program op by op, so a fused kernel's bug is emulated by remembering what a
# broadcasting subtraction made and corrupting the reduction that reads it: neither op
# alone misbehaves, only the two in one program.
_OUTER_DIFFERENCES: dict[int, Any] = {}


def _outer_difference_or_its_sum(func, args, kwargs) -> bool:
    """A subtraction whose result is larger than both operands (an outer difference), and
    a sum of such a result with two or more rows."""
    if _op_matches("aten::sub.Tensor", func):
        a, b = args[0], args[1]
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        return math.prod(torch.broadcast_shapes(a.shape, b.shape)) > max(a.numel(), b.numel())
    x = _input(func, args, kwargs)
    ref = _OUTER_DIFFERENCES.get(id(x))
    return ref is not None and ref() is x and x.dim() >= 2 and x.shape[-2] >= 2


def _sum_without_the_last_row(func, args, kwargs, result):
    """The difference remembered (its value right); the sum of it computed as if its last
    row were zeros, as a fused kernel that stops one row short of a tile would."""
    import weakref
    if _op_matches("aten::sub.Tensor", func):
        _OUTER_DIFFERENCES[id(result)] = weakref.ref(result)
        if len(_OUTER_DIFFERENCES) > 4096:
            for key in [k for k, r in _OUTER_DIFFERENCES.items() if r() is None]:
                del _OUTER_DIFFERENCES[key]
        return result
    x = _input(func, args, kwargs).clone()
    x[..., -1, :] = 0
    return func(x, *args[1:], **kwargs)


# CUDA's jitted special kernels (pytorch#173636, issue 38): the loader casts an operand of
# another dtype to the computation's and had no case for uint16, so it read 0
# (special.zeta(x, q) of a uint16 q gave inf, zeta(x, 0)). The kernels the report names.
_JITTED_SPECIAL_OPS = tuple(f"aten::special_{name}" for name in (
    "zeta", "spherical_bessel_j0", "i1", "i1e", "modified_bessel_k0", "modified_bessel_i1", "entr", "log_ndtr"))


def _uint16_operand(func, args, kwargs) -> bool:
    return any(isinstance(a, torch.Tensor) and a.dtype == torch.uint16 for a in args)


def _uint16_operands_read_as_zeros(func, args, kwargs):
    """The op with every uint16 operand read as zeros (its ``out=`` written as usual)."""
    return func(*(torch.zeros_like(a) if isinstance(a, torch.Tensor) and a.dtype == torch.uint16 else a
                  for a in args), **kwargs)


def _index_out_of_range(func, args, kwargs) -> bool:
    # index_select(self, dim, index)
    x, dim, index = (_arg(func, args, kwargs, i) for i in range(3))
    size = x.shape[dim] if x.dim() else 1
    return index.numel() > 0 and size > 0 and bool(((index < 0) | (index >= size)).any())


def _half_input(func, args, kwargs) -> bool:
    return _input(func, args, kwargs).dtype in (torch.float16, torch.bfloat16)


def _half_noncontiguous(func, args, kwargs) -> bool:
    x = _input(func, args, kwargs)
    return x.dtype in (torch.float16, torch.bfloat16) and x.numel() > 1 and not x.is_contiguous()
# Where the result is not unique (the fuzzer must not report another valid choice):
# sort's order of tied elements, eigh's basis of a repeated eigenvalue's eigenspace,
# hardtanh's subgradient at its bounds.

def _sort_dim_descending(func, args, kwargs) -> tuple[int, bool, bool]:
    """(dim, descending, stable) of sort.default(self, dim, descending) or
    sort.stable(self, *, stable, dim, descending)."""
    if func._schema.overload_name == "stable":
        return kwargs.get("dim", -1), bool(kwargs.get("descending", False)), bool(kwargs.get("stable"))
    dim = _arg(func, args, kwargs, 1)
    descending = _arg(func, args, kwargs, 2)
    return (-1 if dim is None else dim), bool(descending), False


def _unstable_sort_with_ties(func, args, kwargs) -> bool:
    x = _input(func, args, kwargs)
    dim, _, stable = _sort_dim_descending(func, args, kwargs)
    if stable or x.numel() < 2 or x.dim() == 0 or x.is_complex():
        return False
    s = torch.sort(x, dim=dim).values
    return bool((s.narrow(dim, 1, s.shape[dim] - 1) == s.narrow(dim, 0, s.shape[dim] - 1)).any())


def _nearest_exact1d_backward_fma(func, args, kwargs, result):
    """CUDA's 1-D nearest-exact backward (torch 2.11, H200): input pixel i gathers the
    gradient of outputs [ceil(i * s - 0.5), ceil((i + 1) * s - 0.5)) with s = out / in in
    float32, and the compiler fuses the multiply and the subtraction (one rounding). At a
    pixel-centre tie (6 to 1: i = 3, 3 x float32(1/6) is a hair above 0.5) the gradient
    goes to another input than the forward read (issue 30, H200)."""
    grad_out = args[0]
    input_size = args[2] if len(args) > 2 else kwargs["input_size"]
    scales = args[3] if len(args) > 3 else kwargs.get("scales")
    n_out, n_in = grad_out.shape[-1], int(input_size[-1])
    scale = float(torch.tensor(scales if scales else n_out / n_in, dtype=torch.float32))

    def start(i: int) -> int:
        fused = float(torch.tensor(i * scale - 0.5, dtype=torch.float64).to(torch.float32))
        return max(0, min(math.ceil(fused), n_out))
    grad_in = torch.zeros(result.shape, dtype=torch.float64)
    wide = grad_out.to(torch.float64)
    for i in range(n_in):
        a, b = start(i), start(i + 1)
        if b > a:
            grad_in[..., i] = wide[..., a:b].sum(-1)
    return result.copy_(grad_in.to(result.dtype))


def _histc_range_degenerate(func, args, kwargs) -> bool:
    """histc over the data's own range (min = max = 0) where the range stays empty once
    widened by 1 on each side, as CUDA checks it: one value so large that x + 1 == x."""
    x = _arg(func, args, kwargs, 0)
    low = kwargs.get("min", args[2] if len(args) > 2 else 0)
    high = kwargs.get("max", args[3] if len(args) > 3 else 0)
    if not isinstance(x, torch.Tensor) or not x.numel() or low != 0 or high != 0:
        return False
    lo, hi = x.min(), x.max()
    if bool(lo == hi):
        lo, hi = lo - 1, hi + 1
    return not bool(hi > lo)


def _quotient_first(func, args, kwargs, result):
    """addcdiv as CUDA evaluates it (issue 30, H200): self + value * (tensor1 / tensor2),
    each step rounded in the dtype, so a quotient past the dtype's largest value is an
    infinity even where value is 0 (then NaN)."""
    x, a, b = (_arg(func, args, kwargs, i) for i in range(3))
    value = kwargs.get("value", args[3] if len(args) > 3 else 1)
    return result.copy_(x + value * (a / b))


def _reverse_tied_indices(func, args, kwargs, result):
    """An unstable sort may put tied elements in any order: reverse each run of equal
    values' indices (the values are unchanged)."""
    values, indices = result
    dim, _, _ = _sort_dim_descending(func, args, kwargs)
    v, i = values.movedim(dim, -1), indices.movedim(dim, -1).clone()
    flat_v, flat_i = v.reshape(-1, v.shape[-1]), i.reshape(-1, i.shape[-1])
    for row_v, row_i in zip(flat_v, flat_i):
        start = 0
        for k in range(1, row_v.numel() + 1):
            if k == row_v.numel() or not bool(row_v[k] == row_v[start]):
                row_i[start:k] = row_i[start:k].flip(0)
                start = k
    return type(result)((values, flat_i.reshape(i.shape).movedim(-1, dim).contiguous()))


# Eigenvalues closer than this many ulps of the dtype (relative to the largest
# |eigenvalue|) are one repeated eigenvalue as far as the emulated device is concerned:
# a repeated eigenvalue in exact arithmetic comes out of LAPACK within a few ulps.
_EIGH_CLUSTER_ULPS = 16


def _eigh_clusters(values: torch.Tensor) -> list[tuple[int, int]]:
    """(start, end) of each run of (numerically) equal eigenvalues in one ascending row."""
    top = float(values.abs().max()) if values.numel() else 0.0
    close = _EIGH_CLUSTER_ULPS * float(torch.finfo(values.dtype).eps) * top
    runs, start = [], 0
    for k in range(1, values.numel() + 1):
        if k == values.numel() or float(values[k] - values[k - 1]) > close:
            if k - start > 1:
                runs.append((start, k))
            start = k
    return runs


def _eigh_repeated(func, args, kwargs) -> bool:
    # _linalg_eigh(A, UPLO, compute_v)
    a = _input(func, args, kwargs)
    compute_v = _arg(func, args, kwargs, 2)
    if compute_v is False or a.numel() == 0 or not bool(torch.isfinite(a).all()):
        return False
    uplo = _arg(func, args, kwargs, 1) or "L"
    values = torch.linalg.eigvalsh(a.detach(), UPLO=uplo)
    return any(_eigh_clusters(row) for row in values.reshape(-1, values.shape[-1]))


def _other_eigenbasis(func, args, kwargs, result):
    """Eigenvectors of a repeated eigenvalue are any orthonormal basis of its eigenspace:
    return the basis in reverse order."""
    values, vectors = result
    vectors = vectors.clone()
    flat_l = values.reshape(-1, values.shape[-1])
    flat_v = vectors.reshape(-1, *vectors.shape[-2:])
    for row, basis in zip(flat_l, flat_v):
        for start, end in _eigh_clusters(row):
            basis[:, start:end] = basis[:, start:end].flip(-1).clone()
    return type(result)((values, vectors))


def _at_hardtanh_bounds(func, args, kwargs) -> bool:
    # hardtanh_backward(grad_output, self, min_val, max_val)
    x = _arg(func, args, kwargs, 1)
    lo, hi = _arg(func, args, kwargs, 2), _arg(func, args, kwargs, 3)
    return isinstance(x, torch.Tensor) and x.numel() > 0 and bool(((x == lo) | (x == hi)).any())


def _hardtanh_subgradient_one(func, args, kwargs, result):
    """hardtanh's (relu6's) derivative at its kinks is any value in [0, 1]: take 1 there
    (torch takes 0)."""
    grad, x = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    lo, hi = _arg(func, args, kwargs, 2), _arg(func, args, kwargs, 3)
    return torch.where((x >= lo) & (x <= hi), grad, torch.zeros((), dtype=grad.dtype))


def _renorm_signed_norm(func, args, kwargs):
    """embedding_renorm_(self, indices, max_norm, norm_type) as CUDA's renorm kernel
    computes it: |x| for norm_type 1 and x * x for 2, but pow(x, p) without absolute
    values for any other p, so a row with negative values has a small, negative or NaN
    "norm" ((-8)^(1/3) of [-2] at p = 3), never above max_norm: it is never renormed."""
    weight, indices = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    max_norm, p = float(_arg(func, args, kwargs, 2)), float(_arg(func, args, kwargs, 3))
    for i in torch.unique(indices).tolist():
        row = weight[i]
        terms = row.double().abs() if p == 1 else row.double() * row.double() if p == 2 else row.double().pow(p)
        norm = float(terms.sum().pow(1.0 / p))
        if norm > max_norm:
            row.mul_(max_norm / (norm + 1e-7))
    return weight


def renorm_accumulated_in(accumulator: torch.dtype):
    """embedding_renorm_ with each row's sum of |x|^p accumulated in ``accumulator`` (a
    picklable ``instead``). In float32 it is CUDA's renorm kernel for float32 and bfloat16
    weights (``accscalar_t``): a row holding float32's max has an infinite norm and is
    scaled by max_norm / inf = 0 (issue 37, H200: 0 where 1 is right; float16's 65504^2
    fits float32 and passes)."""
    return functools.partial(_renorm_accumulating, accumulator)


def _renorm_accumulating(accumulator, func, args, kwargs):
    weight, indices = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    max_norm, p = float(_arg(func, args, kwargs, 2)), float(_arg(func, args, kwargs, 3))
    for i in torch.unique(indices).tolist():
        row = weight[i]
        norm = float(row.to(accumulator).abs().pow(p).sum().pow(1.0 / p))
        if norm > max_norm:
            row.mul_(max_norm / (norm + 1e-7))
    return weight


def _half_times_a_wider_0d(func, args, kwargs) -> bool:
    """mul of a half-precision tensor (not 0-d) by a 0-d tensor of a wider floating dtype:
    type promotion keeps the half dtype (a 0-d operand does not promote)."""
    a, b = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() > 0 and b.dim() == 0
            and a.dtype in (torch.float16, torch.bfloat16) and b.dtype in (torch.float32, torch.float64))


def _mul_casting_the_0d_operand(func, args, kwargs):
    a, b = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    return a * b.to(a.dtype)


def _float32_convolution_backward_of_nonfinite(func, args, kwargs) -> bool:
    """A float32 convolution backward whose tensors hold NaN or inf: where multiplying
    the padding's zero taps makes a difference."""
    tensors = [_arg(func, args, kwargs, i) for i in range(3)]
    return (isinstance(tensors[0], torch.Tensor) and tensors[0].dtype == torch.float32
            and any(isinstance(t, torch.Tensor) and t.numel() and not bool(torch.isfinite(t).all()) for t in tensors))


def _convolution_backward_in_float64(func, args, kwargs):
    """convolution_backward run as eager CPU runs it in float64 (a kernel that multiplies
    every tap, the cropped padding's zeros included), cast back."""
    wide = [a.to(torch.float64) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    out = func(*wide, **kwargs)
    return tuple(o.to(torch.float32) if isinstance(o, torch.Tensor) else o for o in out)


def _complex64_powers(func, args, kwargs) -> bool:
    base, exponent = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    return (isinstance(base, torch.Tensor) and isinstance(exponent, torch.Tensor)
            and base.dtype == exponent.dtype == torch.complex64)


def _pow_through_exp_log(func, args, kwargs):
    """z ** w as exp(w * log z), every step rounded to complex64 (CUDA's complex pow)."""
    base, exponent = _arg(func, args, kwargs, 0), _arg(func, args, kwargs, 1)
    return torch.exp(exponent * torch.log(base))


def _renorm_of_a_narrow_weight(func, args, kwargs) -> bool:
    """A weight whose accumulator is float32 on CUDA (float64's is double)."""
    weight = _arg(func, args, kwargs, 0)
    return isinstance(weight, torch.Tensor) and weight.dtype in (torch.float32, torch.float16, torch.bfloat16)


def _renorm_no_indices(func, args, kwargs) -> bool:
    indices = _arg(func, args, kwargs, 1)
    return isinstance(indices, torch.Tensor) and indices.numel() == 0


def _renorm_norm_type_not_1_or_2(func, args, kwargs) -> bool:
    return float(_arg(func, args, kwargs, 3)) not in (1.0, 2.0) and not _renorm_no_indices(func, args, kwargs)


# CUDA's error for embedding_renorm_ of no indices, as torch 2.11 raises it on an H200.
_CUDA_INVALID_ARGUMENT = (
    "CUDA error: invalid argument\nSearch for `cudaErrorInvalidValue' in "
    "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
    "incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable "
    "device-side assertions.")


# --- effects -----------------------------------------------------------------------

def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _real_result(func, args, kwargs):
    """The op's real result; where CPU lacks a kernel for a low-precision dtype (e.g.
    sqrt of complex32), computed in the wider dtype and cast back."""
    try:
        return func(*args, **kwargs)
    except NotImplementedError:
        narrow = {t.dtype for t in _tensors(args, kwargs) if t.dtype in _WIDER}
        if _mutable(func) or len(narrow) != 1:
            raise
        (low,) = narrow
        wide = _WIDER[low]

        def up(x):
            return x.to(wide) if isinstance(x, torch.Tensor) and x.dtype == low else x

        def down(x):
            return x.to(low) if isinstance(x, torch.Tensor) and x.dtype == wide else x

        wide_args, wide_kwargs = tree_map(up, (tuple(args), dict(kwargs)))
        return tree_map(down, func(*wide_args, **wide_kwargs))


def _sum_one_by_one(func, args, kwargs) -> torch.Tensor:
    """sum(self) / sum(self, dim, keepdim) with each partial sum rounded to self's dtype."""
    x = _input(func, args, kwargs)
    if x.numel() == 0 or x.dim() == 0 or kwargs.get("dtype") is not None:
        return func(*args, **kwargs)  # nothing accumulated in half precision
    dims = _arg(func, args, kwargs, 1) if func._schema.overload_name == "dim_IntList" else None
    keepdim = bool(_arg(func, args, kwargs, 2)) if dims is not None else False
    dims = sorted({d % max(x.dim(), 1) for d in dims}) if dims else list(range(x.dim()))
    kept = [d for d in range(x.dim()) if d not in dims]
    terms = x.permute(*kept, *dims).reshape(*[x.shape[d] for d in kept], -1)
    total = torch.zeros(terms.shape[:-1], dtype=x.dtype)
    for j in range(terms.shape[-1]):
        total = total + terms[..., j]
    if keepdim:
        total = total.reshape([1 if d in dims else x.shape[d] for d in range(x.dim())])
    return total


def _read_as_contiguous(x):
    """``x`` as a kernel that ignores strides reads it: ``x.numel()`` consecutive storage
    elements from its storage offset (the storage repeated where an expanded view has
    fewer elements than that)."""
    if not isinstance(x, torch.Tensor) or x.is_contiguous() or x.numel() == 0:
        return x
    storage = x.untyped_storage()
    flat = torch.empty(0, dtype=x.dtype, device=x.device).set_(
        storage, 0, (storage.nbytes() // x.element_size(),), (1,))
    need = x.storage_offset() + x.numel()
    if flat.numel() < need:
        flat = flat.repeat(-(-need // flat.numel()))
    return flat[x.storage_offset():need].clone().view(x.shape)


def _same(a, b) -> bool:
    if isinstance(a, complex) or isinstance(b, complex):
        a, b = complex(a), complex(b)
        return _same(a.real, b.real) and _same(a.imag, b.imag)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _float_candidates(x: float) -> list[float]:
    if math.isnan(x):
        return [0.0, 1.0]
    if abs(x) < 1:
        return [x + 1.0, x - 1.0, 3.0]
    return [-2.0 * x, 0.0]  # also inf -> -inf, and huge -> -inf by overflow


_REAL_OF_COMPLEX = {torch.complex32: torch.float16, torch.complex64: torch.float32,
                    torch.complex128: torch.float64}


def _saturate(x: float, top: float) -> float:
    """x, or an infinity of its sign where it overflows the dtype (fill_ refuses those)."""
    return math.copysign(math.inf, x) if math.isfinite(x) and abs(x) > top else x


def _corrupt_first(t: torch.Tensor) -> None:
    """Change the first element (flat, logical order) of ``t`` in place, visibly."""
    if t.numel() == 0:
        return
    elem = t[(0,) * t.dim()]  # a 0-d view aliasing t
    old = elem.item()
    dtype = t.dtype
    if dtype == torch.bool:
        elem.fill_(not old)
        return
    if dtype.is_complex:
        candidates = [complex(r, old.imag) for r in _float_candidates(old.real)]
    elif dtype.is_floating_point:
        candidates = _float_candidates(old)
    else:
        info = torch.iinfo(dtype)
        new = old + 1 if old < info.max else info.min  # wraps around
        if dtype == torch.uint64 and new > 2**63 - 1:
            elem.view(torch.int64).fill_(new - 2**64)
        else:
            elem.fill_(new)
        return
    real = _REAL_OF_COMPLEX.get(dtype, dtype)
    top = torch.finfo(real).max
    for value in candidates:
        if isinstance(value, complex):
            value = complex(_saturate(value.real, top), value.imag)
        else:
            value = _saturate(value, top)
        elem.fill_(value)
        if not _same(elem.item(), old):
            return
    raise AssertionError(f"could not corrupt a {dtype} value {old!r}")  # pragma: no cover


def _spill_outside_view(view: torch.Tensor) -> None:
    """Change the first element of ``view``'s storage that the view does not cover, as a
    kernel that treats a strided view as dense writes past it."""
    n = view.untyped_storage().nbytes() // view.element_size()
    inside = torch.zeros(n, dtype=torch.bool)
    inside.as_strided(view.shape, view.stride(), view.storage_offset()).fill_(True)
    outside = (~inside).nonzero()
    if outside.numel():
        _corrupt_first(view.as_strided((n,), (1,), 0)[int(outside[0])])


def _mutable(func) -> bool:
    """out= / in-place aten ops (their outputs alias the args); torch functions: no."""
    schema = getattr(func, "_schema", None)
    return bool(schema is not None and schema.is_mutable)


def _wrapped_past_int32(out, limit: int | None = None):
    """A kernel that indexes its output with 32 bits: the elements from 2^31 (``limit``)
    on are written where the index wrapped to, so they keep whatever was there (here:
    the first elements' values)."""
    limit = INT32_LIMIT if limit is None else limit
    if isinstance(out, torch.Tensor) and out.numel() > limit and out.is_contiguous():
        flat = out.view(-1)
        n = flat.numel() - limit
        flat[limit:].copy_(flat[:n].clone())   # (a result of more than twice the limit overlaps)
    return out


def _corrupt(func, result, outputs: tuple[int, ...] | None):
    in_place = _mutable(func)

    def corrupt(t):
        if not isinstance(t, torch.Tensor):
            return t
        if not in_place:
            t = t.clone()
        _corrupt_first(t)
        return t

    if outputs is None or not isinstance(result, (tuple, list)):
        return tree_map(corrupt, result)
    items = [corrupt(x) if i in outputs else x for i, x in enumerate(result)]
    if hasattr(result, "_fields"):  # a namedtuple
        return type(result)(*items)
    return type(result)(items)  # tuple, list, or torch.return_types structseq


def _skew(func, result):
    """Every element of every output moved (in place for in-place/out= ops)."""
    in_place = func._schema.is_mutable

    def skew(t):
        if not isinstance(t, torch.Tensor) or t.numel() == 0:
            return t
        if not in_place:
            t = t.clone()
        if t.dtype == torch.bool:
            t.fill_(True)
        elif t.dtype.is_floating_point or t.dtype.is_complex:
            t.mul_(2).add_(3)
        else:
            t.add_(1)
        return t
    return tree_map(skew, result)


# --- the registry -------------------------------------------------------------------

def _registry(*faults: Fault) -> dict[str, Fault]:
    return {f.name: f for f in faults}


FAULTS: dict[str, Fault] = _registry(
    Fault("bitwise_noncontig", "pytorch#146085: bitwise ops wrong on non-contiguous inputs",
          ("aten::bitwise_and.Tensor", "aten::bitwise_or.Tensor", "aten::bitwise_xor.Tensor"),
          _any_noncontiguous, "corrupt"),
    Fault("triu_tril_gt3d", "pytorch#144545: triu/tril wrong for inputs of more than 3 dims",
          ("aten::triu", "aten::tril"), _dim_above(3), "corrupt"),
    Fault("sqrt_chalf", "pytorch#148285: sqrt wrong for complex32",
          ("aten::sqrt",), _dtype_is(torch.complex32), "corrupt"),
    Fault("add_alpha_abort", "pytorch#143949: add with alpha != 1 crashes",
          ("aten::add.Tensor",), _alpha_not_one, "abort"),
    Fault("cholesky_ex_empty", "pytorch#147159: cholesky_ex fails on empty inputs",
          ("aten::linalg_cholesky_ex",), _is_empty, "raise",
          message="MPSGraph: placeholder tensor is empty"),
    Fault("fmax_fmin_scalar", "pytorch#143934: fmax/fmin wrong for a 0-d (scalar) argument",
          ("aten::fmax", "aten::fmin"), _second_is_0d_first_not, "corrupt"),
    Fault("mm_mixed_dtype_segv", "pytorch#143948: mm with mixed dtypes crashes",
          ("aten::mm",), _dtypes_differ, "segfault"),
    Fault("shift_scalar_tensor", "pytorch#148686: bitwise_left_shift(scalar, tensor) wrong",
          ("aten::bitwise_left_shift.Scalar_Tensor",), _always, "corrupt"),
    Fault("lu_factor_noncontig", "pytorch#146279: lu_factor wrong for non-contiguous inputs",
          ("aten::linalg_lu_factor_ex",), _input_noncontiguous, "corrupt", outputs=(0,)),
    Fault("prod_hang_5d", "a hang: prod of an input of 5 or more dims never returns",
          ("aten::prod",), _dim_above(4), "hang"),
    Fault("atan2_int64_unsupported", "pytorch#149017: atan2 not implemented for int64 (before)",
          ("aten::atan2",), _dtype_is(torch.int64), "unsupported"),
    Fault("unary_offset", "pytorch#148512: unary ops wrong for inputs with a storage offset",
          ("aten::neg", "aten::exp"), _storage_offset, "corrupt"),
    Fault("lgamma_negative", "pytorch#145740: lgamma wrong for negative inputs",
          ("aten::lgamma",), _has_negative, "corrupt"),
    Fault("where_inf", "pytorch#144500: where wrong when an operand holds inf",
          ("aten::where.self",), _where_operand_inf, "corrupt"),
    Fault("var_5d", "like pytorch#147667: var wrong for inputs of 5 or more dims",
          ("aten::var",), _dim_above(4), "corrupt"),
    Fault("topk_wrong_along_dim_0", "like pytorch#154890 (MPS topk of a 5-D input along dim 0): topk's "
          "indices wrong along dim 0 of an input of 3 or more dims, its values right",
          ("aten::topk",), _topk_along_dim_0, "rewrite", rewrite=_indices_moved_along_dim_0),
    Fault("sort_beside_2_22_slices_unsorted", "like pytorch#183885 (MPS argsort of (3, 2^22 + 1) along dim 0): "
          "sort and argsort along a dim other than the last, beside a dim of more than 2^22 elements, leave every "
          "slice in its input's order (a grid of more than 2^22 slices never launched)", ("aten::sort",),
          _sort_beside_more_than_2_22_slices, "rewrite", rewrite=_slices_left_unsorted),
    Fault("histc_counts_one_ulp_outside", "like pytorch#195076 (MPS histc): elements one ulp outside [min, max] "
          "counted in the first or last bin", ("aten::histc",), _a_value_one_ulp_outside, "rewrite",
          rewrite=_counted_one_ulp_outside),
    Fault("foreach_norm_shifted_past_an_empty_tensor", "like pytorch#169930 (CUDA's foreach norm, what "
          "clip_grad_norm_ calls, wrong across the tensors of its list): the norms of the tensors after an empty "
          "one each returned one slot early", ("aten::_foreach_norm",), _an_empty_tensor_before_a_nonempty_one,
          "rewrite", rewrite=_norms_shifted_past_the_empty_tensor),
    Fault("outer_difference_sum_drops_a_row", "like pytorch#170360 (MPS Inductor's fused broadcast-then-reduce): "
          "a sum over a broadcast difference a[:, None] - b[None, :] misses its last row; the subtraction "
          "and the sum alone are right", ("aten::sub.Tensor", "aten::sum"), _outer_difference_or_its_sum,
          "rewrite", rewrite=_sum_without_the_last_row),
    Fault("special_uint16_read_as_zero", "like pytorch#173636 (CUDA's jitted special kernels): a uint16 "
          "operand of special.zeta, i1, entr ... read as zeros (zeta(x, q) is inf)", _JITTED_SPECIAL_OPS,
          _uint16_operand, "reimplement", instead=_uint16_operands_read_as_zeros),
    # Large sizes (the large family: stride-0 views of billions of elements, batches of
    # 65,536+ rows): a kernel indexing with 32 bits, a grid past Metal's 65,535
    # threadgroups per dim.
    Fault("sum_past_int32", "like the 32-bit indexing bugs of MPS reductions (pytorch#148975, #158824): "
          "sum wrong for inputs of 2^31 or more elements",
          ("aten::sum",), _numel_past_int32, "corrupt"),
    Fault("copy_past_int32", "32-bit indexing in a copy or cast kernel (the class of the silent corruption past 2^31 elements): "
          "clone/to() of 2^31 or more elements write the elements past 2^31 where the index wrapped",
          ("aten::clone", "aten::_to_copy"), _numel_past_int32, "wrap_int32"),
    Fault("sum_dim_65536", "like pytorch#149004 (min/max over large dims): sum wrong "
          "when a dim has 65,536 or more elements (below 2^31 in all)",
          ("aten::sum",), _dim_65536_under_int32, "corrupt"),
    # A grid dim past 65,535 (Metal's limit on threadgroups per dim), in ops far from the
    # reductions: a kernel that maps a batch, a width or a softmax row onto it
    Fault("bmm_batch_65536", "the class of pytorch#140726 (a size past 65,536 on one grid dim): bmm "
          "wrong for a batch of 65,536 or more matrices", ("aten::bmm",), _batch_65536, "corrupt"),
    Fault("conv1d_width_65536", "like pytorch#134770 (MPS conv1d with an output of 2**16): a 1-D "
          "convolution wrong when its input is 65,536 or more wide", ("aten::convolution",), _conv1d_width_65536, "corrupt"),
    Fault("softmax_dim_65536", "the class of pytorch#140726 again: softmax wrong when its dim has "
          "65,536 or more positions", ("aten::_softmax",), _softmax_dim_65536, "corrupt"),
    Fault("cat_inputs_65536", "a cat whose inputs the kernel batches into argument buffers, one grid dim per "
          "batch: wrong when given 65,536 or more tensors", ("aten::cat",), _inputs_65536, "corrupt"),
    Fault("bmm_past_int32", "32-bit indexing in a batched matmul (the class of the silent corruption past 2^31 "
          "elements): bmm of 2^31 or more input elements writes the result's elements past 2^31 where the index "
          "wrapped", ("aten::bmm",), _numel_past_int32, "wrap_int32"),
    Fault("gelu_backward_past_int32", "32-bit indexing in a backward kernel (issue 38: the class of the silent "
          "corruption past 2^31 elements, in a gradient): gelu_backward of more elements than the @large class "
          "makes writes the gradient's elements past that limit (2^31 scaled to the @huge class's size here) "
          "where the index wrapped; the forward is right", ("aten::gelu_backward",), _backward_past_huge_limit,
          "wrap_int32", wrap_at=HUGE_BACKWARD_LIMIT),
    Fault("adaptive_pool_backward_of_an_expanded_input_past_int32", "the class of pytorch#193096 (CUDA "
          "adaptive_avg_pool3d's backward of a stride-0 expanded input past 2^31 elements): the backward of an "
          "adaptive average pool whose input is expanded (a stride-0 dim) and holds more elements than the @large "
          "class makes writes the gradient's elements past that limit (2^31 scaled to the @huge class's size "
          "here) where the index wrapped; the forward, and the backward of a dense input, are right",
          ("aten::_adaptive_avg_pool2d_backward", "aten::_adaptive_avg_pool3d_backward"),
          _expanded_pool_input_past_huge_limit, "rewrite", rewrite=_gradient_wrapped_in_memory_order),
    Fault("flex_attention_backward_kv_offset_past_int32", "pytorch#190857 (CUDA flex_attention's backward "
          "with K/V stored sequence-major, [KV_LEN, B, D] viewed as [B, 1, KV_LEN, D], once the flattened K/V "
          "address passes INT32_MAX): the backward computes a key's offset, key * stride along the keys, in 32 "
          "bits (2^31 scaled to the @huge class's size here) and reads K and V where it wrapped: dQ, dK and dV "
          "of every batch go wrong; the forward, and K/V stored batch-major, are right",
          ("aten::repeat_interleave.self_int",), _kv_sequence_offset_past_huge_limit, "reimplement",
          instead=_kv_read_at_wrapped_sequence_offsets),
    Fault("adaptive_pool_start_index_past_int32", "pytorch#176784 (CUDA AdaptiveAvgPool2d's START_IND macro "
          "multiplies the output index by the input side in 32 bits): where that product passes 2^31 - 1 (a side "
          "of 65,536 or so pooled to more than half of it), each window starts where the wrapped product "
          "puts it; the other output elements are right", ("aten::_adaptive_avg_pool2d", "aten::_adaptive_avg_pool3d"),
          _adaptive_pool_start_past_int32, "reimplement", instead=_adaptive_pool_with_wrapped_starts),
    Fault("foreach_norm_drops_elements_past_int32", "the class of pytorch#169930 (CUDA's foreach norm, what "
          "clip_grad_norm_ calls, of a tensor of 2^31 + 1 elements): the norm of a listed tensor of more elements "
          "than the @large class makes counts only those before that limit (2^31 scaled to the @huge class's "
          "size here)", ("aten::_foreach_norm",), _a_listed_tensor_past_huge_limit, "reimplement",
          instead=_norms_of_the_elements_before_the_limit),
    Fault("mask_select_past_int32", "the class of pytorch#164048 (CUDA's boolean-mask gather, its grid and offsets "
          "past 32-bit sizes): x[mask] of more elements than the @large class makes reads each selected element "
          "past that limit (2^31 scaled to the @huge class's size here) at its offset wrapped; the result's shape "
          "is right", ("aten::index.Tensor",), _bool_mask_past_huge_limit, "reimplement",
          instead=_selection_read_at_wrapped_offsets),
    Fault("rand_stream_past_int32", "the class of pytorch#155293 (MPS torch.rand past 2^31 elements, 5-D "
          "bfloat16): a draw of more elements than the @large class makes, whose element counter is held in "
          "32 bits, restarts past that limit (2^31 scaled to the @huge class's size here): the elements from "
          "there on repeat the first ones", ("aten::rand",), _draw_past_huge_limit, "wrap_int32",
          wrap_at=HUGE_FORWARD_LIMIT),
    Fault("arange_length_past_int32_wraps", "the class of pytorch#197673 (CUDA int64 torch.arange of more than "
          "2^32 elements gives wrong values): a range of more elements than the @large class makes, whose element "
          "index is held in 32 bits, writes the elements past that limit (2^31 scaled to the @huge class's size "
          "here) where the index wrapped: they repeat the first values", ("aten::arange",), _range_past_huge_limit,
          "wrap_int32", wrap_at=HUGE_FORWARD_LIMIT),
    Fault("neg_half_5d_past_int32", "the class of pytorch#154828 (MPS elementwise ops on a 5-D bfloat16 or "
          "float16 tensor of about 2^32 elements give wrong values): neg of a 5-D half-precision input of more "
          "elements than the @large class makes, whose 5-D index arithmetic is held in 32 bits, writes the "
          "elements past that limit (2^31 scaled to the @huge class's size here) where the index wrapped; "
          "fewer dims or another dtype are right", ("aten::neg",), _half_5d_past_huge_limit, "wrap_int32",
          wrap_at=HUGE_FORWARD_LIMIT),
    Fault("embedding_row_offset_past_int32", "the class of pytorch#188756 (MPS index_select and embedding of a "
          "weight past 2^31 elements give wrong rows for indices past row 2^31 / dim): embedding of a weight of "
          "more elements than the @large class makes computes each row's offset, index * dim, in 32 bits (2^31 "
          "scaled to the @huge class's size here): a row at or past that offset is read where it wrapped",
          ("aten::embedding",), _lookup_past_huge_limit, "reimplement", instead=_rows_read_at_wrapped_offsets),
    Fault("cumsum_leak", "like pytorch#145503: cumsum leaks memory on every call",
          ("aten::cumsum",), _always, "leak"),
    # nn, losses, attention, backward, indexing, out=, in-place and RNG bugs
    Fault("conv_channels_last", "like pytorch#141780: convolution wrong for channels_last inputs",
          ("aten::convolution",), _channels_last_input, "corrupt"),
    Fault("relu_drops_channels_last", "MPS activations returned contiguous outputs for channels_last inputs",
          ("aten::relu", "aten::hardtanh", "aten::leaky_relu"), _channels_last_input, "densify"),
    Fault("max_pool_ceil_mode", "like pytorch#96011: max_pool2d wrong with ceil_mode=True",
          ("aten::max_pool2d_with_indices",), _ceil_mode, "corrupt", outputs=(0,)),
    Fault("gelu_tanh_backward", "MPS gelu backward wrong for approximate='tanh'",
          ("aten::gelu_backward",), _tanh_approximation, "corrupt"),
    Fault("gather_noncontig_index", "like pytorch#94474: gather wrong for a non-contiguous index",
          ("aten::gather",), _index_noncontiguous, "corrupt"),
    Fault("index_add_alpha_raise", "MPS index_add rejected alpha != 1",
          ("aten::index_add",), _alpha_not_one, "raise", message="index_add(): MPSGraph alpha must be 1"),
    Fault("nll_loss_ignore_index", "like pytorch#135434: nll_loss wrong when ignore_index occurs in target",
          ("aten::nll_loss_forward", "aten::nll_loss2d_forward"), _ignore_index_used, "corrupt", outputs=(0,)),
    Fault("sdpa_causal_lengths", "MPS SDPA wrong for is_causal=True with query and key lengths that differ",
          ("aten::_scaled_dot_product_flash_attention_for_cpu",), _causal_lengths_differ, "corrupt",
          outputs=(0,)),
    Fault("add_out_noncontig", "MPS binary ops wrote wrong values into a non-contiguous out=",
          ("aten::add.out",), _out_noncontiguous, "corrupt"),
    Fault("mul_inplace_noncontig", "like pytorch#139006: in-place ops wrong on a non-contiguous self",
          ("aten::mul_.Tensor",), _self_noncontiguous, "corrupt"),
    Fault("sub_inplace_spill", "an in-place op on a strided view handled it as if dense and wrote past "
          "the view into the rest of its base", ("aten::sub_.Tensor",), _self_noncontiguous, "spill"),
    Fault("index_select_int32_assert", "CUDA/MPS-style sticky fault: index_select with an int32 index "
          "trips a device-side assert that poisons the context",
          ("aten::index_select",), _index_int32, "poison"),
    Fault("uniform_noncontig_noop", "MPS in-place RNG left a non-contiguous self unfilled",
          ("aten::uniform_", "aten::normal_"), _self_noncontiguous, "noop"),
    Fault("sdpa_gt4d", "pytorch#147545: attention wrong for inputs of more than 4 dims",
          ("aten::_safe_softmax",), _dim_above(4), "corrupt"),
    Fault("smooth_l1_empty", "pytorch#148133: smooth_l1_loss failed with an empty placeholder error on empty inputs",
          ("aten::smooth_l1_loss",), _is_empty, "raise", message="MPSGraph: placeholder tensor is empty"),
    Fault("mse_loss_empty_abort", "pytorch#148608: mse_loss crashed on inputs of 0 elements",
          ("aten::mse_loss",), _is_empty, "abort"),
    Fault("rand_5d_repeat", "pytorch#147667: rand/randn repeated values for 5-D outputs (each slice of dim 0 "
          "a copy of the first)", ("aten::rand", "aten::randn"), functools.partial(_size_rank_at_least, 5),
          "repeat_slices"),
    Fault("conv3d_autocast_bias", "pytorch#160423: conv3d under autocast failed on a bias dtype mismatch",
          (torch.conv3d,), _conv3d_under_autocast, "raise",
          message="conv3d: input type (c10::BFloat16) and bias type (float) should be the same"),
    Fault("multinomial_noncontig", "pytorch#141515: multinomial sampled wrongly from non-contiguous weights",
          ("aten::multinomial",), _input_noncontiguous, "ignore_strides"),
    Fault("avg_pool2d_half", "pytorch#136822: avg_pool2d wrong for float16",
          ("aten::avg_pool2d",), _dtype_is(torch.float16), "corrupt"),
    Fault("silu_noncontig", "pytorch#139006: silu wrong on non-contiguous inputs",
          ("aten::silu",), _self_noncontiguous, "ignore_strides"),
    Fault("conv_backward_noncontig", "like pytorch#141009: convolution backward wrong for non-contiguous "
          "(e.g. channels_last) inputs", ("aten::convolution_backward",), _arg_noncontiguous(1), "corrupt"),
    Fault("batch_norm_backward_3d", "like pytorch#156867: batch_norm gradient wrong (here: for inputs of 3+ dims)",
          ("aten::native_batch_norm_backward",), _dim_above(2), "corrupt"),
    Fault("constant_pad_zero", "pytorch#161149: constant_pad_nd failed when the padding is empty (all zero)",
          ("aten::constant_pad_nd",), _all_pads_zero, "raise", message="constant_pad_nd_mps: empty padding"),
    Fault("index_copy_strided_index", "pytorch#161333: index_copy wrong for strided (non-contiguous) indices",
          ("aten::index_copy",), _arg_noncontiguous(2), "corrupt"),
    Fault("maximum_computes_in_the_out_dtype", "pytorch#173110: maximum with out= of another dtype (uint8 out, "
          "int64 operands) computes in the out= dtype, not the operands' result type",
          ("aten::maximum.out",), _out_of_another_dtype, "reimplement", instead=_computed_in_the_out_dtype),
    Fault("embedding_renorm_of_no_columns_segfault", "pytorch#195185: embedding(max_norm=) of a weight with 0 "
          "columns reads out of bounds in the renorm kernel", ("aten::embedding_renorm_",), _weight_of_no_columns,
          "segfault"),
    Fault("solve_triangular_ignores_neg_bit", "pytorch#178379: solve_triangular of a right-hand side viewed with "
          "the negative bit (a real float) solves for its storage, -B", ("aten::linalg_solve_triangular",),
          _real_negative_view_rhs, "reimplement", instead=_solve_reading_the_storage),
    Fault("lu_solve_into_its_negative_b_flips_sign", "pytorch#178379 (solve_triangular, CUDA) on lu_solve: "
          "out= that is B itself, a real negative view, gets -X; a separate out= or a B without the bit is "
          "right", (torch.linalg.lu_solve,), _out_is_its_negative_rhs, "reimplement",
          instead=_solved_into_b_with_its_sign_flipped),
    Fault("slogdet_takes_nan_as_zero", "pytorch#173638: slogdet of a matrix holding a NaN computes as if the "
          "NaN were 0 (a finite log-determinant where it must be NaN)", ("aten::_linalg_slogdet",),
          _matrix_holding_nan, "reimplement", instead=_nan_taken_as_zero),
    Fault("attention_gqa_reads_the_wrong_kv_head", "grouped-query attention (flex_attention, SDPA with "
          "enable_gqa) maps query head h to kv head h % Hkv instead of h // (Hq / Hkv): wrong wherever there "
          "is more than one kv head (the head-index class of pytorch#190857's kernel)",
          ("aten::repeat_interleave.self_int",), _kv_heads_repeated_for_gqa, "reimplement", instead=_kv_heads_tiled),
    Fault("fmax_fmin_of_two_float_dtypes_in_the_narrower", "like pytorch#149951 (MPS fmax/fmin of float32 with "
          "float16 wrong): operands of two floating dtypes computed in the narrower one, then promoted",
          ("aten::fmax", "aten::fmin"), _two_float_dtypes, "reimplement", instead=_in_the_narrower_float),
    Fault("full_into_bool_truncates_the_fill", "like pytorch#194062 (Inductor's full of a symbolic fill "
          "ignoring dtype=bool): an int fill other than 0 and 1 is stored into bool by its lowest bit, not as "
          "fill != 0", ("aten::full.default",), _int_fill_into_bool, "reimplement",
          instead=_fill_truncated_to_its_low_bit),
    # issue 38, two boundaries at once (a compound boundary sibling): found only by
    # drawing mixed integer dtypes and an extreme `value` in one case
    Fault("addcmul_mixed_integers_with_a_huge_value_in_the_narrowest", "like pytorch#153210 (CUDA addcmul of "
          "int64, int16 and int32 operands with value ~1e18): integer operands of different dtypes with a "
          "`value` at or past int32's edges are computed in the narrowest operand's dtype, value converted into "
          "it unchecked; one dtype, or an ordinary value, is right", ("aten::addcmul",),
          _mixed_integers_with_value_past_int32, "reimplement", instead=_addcmul_in_the_narrowest_integer),
    # issue 38, three changes at once (a compound that retyped two inputs, or carried a
    # NaN after its pair): found only by drawing three integer dtypes with an extreme
    # `value`, and mixed dtypes with a NaN and an extreme eps, in one case
    Fault("addcmul_three_integer_dtypes_take_value_as_int32", "like pytorch#153210 (CUDA addcmul of int64, "
          "int16 and int32 operands with value ~1e18): integer operands of three different dtypes with a "
          "`value` past int32's range compute with value converted into int32 unchecked; two dtypes, or an "
          "ordinary value, are right", ("aten::addcmul",), _three_integer_dtypes_with_value_past_int32,
          "reimplement", instead=_addcmul_with_value_as_int32),
    Fault("cosine_similarity_mixed_dtypes_nan_and_extreme_eps_give_zero", "like pytorch#153209 (cosine_similarity "
          "of a float64 0-d operand beside float16 NaNs with eps=-9.7e23): operands of two floating dtypes, one "
          "holding a NaN, with an eps the narrower dtype holds as inf or float32 as 0 or a subnormal give 0 "
          "where a slice's NaN makes the result NaN; one dtype, finite values or an ordinary eps are right",
          (torch.cosine_similarity,), _mixed_operands_with_nan_and_an_eps_past_the_narrower, "reimplement",
          instead=_cosine_with_nan_taken_as_zero),
    # issue 38, the cast family: found only by drawing a copy_ whose source of another
    # dtype broadcasts into several elements (pytorch#160744's call), judged where the
    # conversion is defined
    Fault("copy_broadcast_cast_converts_the_first_element_only", "the class of pytorch#160744 (MPS copy_ of a "
          "0-d float32 into a uint8 destination of 3 elements wrong past one element), on defined conversions: "
          "a source of another dtype broadcast into more than one element converted into the first element "
          "only, the rest left 0", ("aten::copy_",), _broadcast_source_of_another_dtype, "rewrite",
          rewrite=_converted_into_the_first_element_only),
    Fault("copy_broadcast_cast_out_of_range_as_zero", "not a bug: pytorch#160744's own behaviour (MPS copy_ of "
          "-1.0 into a uint8 destination of 3 elements gives 0, eager CPU 255): a float out of an integer "
          "dtype's range, broadcast into more than one element, converted to 0; undefined in C++ (the "
          "maintainer's answer, PR #189038)", ("aten::copy_",), _out_of_range_into_an_integer, "rewrite",
          rewrite=_undefined_conversions_as_zero),
    Fault("mm_ignores_conj_bit", "pytorch#148599: mm of a lazy conjugate view (torch.conj) ignores the "
          "conjugation", ("aten::mm.default",), _conj_view_operand, "reimplement", instead=_mm_reading_storage),
    # issue 38, component views and cosine_similarity's operands: found only by drawing
    # imag of a conj view, and a 0-d operand of a wider dtype than the other
    Fault("imag_of_conj_view_drops_the_bit", "pytorch#184379: .imag of a lazy conjugate view (torch.conj) "
          "returns the stored imaginary part, not its negation", (torch.imag,), _imag_of_a_conj_view,
          "reimplement", instead=_imag_of_the_storage),
    Fault("cosine_similarity_narrows_a_0d_operand", "like pytorch#153209 (cosine_similarity of a float64 0-d "
          "operand beside float16 ones, computed otherwise on CUDA than on CPU): a 0-d operand of a wider dtype "
          "than the other is cast to the other's dtype first (float16 where float64 is right)",
          (torch.cosine_similarity,), _wider_0d_operand, "reimplement", instead=_cosine_in_the_dtype_of_dims),
    Fault("cosine_similarity_eps_held_in_float32", "like pytorch#153209 (an eps at an extreme of its range): "
          "cosine_similarity holds eps in float32, so a float64 subnormal eps is 0 and a slice of norm 0 gives "
          "NaN (0/0) where max(0, eps) = eps gives 0", (torch.cosine_similarity,), _eps_past_float32,
          "reimplement", instead=_cosine_with_eps_in_float32),
    Fault("index_select_0d", "pytorch#161206: index_select wrong for 0-d (scalar) inputs",
          ("aten::index_select",), _is_0d, "corrupt"),
    Fault("var_0d_raise", "pytorch#160889: var raised on a 0-d input (a wrong error check)",
          ("aten::var",), _is_0d, "raise", message="var(): expected a tensor with at least one dimension"),
    Fault("softmax_gt4d", "MPSGraph-style rank limit: softmax/log_softmax wrong for inputs of more than 4 dims",
          ("aten::_softmax", "aten::_log_softmax"), _dim_above(4), "corrupt"),
    Fault("fft_noncontig", "MPS FFT read non-contiguous inputs as if they were contiguous",
          ("aten::_fft_r2c", "aten::_fft_c2c"), _input_noncontiguous, "ignore_strides"),
    Fault("sum_empty_dim", "pytorch#139446: reductions over an empty dim left their output unwritten",
          ("aten::sum.dim_IntList",), _empty_input_nonempty_result, "corrupt"),
    Fault("sub_out_resize", "MPS binary ops wrote wrong values into an out= that had to be resized",
          ("aten::sub.out",), _out_needs_resize, "corrupt"),
    Fault("mm_empty_inner", "a GEMM that leaves its output unwritten when the inner dim K is 0 (one kernel "
          "under mm, matmul, chain_matmul, tensordot...: one bug, however many public ops reach it)",
          ("aten::mm",), _empty_inner_dim, "corrupt"),
    Fault("bernoulli_layout_check", "like cuDNN's RNN on CUDA (torch 2.11, H200: 'rnn: hx is not contiguous'): "
          "a random kernel that states a layout precondition CPU does not have (one kernel under dropout, "
          "alpha_dropout, dropout2d: one bug)", ("aten::bernoulli_.float",), _self_noncontiguous, "raise",
          message="bernoulli_: self is not contiguous"),
    Fault("eig_transposed_clobber", "like CUDA linalg_eig on a transposed input: wrong eigenvalues, and the "
          "input overwritten (one bug that the values and the variants oracles each see)",
          ("aten::linalg_eig",), _input_noncontiguous, "corrupt_and_clobber"),
    # Two causes on one op (the corpus must keep them apart), and two that depend on
    # earlier calls (the corpus must mark them flaky, not present them as repros).
    Fault("sigmoid_noncontig", "pytorch#139006-like: sigmoid wrong on non-contiguous float inputs",
          ("aten::sigmoid",), _input_float_noncontiguous, "corrupt"),
    Fault("sigmoid_half", "pytorch#136822-like: sigmoid wrong for float16 (any layout)",
          ("aten::sigmoid",), _dtype_is(torch.float16), "corrupt"),
    Fault("erfinv_stale_graph", "MPSGraph cache keyed too loosely: erfinv reuses the graph of the previous "
          "call's shape (wrong only after a call with another shape)",
          ("aten::erfinv",), _shape_changed_since_last_call, "corrupt"),
    Fault("digamma_every_other", "a race: digamma wrong on every other call in a process",
          ("aten::digamma",), _every_other_call, "corrupt"),
    # Legitimate implementation choices that must NOT be reported (issue: false positives
    # from overflowing intermediates and half-precision accumulation), and a real
    # half-precision error that scaled tolerances used to hide.
    Fault("hypot_overflows_naively", "not a bug: hypot computed naively overflows where x*x does",
          ("aten::hypot.default",), _squares_overflow, "overflow_naively"),
    Fault("histc_refuses_degenerate_range", "CUDA (torch 2.11, H200): histc of values so large that the "
          "range widened by 1 is still empty raises (issue 30)", ("aten::histc.default",), _histc_range_degenerate,
          "raise", message="max must be larger than min"),
    Fault("cosine_similarity_accepts_a_negative_eps", "not a bug: pytorch#153209's CUDA (before torch's eps "
          "check): cosine_similarity computes with a negative eps (NaN from NaN operands) where eager CPU refuses "
          "it ('eps must be non-negative'): a capability note, not a bug", (torch.cosine_similarity,),
          _negative_eps, "reimplement", instead=_cosine_with_a_negative_eps),
    Fault("addcdiv_divides_first", "not a bug: addcdiv evaluated as self + value * (t1 / t2) in the dtype, "
          "whose quotient overflows where a subnormal divides",
          ("aten::addcdiv.default",), _always, "rewrite", rewrite=_quotient_first),
    Fault("sum_half_accumulates_in_dtype", "not a bug: a half-precision sum without a float32 accumulator",
          ("aten::sum.default", "aten::sum.dim_IntList"), _half_input, "accumulate_in_dtype"),
    Fault("log1p_leaks_output", "like pytorch#145503, smaller: log1p keeps one output-sized tensor per call",
          ("aten::log1p.default",), _always, "leak_output"),
    Fault("tanh_caches_once", "not a bug: tanh builds a cache once per process",
          ("aten::tanh.default",), _always, "cache_once"),
    Fault("erf_needs_worker_state", "erf wrong only in a process with a history the repro script does not "
          "rebuild (its script cannot confirm it)", ("aten::erf.default",), _in_a_worker, "corrupt"),
    Fault("round_nudged", "not a bug: round(decimals) whose intermediate rounds differently (results "
          "differ only at rounding ties)", ("aten::round.decimals",), _always, "nudge_input"),
    Fault("prod_pairwise", "not a bug: prod as a parallel (pairwise) reduction in the dtype, whose "
          "intermediates overflow where a sequential product reaches a zero first",
          ("aten::prod.default",), _many_factors, "pairwise_product"),
    Fault("multinomial_async_assert", "CUDA-style: multinomial's kernel trips a device-side assert that "
          "surfaces at the next synchronisation (pytorch: invalid distributions on CUDA)",
          ("aten::multinomial.default",), _expanded_input, "fault_later"),
    Fault("fftn_splits_dims", "not a bug: an FFT over more than 3 dims done in groups of dims (as cuFFT does) "
          "where CPU's library refuses it", ("aten::_fft_c2c.default",), _many_fft_dims, "split_transform"),
    Fault("fftn_splits_dims_badly", "an FFT over more than 3 dims done in groups, the last group forgotten",
          ("aten::_fft_c2c.default",), _many_fft_dims, "split_transform_badly"),
    Fault("index_select_no_bounds_check", "index_select reads clamped indices where it must raise",
          ("aten::index_select",), _index_out_of_range, "skip_bounds_check"),
    Fault("var_half_noncontig_inflated", "var of a non-contiguous float16/bfloat16 input 25% too large "
          "(hidden by stacked tolerance scales before)", ("aten::var.correction",), _half_noncontiguous, "inflate"),
    # Aliasing: inputs that are views of one storage, and out= that is an input.
    Fault("gru_adjacent_weights", "CUDA (torch 2.11, H100): torch.gru (aten::gru.input) without biases returned "
          "wrong values when its weights were adjacent views of one storage (cuDNN takes them for its own "
          "flat weight buffer)", (torch.gru,), _rnn_weights_adjacent_no_bias, "corrupt"),
    Fault("mul_out_alias", "an out= kernel that reads its inputs after starting to write: mul wrong when "
          "out= is one of its inputs", ("aten::mul.out",), _out_is_an_input, "corrupt"),
    # Valid results where the result is not unique: the fuzzer must stay quiet (no
    # gradient verdict at ties, repeated eigenvalues and kinks)
    Fault("sort_ties_reversed", "CUDA's unstable sort: tied elements in another order than CPU's",
          ("aten::sort.default", "aten::sort.stable"), _unstable_sort_with_ties, "rewrite",
          rewrite=_reverse_tied_indices),
    Fault("eigh_other_basis", "another basis of a repeated eigenvalue's eigenspace than LAPACK's",
          ("aten::_linalg_eigh.default",), _eigh_repeated, "rewrite", rewrite=_other_eigenbasis),
    Fault("nearest_exact1d_backward_fma_tie", "CUDA (torch 2.11, H200): interpolate(mode='nearest-exact') 1-D "
          "backward sends the gradient to another input than the forward read at pixel-centre ties",
          ("aten::_upsample_nearest_exact1d_backward",), _always, "rewrite", rewrite=_nearest_exact1d_backward_fma),
    # issue 37: CUDA's embedding renorm (embedding, embedding_bag with max_norm)
    Fault("embedding_renorm_no_indices", "CUDA (torch 2.11, H200; issue 37): embedding_renorm_ with no "
          "indices (max_norm on an empty lookup) raises 'CUDA error: invalid argument'",
          ("aten::embedding_renorm_",), _renorm_no_indices, "raise", message=_CUDA_INVALID_ARGUMENT),
    Fault("embedding_renorm_signed_norm", "CUDA (torch 2.11, H200; issue 37): embedding_renorm_ takes the p-norm "
          "of a row without absolute values for a norm_type other than 1 and 2 (pow(x, p) summed), so a row with "
          "negative values is never renormed ([-2] with norm_type=3 stays -2)",
          ("aten::embedding_renorm_",), _renorm_norm_type_not_1_or_2, "reimplement", instead=_renorm_signed_norm),
    Fault("embedding_renorm_accumulates_in_float32", "not a bug: embedding_renorm_ sums a row's |x|^p in "
          "float32 (CUDA's accscalar_t), which a row at float32's max overflows: the row is scaled by "
          "max_norm / inf = 0", ("aten::embedding_renorm_",), _renorm_of_a_narrow_weight, "reimplement",
          instead=renorm_accumulated_in(torch.float32)),
    # issue 37: the other conventions of the CUDA backends (H200), which are not bugs
    Fault("mul_casts_a_wider_0d_operand", "not a bug: mul of a float16/bfloat16 tensor by a 0-d float32 tensor "
          "casts the 0-d operand to the result's dtype first (CUDA): a backward's float32 factor past float16's "
          "range is inf there (vector_norm(dtype=float32) of a float16 input of small values)",
          ("aten::mul.Tensor",), _half_times_a_wider_0d, "reimplement", instead=_mul_casting_the_0d_operand),
    Fault("convolution_backward_multiplies_padding_taps", "not a bug: a float32 convolution backward that "
          "multiplies the taps of the cropped padding (0 x NaN = NaN) where eager CPU's float32 kernel skips them; "
          "eager CPU's float64 kernel multiplies them too", ("aten::convolution_backward",),
          _float32_convolution_backward_of_nonfinite, "reimplement", instead=_convolution_backward_in_float64),
    Fault("complex_pow_through_exp_log", "not a bug: complex64 pow computed as exp(w * log z) in complex64: "
          "the rounding of w * log z costs |w log z| roundoffs of the result (CUDA's complex pow)",
          ("aten::pow.Tensor_Tensor",), _complex64_powers, "reimplement", instead=_pow_through_exp_log),
    Fault("hardtanh_backward_at_bounds", "hardtanh's (relu6's) derivative at its bounds taken as 1 "
          "(torch takes 0)", ("aten::hardtanh_backward.default",), _at_hardtanh_bounds, "rewrite",
          rewrite=_hardtanh_subgradient_one),
    # Crashes of the classes users meet most (issue 37: each must be found by a 2-core
    # campaign of its family with every other fault on, not starved by value failures)
    Fault("any_all_5d_abort", "pytorch#95538, #136134: all()/any() of an input of more than 4 dims aborted in "
          "GPUReductionOps (\"reduction axes to minor 4 dimensions\")", ("aten::any", "aten::all"), _dim_above(4),
          "abort"),
    Fault("flip_offset_segv", "a kernel reading an input's storage from its start, not its offset, past the "
          "buffer's end (the storage-offset class of pytorch#148512, as a segfault)", ("aten::flip",),
          _storage_offset, "segfault"),
    Fault("mv_expanded_vector_abort", "the stride-0 matrix-product class of pytorch#180201 (MPSGraph given an "
          "expanded input), as an abort: mv of an expanded vector", ("aten::mv",), _mv_of_an_expanded_vector,
          "abort"),
    # issue 38 (argument extremes), the class of pytorch#189664 and #147613 (an int64
    # argument a kernel holds in 32 bits): found only by drawing an argument past int32
    Fault("triangle_diagonal_held_in_int32", "like pytorch#189664 and #147613: tril/triu with a diagonal past "
          "int32 computed with the diagonal wrapped to 32 bits", ("aten::tril", "aten::triu"),
          _diagonal_past_int32, "reimplement", instead=_triangle_of_an_int32_diagonal),
    # issue 38, the class of pytorch#188467 (CUDA: embedding_bag(mode="max")'s backward with int32
    # indices computes the row's offset in 32 bits and drops the gradient of a row past 2^31
    # elements): found only by drawing max's grad variant with int32 indices
    Fault("embedding_bag_max_backward_int32_wrong_row", "like pytorch#188467: embedding_bag(mode='max') "
          "backward with int32 indices sends each bag's gradient to the row after the one its max came from; "
          "the forward, int64 indices and sum/mean are right",
          ("aten::_embedding_bag_backward", "aten::_embedding_bag_dense_backward"),
          _bag_max_backward_of_int32_indices, "reimplement", instead=_bag_gradient_to_the_next_row),
    # the same class past the scaled 2^31 (the @huge class's embedding_bag_max@huge): only a
    # weight of more elements than the @large class makes, and a bag's max past that offset
    Fault("embedding_bag_max_backward_row_offset_past_int32", "the class of pytorch#188467 (CUDA "
          "embedding_bag(mode='max') backward with int32 indices computes the row's offset in 32 bits): for a "
          "weight of more elements than the @large class makes, the gradient of each element whose offset row * "
          "dim + column passes that limit (2^31 scaled to the @huge class's size here) is added where the offset "
          "wrapped; int64 indices, a smaller weight and the forward are right",
          ("aten::_embedding_bag_backward", "aten::_embedding_bag_dense_backward"),
          _bag_max_backward_past_huge_limit, "reimplement", instead=_bag_gradient_at_wrapped_offsets),
    # issue 38 (factories), modelled on pytorch#175966 ("arange times int64 wraps mod 2^32")
    # and #197673 ("arange past 2^32 leaves zeros"): found only by drawing int64 values
    # that large
    Fault("arange_wraps_int64_past_2_32", "like pytorch#175966 and #197673: an int64 arange whose values pass "
          "2^32 computed in 32-bit arithmetic (each value wrapped mod 2^32)", ("aten::arange",),
          _int64_arange_past_2_32, "reimplement", instead=_arange_in_32_bits),
)

# Faults that emulate legitimate behaviour: a campaign must report nothing for them.
NOT_BUGS = ("hypot_overflows_naively", "addcdiv_divides_first", "sum_half_accumulates_in_dtype", "tanh_caches_once", "fftn_splits_dims",
            "cosine_similarity_accepts_a_negative_eps", "round_nudged", "prod_pairwise", "embedding_renorm_accumulates_in_float32",
            "mul_casts_a_wider_0d_operand", "convolution_backward_multiplies_padding_taps",
            "complex_pow_through_exp_log", "copy_broadcast_cast_out_of_range_as_zero")


def _broad(name: str, effect: str, when: Trigger, what: str, message: str = "") -> Fault:
    return Fault(name, f"not a real bug: {what}", ("*",), when, effect, message=message)


# Broad faults: selectable by name (MPSFUZZ_FAULTS), never part of "all" (see the module
# docstring). Each hits every op the fuzzer knows, so tests can draw a finding of any op
# and variant from them.
BROAD_FAULTS: dict[str, Fault] = _registry(
    _broad("every_kernel_corrupt", "corrupt", _forward_kernel,
           "every forward kernel (not random) changes the first element of each output"),
    _broad("every_backward_kernel_corrupt", "corrupt", _in_backward,
           "every backward kernel changes the first element of each output"),
    _broad("every_random_kernel_skew", "skew", _forward_random_kernel,
           "every random kernel draws from a moved distribution"),
    _broad("every_kernel_raise", "raise", _in_forward, "every forward kernel raises",
           message="broad fault: the kernel failed"),
    _broad("every_backward_kernel_raise", "raise", _in_backward, "every backward kernel raises",
           message="broad fault: the backward kernel failed"),
    _broad("every_kernel_abort", "abort", _in_forward, "every forward kernel aborts the process"),
    _broad("every_backward_kernel_abort", "abort", _in_backward, "every backward kernel aborts the process"),
    _broad("every_kernel_hang", "hang", _in_forward, "every forward kernel never returns"),
    _broad("every_backward_kernel_hang", "hang", _in_backward, "every backward kernel never returns"),
    _broad("every_kernel_leak", "leak", _in_forward, "every forward kernel keeps 1 MiB alive"),
    _broad("every_backward_kernel_leak", "leak", _in_backward, "every backward kernel keeps 1 MiB alive"),
)


# --- the mode and the target --------------------------------------------------------

class FunctionFaultMode(TorchFunctionMode):
    """Applies the faults that name torch functions (see :attr:`Fault.on_functions`); every
    other call goes on as it is. While ``__torch_function__`` runs the mode is popped, so
    the real call inside a fault does not re-enter it."""

    def __init__(self, faults: Iterable[Fault] = (), fired: Counter | None = None):
        super().__init__()
        self.faults = tuple(faults)
        self.watched = {id(op) for f in self.faults for op in f.ops}
        self.fired = fired if fired is not None else Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if id(func) in self.watched:
            for fault in self.faults:
                if fault.triggered(func, args, kwargs):
                    self.fired[fault.name] += 1
                    return fault.apply(func, args, kwargs)
        return func(*args, **kwargs)


class FaultMode(DenseHigherOrderOps):
    """Runs every aten op as eager CPU does, except where a fault fires.

    While ``__torch_dispatch__`` runs, torch has popped this mode, so calling ``func``
    or other torch ops there does not re-enter it.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # Nothing is compiled under this mode. Left True, newer torch wraps
        # __torch_dispatch__ in _disable_dynamo, whose first call imports torch._dynamo:
        # two seconds more for every fresh interpreter (each repro verification).
        return False

    def __init__(self, faults: Iterable[Fault] = (), fired: Counter | None = None):
        super().__init__()
        self.faults = tuple(faults)
        self.fired = fired if fired is not None else Counter()

    def __enter__(self):
        # The emulated device has flex_attention's backward, as CUDA has (pytorch#190857
        # is a bug of it): eager CPU's public call refuses inputs that require grad ("does
        # not support backward on CPU"), a check of the device alone, which is lifted here
        # (the others kept: the check sees the inputs detached). The dense path it then
        # runs has a backward on every device.
        flex = sys.modules.get("torch.nn.attention.flex_attention")
        check = getattr(flex, "_validate_device", None)
        self.__dict__.setdefault("_flex_checks", []).append((flex, check))
        if check is not None:
            flex._validate_device = lambda q, k, v, _check=check: _check(q.detach(), k.detach(), v.detach())
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            flex, check = self._flex_checks.pop()
            if check is not None:
                flex._validate_device = check

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _POISONED:
            raise RuntimeError(POISON_MESSAGE)
        for fault in self.faults:
            if fault.triggered(func, args, kwargs):
                self.fired[fault.name] += 1
                return fault.apply(func, args, kwargs)
        return func(*args, **kwargs)


def _resolve(faults: Iterable[Fault | str]) -> tuple[Fault, ...]:
    out, unknown = [], []
    for f in faults:
        if isinstance(f, Fault):
            out.append(f)
        elif f in FAULTS:
            out.append(FAULTS[f])
        elif f in BROAD_FAULTS:
            out.append(BROAD_FAULTS[f])
        else:
            unknown.append(f)
    if unknown:
        raise ValueError(f"unknown fault(s): {', '.join(map(repr, unknown))}; "
                         f"known faults are {', '.join(FAULTS)}; broad faults {', '.join(BROAD_FAULTS)}")
    return tuple(out)


class FaultTarget:
    """Eager CPU under :class:`FaultMode`: the target interface of
    :mod:`mpsfuzz.targets`. ``faults`` are :class:`Fault` objects or names (None: all)."""

    device = "cpu"

    def __init__(self, faults: Sequence[Fault | str] | None = None):
        self.faults = _resolve(FAULTS.values() if faults is None else faults)
        self.name = "faulty-cpu" if self.faults else "clean-cpu"
        self.fired: Counter = Counter()  # fault name -> times it fired (in this process)

    def is_available(self) -> bool:
        return True

    def run(self, fn: Callable, *args, **kwargs) -> Any:
        on_functions = [f for f in self.faults if f.on_functions]
        on_aten = [f for f in self.faults if not f.on_functions]
        with FaultMode(on_aten, self.fired):
            if not on_functions:
                return fn(*args, **kwargs)
            with FunctionFaultMode(on_functions, self.fired):
                return fn(*args, **kwargs)

    def synchronize(self) -> None:
        if _POISONED:
            raise RuntimeError(POISON_MESSAGE)
        if _FAULT_AT_NEXT_SYNC:
            # The first synchronisation after the launch passes (the kernel was queued);
            # the assert surfaces at the next one, wherever that is.
            if _FAULT_AT_NEXT_SYNC[-1] == "armed":
                _POISONED.append(_FAULT_AT_NEXT_SYNC.pop(-2))
                raise RuntimeError(POISON_MESSAGE)
            _FAULT_AT_NEXT_SYNC.append("armed")

    def memory_allocated(self) -> int:
        return sum(t.nbytes for t in _LEAKED)

    def __repr__(self) -> str:
        names = ",".join(f.name for f in self.faults) or "none"
        return f"<target {self.name} on cpu, faults: {names}>"


def release_leaks() -> None:
    """Free what ``leak`` faults have kept alive (for tests)."""
    _LEAKED.clear()
    _CACHED.clear()


def faults_from_env(value: str | None) -> tuple[Fault, ...]:
    """The faults ``MPSFUZZ_FAULTS=value`` selects (None: the variable is unset)."""
    if value is None:
        return tuple(FAULTS.values())
    if value.strip().lower() in ("", "none"):
        return ()
    return _resolve([name.strip() for name in value.split(",") if name.strip()])


def target() -> FaultTarget:
    """Zero-argument factory for ``--target mpsfuzz.testing.faults:target``; the faults
    come from ``MPSFUZZ_FAULTS`` (unset: all; ``""``/``none``: none; else a comma list)."""
    return FaultTarget(faults_from_env(os.environ.get("MPSFUZZ_FAULTS")))
