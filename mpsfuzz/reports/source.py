"""Python source for an op call, for standalone repro scripts.

An op's callable is either torch's own (``torch.triu``: written by its public name) or a
small function of the catalogue (``lambda a, diagonal=0, **kw: torch.triu(a, diagonal,
**kw)``). A one-expression lambda is *inlined*: its parameters are replaced by the
arguments of the call, so the script reads ``torch.triu(x, 1)``, not a wrapper. Any
other function is copied into the script with the helpers it uses. Names the source
uses are resolved to what they are bound to (a torch module or function by its public
dotted name, a constant by its literal, an mpsfuzz helper by its own copied source), so
the script needs nothing but torch. A helper that prepares an op's inputs
(``generation/preparation.py``) is copied as the function it wraps; in a script for a
compiled target it keeps ``@torch.compiler.disable``, so that, as in the campaign, only
the op is compiled.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import keyword
import textwrap
import types

import torch

from ..generation.preparation import is_preparation, prepared_function

# Public namespaces where torch callables are looked up by identity.
_NAMESPACES = ("torch", "torch.linalg", "torch.special", "torch.fft", "torch.nn.functional", "torch.Tensor",
               "torch.masked", "torch.signal.windows", "torch.sparse")


class SourceError(ValueError):
    """The callable cannot be written as standalone source."""


def _module(path: str):
    obj = torch
    for part in path.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def public_name(obj) -> str | None:
    """``torch.triu`` for torch.triu, ``torch.nn.functional`` for that module, else None."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__ if obj.__name__.startswith("torch") else None
    if isinstance(obj, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        # torch.ops.aten._softmax_backward_data (OpInfo's internal ops)
        namespace, _, name = obj._schema.name.partition("::") if isinstance(obj, torch._ops.OpOverload) \
            else obj._qualified_op_name.partition("::")
        overload = f".{obj._overloadname}" if isinstance(obj, torch._ops.OpOverload) else ""
        return f"torch.ops.{namespace}.{name}{overload}"
    name = getattr(obj, "__name__", None)
    if not name:
        return None
    for path in _NAMESPACES:
        if getattr(_module(path), name, None) is obj:
            return f"{path}.{name}"
    # C builtins carry their namespace as a prefix (special_erfcx is torch.special.erfcx).
    for prefix, path in (("special_", "torch.special"), ("linalg_", "torch.linalg"), ("fft_", "torch.fft")):
        if name.startswith(prefix) and getattr(_module(path), name[len(prefix):], None) is obj:
            return f"{path}.{name[len(prefix):]}"
    return None


def literal(value) -> str | None:
    """Source for a constant argument, or None when it has none."""
    if isinstance(value, torch.dtype):
        return str(value)                                        # torch.float32
    if isinstance(value, float):
        if value != value:
            return "torch.nan"
        if value in (float("inf"), float("-inf")):
            return "torch.inf" if value > 0 else "-torch.inf"
        return repr(value)
    if isinstance(value, (bool, int, str, type(None))):
        return repr(value)
    if isinstance(value, complex):
        return f"complex({literal(value.real)}, {literal(value.imag)})"
    if isinstance(value, (tuple, list)):
        items = [literal(v) for v in value]
        if any(i is None for i in items):
            return None
        if isinstance(value, tuple):
            return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
        return f"[{', '.join(items)}]"
    if isinstance(value, torch.memory_format):
        return str(value)
    return None


def _function_node(fn) -> ast.AST:
    """The ``Lambda`` or ``FunctionDef`` node of ``fn`` in its own source file."""
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as exc:
        raise SourceError(f"no source for {fn!r}") from exc
    code = fn.__code__
    text = textwrap.dedent("".join(lines))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        # A lambda in the middle of a call spanning lines: parse the enclosing lines as
        # an expression list.
        try:
            tree = ast.parse("(\n" + text.strip().rstrip(",") + "\n)")
        except SyntaxError as exc:
            raise SourceError(f"cannot parse the source of {fn.__qualname__}") from exc
    wanted = ast.Lambda if code.co_name == "<lambda>" else ast.FunctionDef
    candidates = [n for n in ast.walk(tree) if isinstance(n, wanted)
                  and (wanted is ast.Lambda or n.name == code.co_name)]
    for node in candidates:
        args = node.args
        names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
        if args.vararg:
            names.append(args.vararg.arg)
        if args.kwarg:
            names.append(args.kwarg.arg)
        if tuple(names) == code.co_varnames[:len(names)] and len(names) == (
                code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 4) + bool(code.co_flags & 8)):
            return node
    raise SourceError(f"cannot find the source of {fn.__qualname__} (line {first})")


def _bound_names(node) -> set[str]:
    """Names a function node binds itself: parameters and local assignments."""
    args = node.args
    bound = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    bound |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            bound.add(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.Lambda)) and sub is not node:
            sub_args = sub.args
            bound |= {a.arg for a in sub_args.posonlyargs + sub_args.args + sub_args.kwonlyargs}
        elif isinstance(sub, ast.comprehension):
            bound |= {n.id for n in ast.walk(sub.target) if isinstance(n, ast.Name)}
    return bound


def _lookup(fn, name: str):
    code = fn.__code__
    if name in code.co_freevars and fn.__closure__:
        return True, fn.__closure__[code.co_freevars.index(name)].cell_contents
    if name in fn.__globals__:
        return True, fn.__globals__[name]
    if hasattr(builtins, name):
        return False, None  # a builtin: stays as it is
    raise SourceError(f"{fn.__qualname__} uses {name!r}, which is not defined")


class Rendering:
    """Collects what the script needs besides the call: helper functions (source) and
    the modules they use.

    A helper is named once per function object and every reference to it is rewritten
    to that name: a helper bound under another name (``_nz = nonzero_int_divisor``), a
    lambda (whose own name is ``<lambda>``) and two functions of one name from different
    modules all resolve. ``reserved`` are names the script binds itself (its inputs,
    ``actual``...), which a helper must not take. ``eager_preparation``: helpers that
    prepare an op's inputs run eagerly inside a compiled call (``@torch.compiler.disable``)."""

    def __init__(self, reserved=(), *, eager_preparation: bool = False):
        self.eager_preparation = eager_preparation
        self.helpers: dict[str, str] = {}
        self._names: dict[int, str] = {}   # id(function) -> its name in the script
        self._keep: list = []              # the functions named (their ids stay theirs)
        self.reserved = set(reserved)

    def _free_name(self, wanted: str) -> str:
        name = wanted if wanted.isidentifier() and not keyword.iskeyword(wanted) else "helper"
        taken = set(self.helpers) | self.reserved
        if name not in taken:
            return name
        return next(f"{name}_{i}" for i in range(2, 1000) if f"{name}_{i}" not in taken)

    def _resolve(self, fn, node) -> ast.AST:
        """``node`` (part of fn's source) with its free names replaced by what they are."""
        bound = _bound_names(node) if isinstance(node, (ast.Lambda, ast.FunctionDef)) else set()

        rendering = self

        def standalone(value, referenced_as: str, where: ast.AST) -> ast.AST:
            text = public_name(value) or literal(value)
            if text is None and callable(value):
                # The helper's name in the script, whatever this source calls it.
                named = rendering.helper(value, prefer=referenced_as.rsplit(".", 1)[-1])
                return ast.copy_location(ast.Name(id=named, ctx=ast.Load()), where)
            if text is None:
                raise SourceError(f"{fn.__qualname__} uses {referenced_as!r} = {value!r}, "
                                  "which has no standalone source")
            return ast.copy_location(ast.parse(text, mode="eval").body, where)

        class Replace(ast.NodeTransformer):
            def visit_Name(inner, name_node):
                if not isinstance(name_node.ctx, ast.Load) or name_node.id in bound or name_node.id == "torch":
                    return name_node
                found, value = _lookup(fn, name_node.id)
                if not found:
                    return name_node
                return standalone(value, name_node.id, name_node)

            def visit_Attribute(inner, attr):
                # ``module.helper`` of a module that is not torch's (``catalogue.f``,
                # ``dt.WIDER``): what the attribute is, like a name.
                base = attr.value
                if (isinstance(attr.ctx, ast.Load) and isinstance(base, ast.Name) and base.id not in bound
                        and base.id != "torch"):
                    found, value = _lookup(fn, base.id)
                    if found and isinstance(value, types.ModuleType) and public_name(value) is None:
                        if not hasattr(value, attr.attr):
                            raise SourceError(f"{fn.__qualname__} uses {base.id}.{attr.attr}, which is not defined")
                        return standalone(getattr(value, attr.attr), f"{base.id}.{attr.attr}", attr)
                inner.generic_visit(attr)
                return attr

        return Replace().visit(node)

    def helper(self, fn, name: str | None = None, *, prefer: str | None = None) -> str:
        """Copy a helper function (and the helpers it uses) into the script under
        ``name`` (default: the name its source gives it; a lambda: ``prefer``, the name
        it is referenced by); returns the name it has in the script."""
        eager = self.eager_preparation and is_preparation(fn)
        fn = prepared_function(fn)
        if not isinstance(fn, types.FunctionType):
            raise SourceError(f"{fn!r} is neither torch's nor a Python function")
        if id(fn) in self._names:
            return self._names[id(fn)]
        own = fn.__code__.co_name
        name = self._free_name(name or (prefer or "helper" if own == "<lambda>" else own))
        self._names[id(fn)] = name
        self._keep.append(fn)
        self.helpers[name] = ""  # reserve (recursion)
        node = _function_node(fn)
        if isinstance(node, ast.Lambda):
            source = ast.unparse(self._resolve(fn, node))
            self.helpers[name] = f"{name} = " + (f"torch.compiler.disable({source})" if eager else source)
        else:
            node.decorator_list = [ast.parse("torch.compiler.disable", mode="eval").body] if eager else []
            node.name = name
            if (len(node.body) > 1 and isinstance(node.body[0], ast.Expr)
                    and isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str)):
                node.body = node.body[1:]  # the docstring: the script is read for its code
            self.helpers[name] = ast.unparse(self._resolve(fn, node))
        return name

    def call(self, fn, args: list[str], kwargs: dict[str, str]) -> str:
        """Source of ``fn(*args, **kwargs)``; ``args`` and ``kwargs`` values are source.
        A function that knows its own call's source (``fn.render_call``: OpInfo ops,
        whose kwargs encode the real call) gives it."""
        render_call = getattr(fn, "render_call", None)
        if callable(render_call):
            return render_call(self, args, kwargs)
        name = public_name(fn)
        if name is not None:
            return _format_call(name, args, kwargs)
        if isinstance(fn, types.FunctionType) and fn.__code__.co_name == "<lambda>":
            node = _function_node(fn)
            inlined = self._inline(fn, node, args, kwargs)
            if inlined is not None:
                return inlined
        if not isinstance(fn, types.FunctionType):
            raise SourceError(f"{fn!r} is neither torch's nor a Python function")
        # Not inlinable (e.g. *args, or statements): copied as a named function.
        return _format_call(self.helper(fn, "op" if fn.__code__.co_name == "<lambda>" else None), args, kwargs)

    def _inline(self, fn, node: ast.Lambda, args: list[str], kwargs: dict[str, str]) -> str | None:
        params = node.args
        if params.vararg or params.posonlyargs:
            return None
        positional = [a.arg for a in params.args]
        if len(args) > len(positional):
            return None
        binding: dict[str, ast.AST] = {}
        for name, text in zip(positional, args):
            binding[name] = ast.parse(text, mode="eval").body
        rest = dict(kwargs)
        defaults = dict(zip(positional[len(positional) - len(params.defaults):], params.defaults))
        kw_defaults = {a.arg: d for a, d in zip(params.kwonlyargs, params.kw_defaults)}
        for name in positional[len(args):] + [a.arg for a in params.kwonlyargs]:
            if name in rest:
                binding[name] = ast.parse(rest.pop(name), mode="eval").body
            elif name in defaults or kw_defaults.get(name) is not None:
                binding[name] = self._resolve(fn, defaults.get(name) or kw_defaults[name])
            else:
                return None
        if rest and params.kwarg is None:
            return None
        kwarg_name = params.kwarg.arg if params.kwarg else None
        body = self._resolve(fn, node).body  # free names first: parameters stay names here

        class Substitute(ast.NodeTransformer):
            def visit_Call(inner, call):
                keywords = []
                for kw in call.keywords:
                    if kw.arg is None and isinstance(kw.value, ast.Name) and kw.value.id == kwarg_name:
                        keywords += [ast.keyword(arg=k, value=ast.parse(v, mode="eval").body) for k, v in rest.items()]
                    else:
                        keywords.append(kw)
                call.keywords = keywords
                inner.generic_visit(call)
                return call

            def visit_Name(inner, name_node):
                if isinstance(name_node.ctx, ast.Load) and name_node.id in binding:
                    return ast.copy_location(binding[name_node.id], name_node)
                if isinstance(name_node.ctx, ast.Load) and name_node.id == kwarg_name:
                    raise _NotInlinable
                return name_node

        try:
            return ast.unparse(Substitute().visit(body))
        except _NotInlinable:
            return None


class _NotInlinable(Exception):
    pass


def _format_call(name: str, args: list[str], kwargs: dict[str, str]) -> str:
    parts = list(args) + [f"{k}={v}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def text_literal(text: str) -> str:
    """A Python literal of ``text``: a raw triple-quoted string a reader can read where
    that spells it exactly, else its repr."""
    quotes = "'" * 3
    readable = "r" + quotes + text + quotes
    try:
        if ast.literal_eval(readable) == text:
            return readable
    except (SyntaxError, ValueError):
        pass
    return repr(text)
