"""Bugs: findings grouped by cause, so that one bug is one report.

A finding is one symptom of one public op (``torch.matmul`` gives wrong values when ...).
One faulty kernel shows up in every public op that calls it, and one faulty call can
show two symptoms (CUDA ``linalg_eig`` on a transposed input: wrong eigenvalues, which
the ``values`` oracle sees, and the input overwritten, which ``variants`` sees). The
localiser (triage/localise.py) names the aten kernel where each finding's failure
starts; this module groups findings by it.

**The bug key.** Two findings are one bug when all of these agree:

- who is wrong (the target, or the CPU reference the float64 arbiter blamed);
- the device kind (``mps``, ``cuda``, ``cpu``): one kernel name is a different kernel
  on each backend; for eager CPU's bug (``cpu-bug``) it is ``cpu``, whichever device
  found it;
- the kernel's family: ``aten::linalg_eig`` for ``aten::linalg_eig.default`` and
  ``aten::linalg_eig.out``, ``aten::mul`` for ``aten::mul.Tensor`` and ``aten::mul_.Tensor``
  (the functional, ``out=`` and in-place forms of an op share one implementation in most
  backends); which form the localised call was (``out``, ``inplace``) is kept as a
  condition, ``form:out`` / ``form:inplace``, below; kernels that backends implement as
  one (``SIBLINGS``: the bitwise and/or/xor, triu and tril, ...) share one family;
- the class of its divergence: ``wrong`` (wrong values, shape, dtype or memory format,
  or writes to what it may not write), ``raises`` (an error on the device only),
  ``accepts`` (CPU raises, the device does not), ``crash``, ``hang``. Not the oracle and
  not the exact kind: wrong values and an overwritten input of one call are one bug;
- and their conditions match, one set covering the other (below).

**Matching conditions.** Ablation's conditions say what the *public op's* inputs need
for the failure (docs/corpus.md). Part of them only says how that op reaches the kernel,
and is normalised away: which input is awkward (``layout:1`` of ``addmm`` may be
``layout:0`` of ``mm``: both become ``layout``; ``0-d:I`` becomes ``0-d``), the rank
threshold (``rank>=R`` becomes ``rank``: an op may add or drop dims before the kernel),
and how the op was called or which argument was passed (``variant:*`` and ``kwarg:*``
are dropped: they are the route; what the kernel sees of them is its form, added as
``form:out`` or ``form:inplace`` when the localised call is such an overload). What is
left (``layout``, ``empty``, ``0-d``, ``rank``, ``nonfinite``, ``specials``,
``negative``, ``form:*`` and the dtype restrictions) is a property of the call that
reaches the kernel.

One finding's set *covers* another's when each of its conditions is also in the other
and its dtype restriction (``dtypes:``/``classes:``, compared as sets of dtypes) is no
narrower: the other finding is then a special case of it (the same rule as
``Corpus.fold`` within one op). Findings whose sets cover one another, directly or
through a chain of findings, are one bug (so the six findings of CUDA ``linalg_eig`` on
a transposed input, functional and ``out=``, values and variants, are one bug:
``{layout}`` covers ``{layout, form:out}``; an ``out=``-only bug, ``{form:out}``, stays
apart from a functional one with other conditions); findings of one kernel with incomparable conditions (``sigmoid`` wrong for
non-contiguous inputs, and wrong for float16 whatever the layout) stay two bugs, unless
both raise the same clean error there: one check of one kernel that refuses valid input is one
bug however ablation words the sizes or layouts that reach it (issue 31, H200: CUDA
``avg_pool2d``'s "integer out of range" for 2^31 elements and for a batch past 65,536
with padding). A device fault's message ("invalid argument") names no check and does not
join findings. A
finding whose minimal case needs nothing (no condition) covers every other of its
kernel: that kernel fails on every input some route gives it, so nothing tells the
others apart from it.

Findings that are not localised to one kernel (composite bugs, cuDNN and other calls
with no CPU twin, compiled targets) are grouped the same way within their *op*: one
public op, one symptom (oracle, kind and dedup key, less the form of the call), and
conditions that cover one another once normalised. So the findings that differ only in
which argument triggers them are one bug: gru with a gapped ``w_ih`` and with a gapped
``w_hh`` (``layout:2``, ``layout:3``: both ``layout``), ``addbmm_`` with ``a`` or ``b``
sharing ``c``'s storage (``alias:1``, ``alias:2``), ``addmm_`` and ``addmm(out=c)``
(``variant:inplace``, ``variant:out-alias``). Flaky findings, crashes, hangs, leaks and
findings from before ablation are each a bug of their own.

A bug's id is a hash of its key and its most general finding's conditions (for a bug of
its own: of the finding's signature): stable while no more general finding joins it.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..generation.large_sizes import base_op_name
from ..generation.opspec import aliased_out_input
from ..triage.kernel_call import kernel_family
from ..triage.localise import KERNEL, divergence_class
from .finding import STATUSES, Finding

# Most urgent first: a bug has the most urgent status of its findings.
STATUS_ORDER = STATUSES

_DIVERGENCE_WORDS = {"wrong": "gives wrong results", "raises": "raises an error that CPU does not",
                     "accepts": "accepts input that CPU rejects", "crash": "crashes", "hang": "hangs"}


def normalised_conditions(conditions, form: str | None = None) -> frozenset[str]:
    """A finding's conditions without the parts that only say how its public op reaches
    the kernel, plus the localised call's form (see the module docstring)."""
    out = {f"form:{form}"} if form in ("out", "inplace") else set()
    for c in conditions or ():
        kind, _, _ = c.partition(":")
        if kind in ("variant", "kwarg"):
            continue
        if kind == "alias":
            # which input shares the storage (addbmm_'s `a` or `b` with `c`), or out= being
            # the input itself (addmm(out=c) and addmm_): one aliasing, one route each
            out.add("alias")
        elif kind == "layout":
            out.add("layout")
        elif kind == "0-d":
            out.add("0-d")
        elif c.startswith("rank>="):
            out.add("rank")
        else:
            out.add(c)
    return frozenset(out)


def _dtype_sets(conditions: frozenset[str]) -> tuple[frozenset[str] | None, frozenset[str] | None]:
    dtypes = classes = None
    for c in conditions:
        kind, _, arg = c.partition(":")
        if kind == "dtypes":
            dtypes = frozenset(arg.split("+"))
        elif kind == "classes":
            classes = frozenset(arg.split("+"))
    return dtypes, classes


def covers(general: frozenset[str], special: frozenset[str]) -> bool:
    """Whether a finding with conditions ``general`` explains one with ``special``: its
    other conditions are all in ``special`` and its dtype restrictions are no narrower."""
    plain = {c for c in general if not c.startswith(("dtypes:", "classes:"))}
    if not plain <= special:
        return False
    for g, s in zip(_dtype_sets(general), _dtype_sets(special)):
        if g is not None and (s is None or not s <= g):
            return False
    return True


def _device_kind(finding: Finding) -> str:
    """The backend whose kernel is wrong: the device's, or ``cpu`` for eager CPU's bug
    whatever device found it (one CPU bug found testing ``cuda`` and ``mps`` is one bug,
    filed once, to CPU: issue 37)."""
    if finding.blame == "cpu":
        return "cpu"
    return str(finding.device).split(":")[0]


def _localised_kernel(finding: Finding) -> str | None:
    loc = finding.localisation if isinstance(finding.localisation, dict) else None
    if finding.flaky or loc is None or loc.get("status") != KERNEL or not loc.get("kernel"):
        return None
    if finding.conditions is None:
        return None  # not explained: nothing to match conditions on
    return str(loc["kernel"])


# Kernels that backends implement as one: a template or function that takes the
# operation as an argument (MPS's bitwise and/or/xor kernel, its triu/tril kernel, the
# fmax/fmin and maximum/minimum pairs, the amax/amin and cumsum/cumprod reductions; CUDA's
# likewise). A bug of the shared code shows in each with the same conditions, and upstream
# files it once: findings of sibling kernels whose conditions cover one another are one
# bug (issue 37: a fault of the bitwise ops was filed as three bugs). Kept to kernels that
# share their code, not their kind: two unary ops wrong for gapped inputs stay two bugs.
SIBLINGS = (
    ("aten::bitwise_and", "aten::bitwise_or", "aten::bitwise_xor"),
    ("aten::triu", "aten::tril"),
    ("aten::fmax", "aten::fmin"),
    ("aten::maximum", "aten::minimum"),
    ("aten::amax", "aten::amin"),
    ("aten::cumsum", "aten::cumprod"),
    ("aten::logical_and", "aten::logical_or", "aten::logical_xor"),
)
_SIBLING_SET = {family: " | ".join(kernels) for kernels in SIBLINGS for family in kernels}


def shared_family(kernel: str) -> str:
    """The kernel's family (kernel_family), or its set of sibling kernels (SIBLINGS)."""
    family = kernel_family(kernel)
    return _SIBLING_SET.get(family, family)


def group_key(finding: Finding) -> tuple | None:
    """(blame, device kind, kernel family or sibling set, divergence class), or None for
    a finding that is not localised to a kernel."""
    kernel = _localised_kernel(finding)
    if kernel is None:
        return None
    return (finding.blame, _device_kind(finding), shared_family(kernel),
            divergence_class(str(finding.localisation.get("divergence", ""))))


_FORMS = frozenset(("functional", "method", "inplace", "out", "out-strided", "out-resized", "out-alias", "grad",
                    "autocast", "out-cast"))


def op_key(finding: Finding) -> tuple | None:
    """(blame, device kind, op, oracle, kind, dedup key without the call's form) for a
    finding that is not localised but explained: its bug is found within its op. None
    for one that is a bug of its own (flaky, a process event, no conditions)."""
    if finding.flaky or finding.conditions is None or finding.oracle in ("crash", "hang", "leak"):
        return None
    symptom = tuple(k for k in finding.failure.dedup_key
                    if not (isinstance(k, str) and (k in _FORMS or aliased_out_input(k) is not None)))
    # An op's large size class (bmm@large) is the op: a bug seen at both sizes with
    # matching conditions is one bug, one that needs the size keeps its own condition.
    return ("op", finding.blame, _device_kind(finding), base_op_name(finding.op), finding.oracle,
            finding.failure.kind, *symptom)


# The failure kind of a clean error raised on the device where CPU returns: its message
# (numbers masked) names the check that refused the call.
_CLEAN_REFUSAL = "dut-raises"


def refusing_check(finding: Finding) -> str | None:
    """The normalised message of the check that refused a valid call on the device, or
    None when the finding is not such a refusal (wrong values, a device fault, a crash)."""
    failure = finding.failure
    if failure.kind != _CLEAN_REFUSAL:
        return None
    texts = [k for k in failure.dedup_key[1:] if isinstance(k, str) and k.strip()]
    return ": ".join(texts) or None


def finding_conditions(finding: Finding) -> frozenset[str]:
    """Its normalised conditions, with the form of the call it is localised to."""
    loc = finding.localisation if isinstance(finding.localisation, dict) else {}
    return normalised_conditions(finding.conditions, loc.get("form") if loc.get("status") == KERNEL else None)


def standalone_reason(finding: Finding) -> str:
    """Why a finding is a bug of its own, in a few words."""
    loc = finding.localisation if isinstance(finding.localisation, dict) else None
    if finding.flaky:
        return "flaky: not localised"
    if loc is None:
        return "not localised (recorded before localisation)"
    status = loc.get("status")
    if status == "composite":
        return "composite: " + str(loc.get("reason", "no single aten call diverges"))
    if status == "not-localised":
        return "not localised: " + str(loc.get("reason", ""))
    if status == "error":
        return "localisation failed: " + str(loc.get("error", ""))
    if finding.conditions is None:
        return "localised but not explained: its conditions are unknown"
    return str(status)


def _rank(finding: Finding) -> int:
    return STATUS_ORDER.index(finding.status) if finding.status in STATUS_ORDER else len(STATUS_ORDER)


@dataclass
class Bug:
    id: str
    findings: list                    # [(path, Finding)], the most general first
    kernel: str | None = None
    device: str = ""
    divergence: str | None = None     # the divergence class (wrong, raises, ...)
    conditions: frozenset = field(default_factory=frozenset)   # the general finding's, normalised
    reason: str = ""                  # why it is a bug of its own (unlocalised findings)

    @property
    def general(self) -> Finding:
        return self.findings[0][1]

    @property
    def status(self) -> str:
        return min((f for _, f in self.findings), key=_rank).status

    @property
    def regression(self) -> bool:
        return any(f.regression for _, f in self.findings)

    @property
    def ops(self) -> dict[str, list[str]]:
        """Public op -> the variants its findings call it in."""
        out: dict[str, set[str]] = {}
        for _, f in self.findings:
            out.setdefault(f.op, set()).add(f.case.variant)
        return {op: sorted(v, key=_variant_order) for op, v in sorted(out.items())}

    @property
    def kernels(self) -> list[str]:
        """The exact kernels (overloads) its findings localise to, the general one's first."""
        out = [self.kernel] if self.kernel else []
        for _, f in self.findings:
            loc = f.localisation if isinstance(f.localisation, dict) else {}
            if loc.get("kernel") and loc["kernel"] not in out:
                out.append(str(loc["kernel"]))
        return out

    @property
    def oracles(self) -> list[str]:
        return sorted({f.oracle for _, f in self.findings})

    @property
    def explanation(self) -> str:
        g = self.general
        first = (g.failure.message.strip().splitlines() or [""])[0]
        return g.explanation_text or first[:100]

    @property
    def localisation(self) -> dict | None:
        loc = self.general.localisation
        return loc if isinstance(loc, dict) else None

    @property
    def kernel_repro(self) -> dict | None:
        """The general finding's kernel-level repro, else the first finding's that has one."""
        for _, f in self.findings:
            loc = f.localisation if isinstance(f.localisation, dict) else {}
            if self.kernel is not None and loc.get("status") == KERNEL and isinstance(loc.get("repro"), dict):
                return loc["repro"]
        return None

    @property
    def title(self) -> str:
        if self.kernel is None:
            return self.general.title
        ops = ", ".join(f"`{op}`" for op in self.ops)
        return f"`{self.kernel}` {_DIVERGENCE_WORDS.get(self.divergence or '', 'diverges')} (via {ops})"

    def affects(self) -> list[str]:
        """``linalg.eig (functional, out)`` per public op."""
        return [f"{op} ({', '.join(variants)})" for op, variants in self.ops.items()]

    def to_json(self) -> dict:
        loc = self.localisation or {}
        return {
            "id": self.id,
            "kernel": self.kernel,
            "kernels": self.kernels,
            "device": self.device,
            "divergence": self.divergence,
            "kinds": list(loc.get("kinds") or []) if self.kernel else [],
            "status": self.status,
            "regression": self.regression,
            "title": self.title,
            "explanation": self.explanation,
            "conditions": sorted(self.conditions),
            "localised": self.kernel is not None,
            "reason": self.reason or None,
            "ops": [{"op": op, "variants": variants} for op, variants in self.ops.items()],
            "oracles": self.oracles,
            "findings": [{"path": str(p), "file": Path(p).name, "signature": f.signature, "op": f.op,
                          "variant": f.case.variant, "oracle": f.oracle, "status": f.status,
                          "localisation": (f.localisation or {}).get("status") if isinstance(f.localisation, dict)
                          else None}
                         for p, f in self.findings],
            "kernel_repro": self.kernel_repro,
        }


_VARIANTS = ("functional", "method", "inplace", "out", "out-strided", "out-resized", "grad", "autocast", "out-cast")


def _variant_order(v: str):
    return (_VARIANTS.index(v) if v in _VARIANTS else len(_VARIANTS), v)


def _hash(parts) -> str:
    return hashlib.sha1(json.dumps(parts).encode()).hexdigest()[:12]


def _generality(item) -> tuple:
    """Most general first: fewest normalised conditions, reliable, earliest seen."""
    _, f = item
    return (len(finding_conditions(f)), f.flaky, f.first_seen, f.op, f.signature)


def group(found) -> list[Bug]:
    """The bugs of ``found`` ([(path, Finding)]), most urgent status first."""
    found = list(found)
    bugs: list[Bug] = []
    alone: dict[str, Bug] = {}          # signature -> its bug (one finding read from two corpora)
    by_key: dict[tuple, list[int]] = {}
    for i, (path, f) in enumerate(found):
        key = group_key(f) or op_key(f)
        if key is not None:
            by_key.setdefault(key, []).append(i)
        elif f.signature in alone:
            alone[f.signature].findings.append((path, f))
        else:
            alone[f.signature] = Bug(_hash(["finding", f.signature]), [(path, f)], device=_device_kind(f),
                                     reason=standalone_reason(f))
            bugs.append(alone[f.signature])
    for key, members in by_key.items():
        parent = {i: i for i in members}

        def root(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i
        conds = {i: finding_conditions(found[i][1]) for i in members}
        # Within a kernel only: an op's unlocalised calls may hit one message at two sites.
        checks = {i: refusing_check(found[i][1]) if key[0] != "op" else None for i in members}
        for a in members:
            for b in members:
                if a < b and (covers(conds[a], conds[b]) or covers(conds[b], conds[a])
                              or (checks[a] is not None and checks[a] == checks[b])):
                    parent[root(a)] = root(b)
        clusters: dict[int, list[int]] = {}
        for i in members:
            clusters.setdefault(root(i), []).append(i)
        for cluster in clusters.values():
            items = sorted((found[i] for i in cluster), key=_generality)
            general = finding_conditions(items[0][1])
            if key[0] == "op":
                # One op's findings, not localised: a bug of the op (its id is the general
                # finding's signature while it is alone, so a lone finding keeps its id).
                bug_id = _hash(["finding", items[0][1].signature]) if len(items) == 1 else \
                    _hash(list(key) + [sorted(general)])
                bugs.append(Bug(bug_id, items, device=key[2], conditions=general,
                                reason=standalone_reason(items[0][1])
                                + ("" if len(items) == 1 else "; its findings differ only in which argument or "
                                   "form of the call triggers the same symptom")))
                continue
            blame, device, family, divergence = key
            bug_id = _hash([blame, device, family, divergence, sorted(general)])
            bugs.append(Bug(bug_id, items, kernel=str(items[0][1].localisation["kernel"]), device=device,
                            divergence=divergence, conditions=general))
    bugs.sort(key=lambda b: (_rank(min((f for _, f in b.findings), key=_rank)), b.kernel is None,
                             b.kernel or "", sorted(b.ops), b.id))
    return bugs


def bug_of(bugs: list[Bug]) -> dict[str, Bug]:
    """Finding signature + path -> its bug (for views that show a finding's bug)."""
    return {f"{f.signature}:{p}": b for b in bugs for p, f in b.findings}


def summary_words(bugs: list[Bug]) -> str:
    """'3 bugs (5 findings)'."""
    n = sum(len(b.findings) for b in bugs)
    return f"{len(bugs)} bug{'s' if len(bugs) != 1 else ''} ({n} finding{'s' if n != 1 else ''})"
