"""Run a repro script against a target that is not a torch device of its own.

``python -m mpsfuzz.reports.shim TARGET SCRIPT`` executes SCRIPT statement by statement,
as ``python SCRIPT`` would, except that each statement whose first line carries the
``# device under test`` marker runs inside ``TARGET.run`` (then ``synchronize``). That
is how a script written for a device reproduces on the fault-injecting test target, or
any ``module:attr`` target, without the script knowing about mpsfuzz.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

from ..execution.targets import TargetError, load_target
from .repro import MARKER


def run_script(target, path: Path) -> None:
    source = path.read_text()
    lines = source.splitlines()
    namespace = {"__name__": "__main__", "__file__": str(path)}
    for statement in ast.parse(source, str(path)).body:
        code = compile(ast.Module(body=[statement], type_ignores=[]), str(path), "exec")
        if MARKER in lines[statement.lineno - 1]:
            target.run(exec, code, namespace)
            target.synchronize()
        else:
            exec(code, namespace)


# Exit status when the target cannot be loaded here: the script never ran, so the run
# says nothing about the finding ("not verified here", never "not a repro").
CANNOT_LOAD_TARGET = 3


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: python -m mpsfuzz.reports.shim TARGET SCRIPT\n")
        return 2
    try:
        target = load_target(argv[0])
    except TargetError as exc:
        sys.stderr.write(f"mpsfuzz shim: cannot load the target: {exc}\n")
        return CANNOT_LOAD_TARGET
    except Exception as exc:  # the target's own import or factory failed
        sys.stderr.write(f"mpsfuzz shim: cannot load the target: {type(exc).__name__}: {exc}\n")
        return CANNOT_LOAD_TARGET
    run_script(target, Path(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
