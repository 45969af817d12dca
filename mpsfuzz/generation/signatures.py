"""The documented parameters of a public torch function, read from the installed torch.

Three sources, tried in order, so that the parameters are those of the torch that runs
(an older torch lacks ``enable_gqa``; it is then not a parameter, not a gap):

1. ``inspect.signature``, for functions written in Python (``F.interpolate``), unless it
   only says ``(*args, **kwargs)`` (``F.max_pool2d``'s boolean dispatch);
2. the documented signature: a line of the docstring shaped like a call
   (``add(input, other, *, alpha=1, out=None) -> Tensor``; a Tensor method's omits
   ``self``, which is added back). A function of several overloads documents each
   (``torch.max``): the first that fits what the op passes is taken;
3. the aten schema (``aten::lstm.input(Tensor input, Tensor[] hx, ...)``), for the
   functions torch leaves undocumented.

A table may also give the signature text itself (an operator such as ``x ^ scalar`` has
no docstring and no schema of its own name).
"""
from __future__ import annotations

import ast
import functools
import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch


class _Required:
    """The default of a parameter that has none."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Required()


@dataclass(frozen=True)
class Unparsed:
    """A documented default that is not a Python literal (``torch.strided``,
    ``torch.preserve_format``): compared by its text only."""

    text: str

    def __repr__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Parameter:
    name: str
    default: Any = REQUIRED
    keyword_only: bool = False
    # ``*size`` of ``torch.rand(*size, ...)``: any number of positional values.
    variadic: bool = False
    # The documented type where a source gives one (the schema's "bool", an annotation).
    annotation: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED and not self.variadic


@dataclass(frozen=True)
class Signature:
    function: str                     # the dotted name, e.g. "torch.nn.functional.interpolate"
    parameters: tuple[Parameter, ...]
    source: str                       # "inspect", "docstring", "schema" or "declared"

    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    def get(self, name: str) -> Parameter | None:
        return next((p for p in self.parameters if p.name == name), None)


class SignatureUnknown(LookupError):
    """No source gives the function's parameters (or none fits the op's call)."""


def resolve(dotted: str) -> Callable:
    """``"torch.nn.functional.interpolate"`` -> the function (AttributeError if this torch
    lacks it)."""
    head, *rest = dotted.split(".")
    if head != "torch":
        raise ValueError(f"{dotted!r}: only torch functions are catalogued")
    obj: Any = torch
    for part in rest:
        obj = getattr(obj, part)
    return obj


# -- the documented signature text ---------------------------------------------------------

_CALL = re.compile(r"^\s*(?:\.\.\s+function::\s+)?(?P<name>[A-Za-z_][\w.]*)\((?P<rest>.*)$")


def _outside_quotes(text: str, depth: int = 0):
    """(index, character, bracket depth after it) for each character of ``text`` outside
    quotes, starting at ``depth``."""
    quote = None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        else:
            depth += (ch in "([{") - (ch in ")]}")
            yield i, ch, depth


def _balanced(text: str) -> str | None:
    """The text inside the parentheses that ``text`` continues (it starts just after
    the opening one), or None where they do not close on this line."""
    for i, _, depth in _outside_quotes(text, 1):
        if depth == 0:
            return text[:i]
    return None


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes."""
    parts, start = [], 0
    for i, ch, depth in _outside_quotes(text):
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_default(text: str) -> Any:
    """A documented default as a Python value where it is a literal, else ``Unparsed``."""
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    if text in ("inf", "math.inf", "float('inf')"):
        return float("inf")
    return Unparsed(text)


def _optional(annotation: str) -> bool:
    return "Optional[" in annotation or "None" in annotation


def parse_parameters(params_text: str) -> tuple[Parameter, ...]:
    """The parameters of a documented parameter list: ``input, other, *, alpha=1``.
    Type annotations (``p: float = 2``) and ``/`` are dropped; ``*`` makes the rest
    keyword-only; ``*size`` is a variadic parameter (and makes the rest keyword-only)."""
    out: list[Parameter] = []
    keyword_only = False
    # (a docstring's reST escapes its stars with a backslash)
    for token in _split_top(params_text.replace("\\", "")):
        if token == "/":
            continue
        if token == "*":
            keyword_only = True
            continue
        if token.startswith("**"):
            continue
        if token.startswith("*"):
            out.append(Parameter(token[1:].split(":")[0].strip(), variadic=True))
            keyword_only = True
            continue
        name, default = token, REQUIRED
        if "=" in token:
            name, _, value = token.partition("=")
            default = parse_default(value)
        name, _, annotation = name.partition(":")
        name = name.strip()
        if default is REQUIRED and (_optional(annotation) or name == "out"):
            default = None   # documented as optional without its default ("out: Optional[Tensor]")
        if name.isidentifier():
            out.append(Parameter(name, default, keyword_only, annotation=annotation.strip()))
    return tuple(out)


def documented_signatures(fn: Callable, name: str | None = None) -> list[tuple[Parameter, ...]]:
    """Every signature the docstring of ``fn`` documents for ``name`` (default: its
    ``__name__``), in the order documented: lines shaped like ``name(params) -> ...``
    (a signature may run over several lines; calls in examples are not signatures:
    something other than ``->`` follows them)."""
    doc = getattr(fn, "__doc__", None) or ""
    wanted = {n.split(".")[-1] for n in (name, getattr(fn, "__name__", None)) if n}
    lines = doc.splitlines()
    out = []
    for i, line in enumerate(lines):
        m = _CALL.match(line)
        if not m or m.group("name").split(".")[-1] not in wanted:
            continue
        rest, inner, j = m.group("rest"), None, i
        while inner is None and j < min(len(lines), i + 6):
            inner = _balanced(rest)
            if inner is None:
                j += 1
                rest += " " + (lines[j].strip() if j < len(lines) else "")
        if inner is None:
            continue
        after = rest[len(inner) + 1:].strip()
        if after and not after.startswith("->"):
            continue
        out.append(parse_parameters(inner))
    return out


def signature_text(text: str) -> tuple[Parameter, ...]:
    """The parameters of a declared signature ``name(params)``."""
    m = _CALL.match(text)
    inner = _balanced(m.group("rest")) if m else None
    if inner is None:
        raise ValueError(f"{text!r} is not a signature of the form name(params)")
    return parse_parameters(inner)


# -- the sources ------------------------------------------------------------------------------

def _from_inspect(fn: Callable) -> tuple[Parameter, ...] | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    kinds = {p.kind for p in sig.parameters.values()}
    if kinds <= {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}:
        return None   # a dispatcher's (*args, **kwargs): not the documented parameters
    out = []
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            out.append(Parameter(p.name, variadic=True))
            continue
        default = REQUIRED if p.default is inspect.Parameter.empty else p.default
        annotation = "" if p.annotation is inspect.Parameter.empty else str(p.annotation)
        out.append(Parameter(p.name, default, p.kind is inspect.Parameter.KEYWORD_ONLY, annotation=annotation))
    return tuple(out)


def _schema_default(argument) -> Any:
    has = getattr(argument, "has_default_value", None)
    if (has() if has is not None else argument.default_value is not None):
        return argument.default_value
    return REQUIRED


def _from_schema(op_name: str) -> list[tuple[Parameter, ...]]:
    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{op_name}")
    except RuntimeError:
        return []
    out = []
    for schema in schemas:
        if schema.overload_name.endswith("out"):
            continue
        out.append(tuple(Parameter(a.name, _schema_default(a), bool(a.kwarg_only), annotation=str(a.type))
                         for a in schema.arguments))
    return out


def _is_method(dotted: str) -> bool:
    return dotted.startswith("torch.Tensor.")


def candidates(dotted: str, declared: str | None = None) -> list[tuple[tuple[Parameter, ...], str]]:
    """Every signature known for ``dotted``, each with its source, best first."""
    if declared is not None:
        return [(signature_text(declared), "declared")]
    fn = resolve(dotted)
    found = _from_inspect(fn)
    if found is not None:
        return [(found, "inspect")]
    short = dotted.rsplit(".", 1)[-1]
    docs = documented_signatures(fn, short)
    if docs:
        if _is_method(dotted):  # a Tensor method's docstring omits self
            docs = [(Parameter("self"),) + d if not d or d[0].name != "self" else d for d in docs]
        return [(d, "docstring") for d in docs]
    return [(s, "schema") for s in _from_schema(short)]


def signature(dotted: str, *, declared: str | None = None,
              fits: Callable[[Signature], bool] | None = None) -> Signature:
    """The signature of ``dotted``: the first known one that ``fits`` (default: the
    first). Raises SignatureUnknown where none is known or none fits."""
    found = [Signature(dotted, params, source) for params, source in _candidates(dotted, declared)]
    if not found:
        raise SignatureUnknown(f"{dotted}: no signature (no inspect signature, docstring or aten schema)")
    for sig in found:
        if fits is None or fits(sig):
            return sig
    raise SignatureUnknown(f"{dotted}: none of its {len(found)} documented signature(s) fits the op's call")


@functools.lru_cache(maxsize=None)
def _candidates(dotted: str, declared: str | None) -> tuple:
    return tuple(candidates(dotted, declared))


def binds(sig: Signature, tensors: int, names: Iterable[str]) -> bool:
    """Whether ``sig`` takes keyword arguments ``names`` and ``tensors`` positional
    inputs besides, with every required parameter given."""
    names = set(names)
    params = {p.name for p in sig.parameters}
    if not names <= params:
        return False
    free = [p for p in sig.parameters if p.name not in names and not p.keyword_only]
    if any(p.variadic for p in free):
        return True
    if len(free) < tensors:
        return False
    unbound = free[tensors:] + [p for p in sig.parameters if p.keyword_only and p.name not in names]
    return all(not p.required for p in unbound)
