"""A standalone script of one aten call: the kernel-level repro of a localised finding.

The call is ``torch.ops.<ns>.<name>.<overload>(...)`` on tensors built with the exact
storages, sizes, strides and storage offsets the kernel saw (the storage as a literal,
then ``as_strided``: views of one storage stay views of one storage), on the device and
on CPU, and the two are compared as the localiser compared them: the output or the
written argument that diverged, the storage the kernel should not have written, the
error raised on one side only, or (crashes, hangs) the call alone. The device call's line
ends with ``# device under test``, like the finding's own repro (reports/repro.py), so
``python -m mpsfuzz.reports.shim TARGET SCRIPT`` runs it inside a ``module:attr`` target.
``expect`` says what running it shows when it reproduces (as reports/verify.py judges).
"""
from __future__ import annotations

from .. import __version__

MARKER = "# device under test"   # the same marker as reports/repro.py's (the shim looks for it)


class ReproUnavailable(ValueError):
    pass


def _number(value) -> str:
    if isinstance(value, dict):
        if "float" in value:
            return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(value["float"], f"float({value['float']!r})")
        if "complex" in value:
            re, im = value["complex"]
            return f"complex({_number(re)}, {_number(im)})"
        raise ReproUnavailable(f"no literal for {value!r}")
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return repr(value)
    return repr(value)


class _Names:
    """Tensor arguments in call order: ``x0, x1...`` on the device, ``c0, c1...`` on CPU."""

    def __init__(self, device_type: str):
        self.device_type = device_type
        self.tensors: list[dict] = []          # in call order (rendering the device call)
        self._seen = {"x": 0, "c": 0}

    def render(self, d: dict, side: str) -> str:
        kind = d.get("kind")
        if kind == "tensor":
            if d.get("storage") is None:
                raise ReproUnavailable("a tensor argument whose storage was not recorded")
            position = self._seen[side]
            self._seen[side] += 1
            if side == "x":
                self.tensors.append(d)
            return f"{side}{position}"
        if kind in ("list", "tuple"):
            if d.get("items") is None:
                raise ReproUnavailable(f"a {kind} of {d.get('length')} arguments: too long to record")
            items = [self.render(v, side) for v in d["items"]]
            if kind == "tuple":
                return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
            return "[" + ", ".join(items) + "]"
        if kind == "dtype":
            return f"torch.{d['name']}"
        if kind == "device":
            if side == "c":
                return "'cpu'"
            return "device" if d["type"] == self.device_type else repr(d["type"])
        if kind in ("layout", "memory_format"):
            return f"torch.{d['name']}"
        if kind == "value":
            value = d["value"]
            return repr(value) if isinstance(value, str) or value is None else _number(value)
        raise ReproUnavailable(f"no literal for the argument {d.get('repr', d)!r}")


def _call_source(kernel: str, call: dict, names: _Names, side: str) -> str:
    namespace, _, rest = kernel.partition("::")
    name, _, overload = rest.rpartition(".")
    args = [names.render(a, side) for a in call["args"]]
    kwargs = [f"{k}={names.render(v, side)}" for k, v in call["kwargs"].items()]
    return f"torch.ops.{namespace}.{name}.{overload}({', '.join(args + kwargs)})"


def _storage_lines(call: dict, with_cpu: bool) -> list[str]:
    lines = []
    for s in call["storages"]:
        if s.get("values") is None:
            raise ReproUnavailable(f"storage {s['index']} has {s['numel']} elements: too large for a literal")
        dtype = "complex32" if s["dtype"] == "complex32" else s["dtype"]
        values = ", ".join(_number(v) for v in s["values"])
        lines.append(f"s{s['index']} = torch.tensor([{values}], dtype=torch.{dtype}, device=device)")
    if with_cpu:
        lines += [f"cs{s['index']} = s{s['index']}.to('cpu', copy=True)" for s in call["storages"]]
    return lines


def _tensor_lines(tensors: list[dict], storages: dict, prefix: str, storage_prefix: str) -> list[str]:
    lines = []
    for i, t in enumerate(tensors):
        s = storages[t["storage"]]
        view = f"{storage_prefix}{t['storage']}"
        if t["dtype"] != s["dtype"]:
            raise ReproUnavailable("a tensor viewing a storage of another dtype")
        if t.get("neg"):
            raise ReproUnavailable("a tensor with the negative bit set")
        expr = f"{view}.as_strided({tuple(t['shape'])}, {tuple(t['stride'])}, {t['offset']})"
        if t.get("conj"):
            expr += ".conj()"
        lines.append(f"{prefix}{i} = {expr}")
    return lines


def _output(expr: str, where: dict) -> str:
    if where.get("outputs", 1) > 1:
        return f"{expr}[{where['output']}]"
    return expr


def kernel_script(record: dict, *, device: str, target_name: str) -> dict:
    """``{"script", "expect", "lines"}`` for a localisation record of status kernel."""
    call, kernel, kind = record.get("call"), record["kernel"], record["divergence"]
    if not call:
        raise ReproUnavailable("the call's arguments were not recorded")
    device_type = device.split(":")[0]
    names = _Names(device_type)
    process = kind in ("crash", "hang")
    device_call = _call_source(kernel, call, names, "x")
    cpu_call = None if process else _call_source(kernel, call, names, "c")
    storages = {s["index"]: s for s in call["storages"]}
    tol = call.get("tolerance") or {"rtol": 0.0, "atol": 0.0}
    close = f"rtol={tol['rtol']:g}, atol={tol['atol']:g}, equal_nan=True, check_device=False"
    body = [f"device = {device!r}"] + _storage_lines(call, with_cpu=not process)
    body += _tensor_lines(names.tensors, storages, "x", "s")
    if not process:
        body += _tensor_lines(names.tensors, storages, "c", "cs")
    expect: dict = {"outcome": "assertion"}
    where = record.get("where") or {}
    if kind == "crash":
        body.append(f"{device_call}  {MARKER}")
        expect = {"outcome": "signal", "signal": str(record.get("signal") or "")}
    elif kind == "hang":
        body.append(f"{device_call}  {MARKER}")
        expect = {"outcome": "timeout"}
    elif kind == "raises-on-device":
        body += [f"expected = {cpu_call}  # eager CPU: works",
                 f"actual = {device_call}  {MARKER}"]
        error = call.get("error") or {}
        expect = {"outcome": "raises"}
        if error.get("type"):
            expect.update(type=error["type"], message=str(error.get("message", "")).splitlines()[0][:80]
                          if error.get("message") else "")
    elif kind == "raises-on-cpu":
        body += [f"actual = {device_call}  {MARKER}",
                 "print('the device returned:', actual)",
                 f"expected = {cpu_call}  # eager CPU raises"]
        expect = {"outcome": "raises", "stdout": "the device returned:"}
    else:
        body += [f"actual = {device_call}  {MARKER}", f"expected = {cpu_call}  # eager CPU"]
        if "storage" in where:
            k = where["storage"]
            what = f"`{where['argument']}`" if where.get("argument") else "the arguments"
            body += [f"print('storage under {what} after the call, on the device:', s{k}, 'and on CPU:', cs{k}, "
                     "sep='\\n')",
                     f"torch.testing.assert_close(s{k}.cpu(), cs{k}, {close})  # the kernel may not write it"]
        elif "argument" in where:
            i = where["position"]
            body += [f"print('argument `{where['argument']}` after the call, on the device:', x{i}, "
                     f"'and on CPU:', c{i}, sep='\\n')",
                     f"torch.testing.assert_close(x{i}, c{i}, {close})"]
        else:
            a, e = _output("actual", where), _output("expected", where)
            body.append(f"print('device:', {a}, 'CPU:', {e}, sep='\\n')")
            if kind == "wrong-memory-format":
                body.append(f"assert {a}.stride() == {e}.stride(), "
                            f"f'strides {{{a}.stride()}} on the device, {{{e}.stride()}} on CPU'")
            else:
                body.append(f"torch.testing.assert_close({a}, {e}, {close})")
    header = [f"# mpsfuzz {__version__} kernel-level repro: {kernel} ({kind}) on {target_name} ({device}).",
              "# The one aten call where the finding's failure starts, on tensors with the exact storage, "
              "strides and offset it got.",
              f"# Lines marked '{MARKER}' run on the target."]
    text = "\n".join(header + ["import torch", "", "nan, inf = float('nan'), float('inf')"] + body) + "\n"
    lines = sum(1 for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
                and not line.startswith(("import ", "from ")))
    return {"script": text, "expect": expect, "lines": lines}
