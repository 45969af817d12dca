"""The parts of a repro script that show which backend is wrong where it is not the
target alone (issue 37, point 6): eager CPU (a ``cpu-bug``), or the target and eager CPU
alike (``both``).

A target finding's script asserts the target's result against eager CPU's. Where eager
CPU is the wrong one that proves nothing, so such a script checks each backend against
the reference that decided the verdict, at the disputed positions the campaign recorded:

- values and gradients (the jury's verdict, ``details["jury"]``): each decisive juror's
  value at each disputed position is a literal in the script, named by its juror
  ("numpy", "formula", "scalar", ...), with the tolerance the jury used there. The script
  prints eager CPU's value, the references' and the target's side by side, and compares
  them in plain Python (no torch kernel of either backend decides). A ``cpu-bug``'s
  script fails with :data:`CPU_OFF` when eager CPU is off the references; a ``both``
  finding's with :data:`BOTH_OFF` when eager CPU and the target both are.
- a symptom the target's script shows on the device alone (a crash, an error, a write
  past a view, an input modified, another result for contiguous copies) is shown on
  eager CPU alone too: the same script with ``device = 'cpu'`` runs first in a child
  interpreter (a crash there kills the child only), and the script prints how it ended
  (:data:`CPU_ALONE`), which the verifier reads.
"""
from __future__ import annotations

import math
import re

from .source import literal, text_literal

# What a script prints or fails with; the verifier reads them (``Script.expect``).
CPU_OFF = "eager CPU is off the reference"
BOTH_OFF = "are both off the reference"
CPU_ALONE = "eager CPU alone:"
# What a script of eager CPU's crash prints (flushed) once the device's calls returned.
DEVICE_RETURNED = "calls are done; now the same calls on eager CPU"
SHAPES_OFF = "eager CPU's result shapes are off the meta kernel's"
RESIZED = "eager CPU's in-place call resized self instead of raising"

# Names the helpers below bind at a script's top level, and the names the check binds.
HELPER_NAMES = ("_leaves", "_off_reference", "_differs", "_show_references", "_ending")
SCRIPT_NAMES = frozenset({"references", "cpu_off", "dut_off", "meta_shapes", "cpu_alone", "CPU_ALONE_SCRIPT",
                          "subprocess", "signal", "shape_before", "works", *HELPER_NAMES})

REFERENCE_HELPERS = '''def _leaves(out):
    # the op's outputs in the order mpsfuzz compares them (tuples and lists walked depth first)
    if isinstance(out, (tuple, list)):
        return [leaf for item in out for leaf in _leaves(item)]
    return [torch.tensor(out) if isinstance(out, (bool, int, float, complex)) else out]


def _differs(got, value, tol):
    # plain Python: NaN matches only NaN, an infinity only itself, a number within tol
    if isinstance(got, (bool, int)) and isinstance(value, int):
        return got != value
    got, value = complex(got), complex(value)
    if got != got or value != value:
        return (got != got) != (value != value)
    if got == value:
        return False
    finite = abs(got) < float('inf') and abs(value) < float('inf')
    return not (finite and abs(got - value) <= tol)


def _off_reference(out, references):
    # the disputed positions where `out` is off every reference's value
    off = []
    for (leaf, at), (tol, values) in references.items():
        got = _leaves(out)[leaf][at].item()
        if all(_differs(got, value, tol) for value in values.values()):
            off.append((leaf, at))
    return off


def _show_references(cpu, dut, references):
    for (leaf, at), (tol, values) in references.items():
        refs = ', '.join(f'{juror} {value!r}' for juror, value in values.items())
        print(f'output {leaf} at {list(at)}: eager CPU {_leaves(cpu)[leaf][at].item()!r}, {refs}, '
              f'{device} {_leaves(dut)[leaf][at].item()!r} (tolerance {tol:.3g})')'''

ENDING_HELPER = '''def _ending(run):
    # how a child interpreter ended: the signal that killed it, else its last line of errors
    if run.returncode < 0:
        return f'died with {signal.Signals(-run.returncode).name}'
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    return lines[-1] if run.returncode and lines else 'ran to the end'
'''


def jury_of(finding) -> dict | None:
    details = finding.failure.details
    jury = details.get("jury") if isinstance(details, dict) else None
    return jury if isinstance(jury, dict) else None


def decisive_votes(jury: dict) -> list[dict]:
    """The votes that decided the verdict (else the independent ones) whose values line up
    with the recorded positions (one value each)."""
    votes = jury.get("votes", [])
    decided = [v for v in votes if v.get("juror") in jury.get("decided_by", [])] \
        or [v for v in votes if v.get("witness") == "independent"]
    count = len(jury.get("positions", []))
    return [v for v in decided if len(v.get("values", [])) == count]


def recorded(x):
    """A value as the jury recorded it (JSON: non-finite floats as text, complex as
    [re, im]) back as a Python number."""
    if isinstance(x, list) and len(x) == 2:
        return complex(recorded(x[0]), recorded(x[1]))
    if isinstance(x, str):
        return float(x)
    return x


def _tolerance(position: dict, values: list, rtol: float, atol: float) -> float:
    """The jury's tolerance at ``position`` (recorded since issue 37), at least the dtype's
    around the references' values (as ``ballots.read_leaf`` widens it)."""
    recorded_tol = recorded(position.get("tol", 0.0))
    recorded_tol = float(recorded_tol) if isinstance(recorded_tol, (int, float)) else 0.0
    scale = max((abs(v) for v in values if isinstance(v, (int, float, complex)) and abs(v) < math.inf), default=0.0)
    return max(recorded_tol, atol + rtol * scale)


def reference_lines(finding, rtol: float, atol: float) -> tuple[list[str], str] | None:
    """Lines that compare ``expected`` (eager CPU's result) and ``actual`` (the target's)
    with the decisive references' recorded values at the disputed positions, and the
    assertion message the verifier expects; None where the finding recorded no such
    values (no jury, or no vote with a value at each position)."""
    jury = jury_of(finding)
    if jury is None or not jury.get("positions"):
        return None
    votes = decisive_votes(jury)
    if not votes:
        return None
    references = {}
    for i, position in enumerate(jury["positions"]):
        values = {v["juror"]: recorded(v["values"][i]) for v in votes}
        where = (int(position.get("leaf", 0)), tuple(int(k) for k in position.get("index", ())))
        references[where] = (_tolerance(position, list(values.values()), rtol, atol), values)
    text = literal_references(references)
    if text is None:
        return None
    verdict = jury.get("verdict")
    lines = [f"# Who is wrong: {verdict}, decided by {', '.join(v['juror'] for v in votes)}"
             + (f" ({jury['reason']})" if jury.get("reason") else "") + ":"]
    lines += [f"#   {v['juror']} ({v.get('witness', '')}): {v.get('reference', '')}" for v in votes]
    lines += ["# Their values at the disputed positions, as the campaign recorded them (literals):",
              "# (output, index) -> (tolerance, {reference: value})",
              f"references = {text}",
              "_show_references(expected, actual, references)",
              "cpu_off, dut_off = _off_reference(expected, references), _off_reference(actual, references)"]
    if finding.failure.blame == "both":
        lines.append(f"assert not (cpu_off and dut_off), f'eager CPU and {{device}} {BOTH_OFF} "
                     "(eager CPU at {cpu_off}, the device at {dut_off})'")
        message = BOTH_OFF
    else:
        message = CPU_OFF
    lines += [f"assert not cpu_off, f'{CPU_OFF} at {{cpu_off}}'",
              "assert not dut_off, f'{device} is off the reference at {dut_off}'"]
    return lines, message


def literal_references(references: dict) -> str | None:
    parts = []
    for (leaf, at), (tol, values) in references.items():
        items = []
        for juror, value in values.items():
            text = literal(value)
            if text is None:
                return None
            items.append(f"{juror!r}: {text}")
        at_text = literal(at)
        parts.append(f"({leaf}, {at_text}): ({literal(float(tol))}, {{{', '.join(items)}}})")
    return "{" + ", ".join(parts) + "}"


def meta_shape_lines(finding) -> tuple[list[str], str] | None:
    """A shape finding the meta kernel decided against eager CPU: CPU's result shapes
    against the meta kernel's (recorded), the target's beside them."""
    numbers = finding.failure.details.get("arbiter") if isinstance(finding.failure.details, dict) else None
    shapes = numbers.get("meta_shapes") if isinstance(numbers, dict) else None
    if not shapes:
        return None
    meta = [tuple(int(n) for n in s) for s in shapes]
    return ([f"meta_shapes = {meta!r}  # the meta kernel's (the op's shape function alone, on the meta device)",
             "print('eager CPU:', [tuple(t.shape) for t in _leaves(expected)], f'{device}:', "
             "[tuple(t.shape) for t in _leaves(actual)], 'meta kernel:', meta_shapes)",
             f"assert [tuple(t.shape) for t in _leaves(expected)] == meta_shapes, \"{SHAPES_OFF}\""], SHAPES_OFF)


def cpu_alone_lines(child_script: str) -> list[str]:
    """Lines that run ``child_script`` (the script for ``device = 'cpu'``) in a child
    interpreter first and print how it ended: eager CPU alone shows the same symptom."""
    return ["# Eager CPU alone, in a child interpreter (a crash there kills the child only): the same lines",
            "# with device = 'cpu'. Then the device under test.",
            f"CPU_ALONE_SCRIPT = {text_literal(child_script)}",
            "cpu_alone = subprocess.run([sys.executable, '-c', CPU_ALONE_SCRIPT], capture_output=True, text=True)",
            "print(cpu_alone.stdout + cpu_alone.stderr, end='')",
            f"print({CPU_ALONE!r}, _ending(cpu_alone), flush=True)"]


def cpu_alone_ending(expect: dict, finding) -> str:
    """What the child's ending line must start with for ``expect`` (the device's)."""
    outcome = expect.get("outcome")
    if outcome == "signal":
        return f"{CPU_ALONE} died with {expect.get('signal') or ''}".rstrip()
    if outcome == "raises":
        cpu = re.search(r"eager CPU raised (\w+):", finding.failure.message)
        return f"{CPU_ALONE} {cpu.group(1) if cpu else expect.get('type') or ''}".rstrip()
    if outcome == "assertion":
        return f"{CPU_ALONE} AssertionError"
    return CPU_ALONE
