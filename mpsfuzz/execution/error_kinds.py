"""What an error raised by an op says about the backend: a documented limitation
("unsupported": no kernel for this dtype, a feature the backend does not have), a device
fault that poisons the process's device context, or neither (an ordinary error the
oracles compare between the two sides).

Unsupported combinations are counted and listed, never reported as bugs: a backend may
lack a kernel, it may not fail silently. The patterns below are the phrasings torch
2.6-2.13 uses on CPU, CUDA and MPS (tests/test_error_kinds.py lists real messages); an
error that merely *contains* "unsupported" is not one of them when it rejects the input
itself (aliasing of an input and an output, say).
"""
from __future__ import annotations

import re

_MEMORY_PATTERNS = (r"can't allocate memory",         # eager CPU's DefaultCPUAllocator
                    r"\bout of memory\b")               # CUDA out of memory; MPS backend out of memory
_MEMORY = re.compile("|".join(_MEMORY_PATTERNS), re.IGNORECASE)

_UNSUPPORTED = re.compile("|".join([
    r"not implemented for '",                           # AT_DISPATCH: "lt_cpu" not implemented for 'UInt32'
    r"not (?:currently |yet )?implemented for (?:the )?\w+ (?:device|backend)",
    r"is not currently implemented",                    # MPS: The operator 'aten::x' is not currently implemented
    r"could not run 'aten::",                           # no kernel registered for the backend
    r"\bno kernel\b",
    r"\b(?:is|are) not (?:yet )?supported\b",           # HalfTensor is not supported; ... are not supported on CUDA
    r"\bnot (?:yet )?supported (?:on|for|with|by|in|when)\b",
    r"\b(?:does not|doesn't|do not|don't|cannot) (?:yet )?(?:have )?support\b",
    r"\bunsupported (?!operation)\w+",                  # unsupported dtype / scalar type / border padding mode
    r"\bis unsupported\b",
    r"\bonly (?:supports?|works|implemented|available)\b",  # cuFFT only supports powers of two in half precision
    r"\bnot yet implemented\b",
    r"\bcan only be called in training mode\b",      # cuDNN RNN backward: a mode the backend lacks
    r"\bnyi\b",
    # Out of memory: a capacity of this machine (a large-size case whose kernel makes a
    # dense copy of a stride-0 input), not a wrong answer.
    *_MEMORY_PATTERNS,
]), re.IGNORECASE)

# Errors about the input itself, whatever the backend: both sides should raise them.
_NOT_UNSUPPORTED = re.compile("|".join([
    r"unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory",
]), re.IGNORECASE)

# Errors after which the device context is unusable (CUDA's sticky errors; a failed
# Metal command buffer): every later call in this process would fail the same way, so
# the worker reports the case and is replaced before the next one.
_DEVICE_FAULT = ("device-side assert", "illegal memory access", "unspecified launch failure",
                 "misaligned address", "illegal instruction", "command buffer exited with error",
                 "mtlcommandbuffer")


def is_unsupported_message(message: str) -> bool:
    return bool(_UNSUPPORTED.search(message)) and not _NOT_UNSUPPORTED.search(message)


def is_unsupported(exc: BaseException) -> bool:
    """'This device/dtype has no kernel for the op' (or lacks the feature): counted, never a bug.
    A compiler's failure (Dynamo's ``BackendCompilerFailed``) is judged by the error its
    backend raised, its ``inner_exception``: Inductor lowering ``torch.logspace`` with a
    negative base through torch's decomposition, which raises NotImplementedError for
    one, lacks the feature as an eager backend without the kernel does."""
    inner = getattr(exc, "inner_exception", None)
    if isinstance(inner, BaseException) and inner is not exc:
        return is_unsupported(inner)
    return isinstance(exc, NotImplementedError) or is_unsupported_message(str(exc))


def is_memory_exhausted(exc: BaseException) -> bool:
    """The host or the device ran out of memory: a capacity of the machine, not an answer."""
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError" \
        or bool(_MEMORY.search(str(exc)))


def is_device_fault(message: str) -> bool:
    text = message.lower()
    return any(h in text for h in _DEVICE_FAULT)
