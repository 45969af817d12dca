"""The upstream table: failures known upstream (in PyTorch), keyed by device, op and
dtype, with the reason and an issue link.

Not to be confused with the findings already in a corpus, which a campaign matches new
failing cases against (campaign/known_findings.py's ``FoundBug``: a sighting, not a new bug).

A finding that matches a ``known-bug`` entry is recorded but marked known (it links to
the upstream issue and is not counted as new); one that matches an ``unimplemented`` or
``undefined`` entry is not a bug at all and is never recorded. Entries match narrowly:
the loader refuses one that covers every oracle and kind of its ops, and one that would
suppress a crash, hang or leak. The built-in table ships
in ``mpsfuzz/data/known_failures.json``; ``--known FILE`` adds a table of the same
format (users keep their own triage there).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

TABLE_FORMAT = 1
STATUSES = ("known-bug", "unimplemented", "undefined")
SUPPRESSED = ("unimplemented", "undefined")
# A crash, a hang or a leak is never undefined behaviour or a missing kernel: entries
# that would suppress one are refused.
NEVER_SUPPRESSED = ("crash", "hang", "leak")
VARIANTS = ("*", "functional", "method", "inplace", "out", "out-strided", "out-resized", "grad", "autocast",
            "out-cast")


class UpstreamTableError(ValueError):
    pass


@dataclass(frozen=True)
class UpstreamEntry:
    id: str
    device: str
    ops: tuple[str, ...]
    dtypes: tuple[str, ...]
    oracle: str
    kind: str
    layout: str
    status: str
    reason: str
    link: str
    fixed_in: str | None = None
    variant: str = "*"          # how the op is called (out-strided, ...) or any
    # A view bit some input carries ("neg", "conj") or any; "compiled": only on a compiled
    # target (a bug of torch.compile, whatever the op: "ops" may then be ["*"]).
    bit: str = "*"
    target: str = "*"

    def to_json(self) -> dict:
        return {"id": self.id, "status": self.status, "reason": self.reason, "link": self.link}


def _version_tuple(v: str) -> tuple[int, ...]:
    out = []
    for part in v.split("+")[0].split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
        if not part.isdigit():
            break
    return tuple(out)


def parse_table(data, source: str) -> list[UpstreamEntry]:
    if not isinstance(data, dict) or data.get("format") != TABLE_FORMAT:
        raise UpstreamTableError(f"{source}: not a known-failure table of format {TABLE_FORMAT}")
    out = []
    for i, e in enumerate(data.get("entries", [])):
        try:
            entry = UpstreamEntry(
                id=str(e["id"]), device=str(e.get("device", "*")), ops=tuple(e["ops"]),
                dtypes=tuple(e.get("dtypes", ())), oracle=str(e.get("oracle", "*")),
                kind=str(e.get("kind", "*")), layout=str(e.get("layout", "*")), status=str(e["status"]),
                reason=str(e["reason"]), link=str(e.get("link", "")), fixed_in=e.get("fixed_in"),
                variant=str(e.get("variant", "*")), bit=str(e.get("bit", "*")), target=str(e.get("target", "*")))
        except (KeyError, TypeError) as exc:
            raise UpstreamTableError(f"{source}: entry {i} lacks field {exc}") from None
        _check_narrow(entry, source)
        out.append(entry)
    return out


def _check_narrow(entry: UpstreamEntry, source: str) -> None:
    """Entries match narrowly: each names the oracle or the kind of failure it covers (one
    with both ``*`` would hide every failure of its ops, crashes included), and none
    suppresses a crash, hang or leak."""
    where = f"{source}: entry {entry.id!r}"
    if entry.status not in STATUSES:
        raise UpstreamTableError(f"{where} has status {entry.status!r}; expected one of {', '.join(STATUSES)}")
    if entry.oracle == "*" and entry.kind == "*":
        raise UpstreamTableError(f"{where} matches every failure of {', '.join(entry.ops)} (oracle and kind are "
                              f"both '*'): name the oracle or the kind it covers")
    if not entry.ops:
        raise UpstreamTableError(f"{where} names no op")
    if "*" in entry.ops and (entry.bit == "*" or entry.target == "*" or entry.status != "known-bug"):
        raise UpstreamTableError(f"{where} names every op ('*'): only a known bug of a compiled target "
                                 f"on a view bit may (give 'bit' and 'target': 'compiled')")
    if entry.bit not in ("*", "neg", "conj") or entry.target not in ("*", "compiled"):
        raise UpstreamTableError(f"{where} has bit {entry.bit!r} / target {entry.target!r}; expected "
                                 f"'*', 'neg' or 'conj' / '*' or 'compiled'")
    if entry.variant not in VARIANTS:
        raise UpstreamTableError(f"{where} has variant {entry.variant!r}; expected one of {', '.join(VARIANTS)}")
    if entry.status in SUPPRESSED and (entry.oracle in NEVER_SUPPRESSED or entry.kind in NEVER_SUPPRESSED):
        raise UpstreamTableError(f"{where} would suppress a {entry.oracle if entry.oracle != '*' else entry.kind}: "
                              f"a crash, hang or leak is never {entry.status}")


def builtin_table() -> list[UpstreamEntry]:
    text = resources.files("mpsfuzz").joinpath("data/known_failures.json").read_text()
    return parse_table(json.loads(text), "built-in known_failures.json")


def load_tables(extra: list[str | Path] = ()) -> list[UpstreamEntry]:
    table = builtin_table()
    for path in extra:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise UpstreamTableError(f"--known {path}: cannot read it ({str(exc).splitlines()[0]})") from None
        table += parse_table(data, f"--known {path}")
    return table


def device_kind(device: str) -> str:
    return str(device).split(":")[0]


def match(table: list[UpstreamEntry], *, device: str, op: str, dtypes, oracle: str, kind: str,
          layout_class: str, torch_version: str, variant: str = "functional", bits=(),
          compiled: bool = False) -> UpstreamEntry | None:
    """The first entry of ``table`` the failure matches; ``bits``: the view bits the
    case's inputs carry, ``compiled``: the target is a compiled one."""
    dev = device_kind(device)
    for e in table:
        if e.device not in ("*", dev) or (op not in e.ops and "*" not in e.ops):
            continue
        if (e.bit != "*" and e.bit not in bits) or (e.target == "compiled" and not compiled):
            continue
        if e.variant not in ("*", variant):
            continue
        if e.status in SUPPRESSED and (oracle in NEVER_SUPPRESSED or kind in NEVER_SUPPRESSED):
            continue
        if e.dtypes and not set(dtypes) & set(e.dtypes):
            continue
        if e.oracle not in ("*", oracle) or e.kind not in ("*", kind) or e.layout not in ("*", layout_class):
            continue
        if e.fixed_in and _version_tuple(torch_version) >= _version_tuple(e.fixed_in):
            continue
        return e
    return None
