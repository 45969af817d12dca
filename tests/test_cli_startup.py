"""The command line answers at once where it needs no torch (issue 39, point 4):
`--version`, every `--help` and bad arguments import neither torch, numpy nor
Hypothesis, and a bad argument is one line on stderr with exit 2. And every option of
every command has its help, `run`'s and `daemon`'s in the groups of CAMPAIGN_GROUPS.

The imports are checked in a fresh interpreter (this one has torch already). No timings
here: bench/cli_startup.py measures them."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mpsfuzz import cli

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "numpy", "hypothesis")

BAD_ARGUMENTS = {  # argv -> text the one error line must contain
    ("run", "--budget", "x"): "--budget='x'",
    ("run", "--budget", "0"): "--budget=0: must be more than 0 seconds",
    ("run", "--jobs", "-1"): "--jobs=-1",
    ("run", "--max-cases", "ten"): "--max-cases='ten'",
    ("run", "--seed", "-3"): "--seed",
    ("run", "--timeout", "0"): "--timeout=0",
    ("run", "--shard", "3/2"): "--shard=3/2",
    ("run", "--devices", "0,0"): "--devices='0,0'",
    ("run", "--max-bytes", "lots"): "--max-bytes='lots'",
    ("run", "--ops", ","): "--ops: the selection is empty",
    ("run", "--frobnicate"): "--frobnicate",
    ("daemon", "--max-disk", "0GB"): "--max-disk",
    ("ops", "--ops", "add"): "--ops is for --stats",
    ("ops", "--stats", "--cases", "0"): "--cases=0",
    ("coverage", "--cases", "0"): "--cases=0",
    ("corpus",): "corpus needs a command",
    ("frobnicate",): "frobnicate",
    (): "a command is required",
}

# In a fresh interpreter: main() on each argv, its exit code and what it wrote, then the
# heavy modules imported by any of them.
PROBE = """
import contextlib, io, json, sys
from mpsfuzz.cli import build_parser, main

def commands(parser, prefix=()):
    found = [prefix]
    for action in parser._actions:
        if isinstance(action, __import__("argparse")._SubParsersAction):
            for name, sub in action.choices.items():
                found += commands(sub, prefix + (name,))
    return found

results = []
argvs = [["--version"], ["--help"]] + [[*c, "--help"] for c in commands(build_parser()) if c]
argvs += json.loads(sys.argv[1])
for argv in argvs:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    results.append({"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue()})
print(json.dumps({"results": results, "heavy": [m for m in %r if m in sys.modules]}))
""" % (HEAVY,)


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps([list(a) for a in BAD_ARGUMENTS])],
                          cwd=tmp_path_factory.mktemp("startup"), env=_env(), text=True, capture_output=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_help_version_and_bad_arguments_import_no_torch(probed):
    assert probed["heavy"] == []


def test_version_and_every_help_answer(probed):
    by_argv = {tuple(r["argv"]): r for r in probed["results"]}
    assert by_argv[("--version",)]["code"] == 0
    assert by_argv[("--version",)]["out"].strip() == f"mpsfuzz {__import__('mpsfuzz').__version__}"
    helps = [r for argv, r in by_argv.items() if argv[-1:] == ("--help",)]
    assert len(helps) >= 12          # the root, each command, each corpus command
    for r in helps:
        assert r["code"] == 0 and r["out"].startswith("usage: mpsfuzz"), r
        assert r["err"] == ""
    run_help = by_argv[("run", "--help")]["out"]
    for title in cli.CAMPAIGN_GROUPS:
        assert f"\n{title}:\n" in run_help


@pytest.mark.parametrize("argv", list(BAD_ARGUMENTS), ids=" ".join)
def test_bad_argument_is_one_line_and_exit_2(probed, argv):
    r = next(r for r in probed["results"] if tuple(r["argv"]) == argv)
    assert r["code"] == cli.EXIT_ERROR, r
    lines = r["err"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mpsfuzz: error: "), r
    assert BAD_ARGUMENTS[argv] in lines[0], r
    assert "Traceback" not in r["err"] + r["out"]


def test_the_entry_point_reports_a_bad_argument_without_torch(tmp_path):
    """`python -m mpsfuzz` (entry(): the exit's reaper and watchdog too), run as a user would."""
    probe = ("import runpy, sys\n"
             "sys.argv = ['mpsfuzz', 'run', '--budget', 'nonsense']\n"
             "try:\n    runpy.run_module('mpsfuzz', run_name='__main__')\n"
             "except SystemExit as exc:\n    code = exc.code\n"
             f"print(code, [m for m in {HEAVY!r} if m in sys.modules])\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=_env(), text=True,
                          capture_output=True, timeout=120)
    assert done.stdout.split(None, 1) == ["2", "[]\n"], (done.stdout, done.stderr)
    assert done.stderr == "mpsfuzz: error: --budget='nonsense': expected a duration such as 90s, 10m, 2h or 1h30m\n"
    assert not (tmp_path / "mpsfuzz-internal-error.log").exists()


# -- help texts and groups ----------------------------------------------------------------

def _parsers(parser: argparse.ArgumentParser, prefix=()) -> dict:
    found = {prefix: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_parsers(sub, prefix + (name,)))
    return found


PARSERS = _parsers(cli.build_parser())


@pytest.mark.parametrize("command", list(PARSERS), ids=lambda c: " ".join(c) or "mpsfuzz")
def test_every_option_and_command_has_help(command):
    parser = PARSERS[command]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            assert set(helps) == set(action.choices)
            assert all(h and h.strip() for h in helps.values()), helps
            continue
        assert action.help and action.help.strip() and action.help != argparse.SUPPRESS, \
            f"mpsfuzz {' '.join(command)}: {action.option_strings or action.dest} has no help"
    parser.format_help()   # every help formats (no stray %)


@pytest.mark.parametrize("command", ["run", "daemon"])
def test_campaign_options_fall_in_the_named_groups(command):
    parser = PARSERS[(command,)]
    titles = [g.title for g in parser._action_groups]
    assert titles[-len(cli.CAMPAIGN_GROUPS):] == list(cli.CAMPAIGN_GROUPS)
    grouped = {g.title: [a for a in g._group_actions] for g in parser._action_groups}
    for title, actions in grouped.items():
        if title in cli.CAMPAIGN_GROUPS:
            assert actions, f"{command}: group {title} is empty"
        else:   # argparse's own groups: the positionals (none) and -h alone
            assert all(isinstance(a, argparse._HelpAction) for a in actions), (title, actions)
    where = {a.option_strings[0]: title for title, actions in grouped.items() for a in actions}
    for option, title in {"--ops": "selection", "--target": "selection", "--kernels": "selection",
                          "--large": "selection", "--shard": "selection", "--budget": "budget",
                          "--max-cases": "budget", "--jobs": "budget", "--timeout": "budget",
                          "--slice": "budget", "--oracles": "oracles", "--known": "oracles",
                          "--corpus": "output", "--no-progress": "output", "--seed": "advanced"}.items():
        assert where[option] == title, option


def test_parse_time_checks_keep_what_the_handlers_read():
    """--budget and --ops are checked as they are parsed but kept as written."""
    args = cli.build_parser().parse_args(["run", "--budget", "1H30m", "--ops", " add, sum"])
    assert args.budget == "1H30m" and args.ops == " add, sum"
    args = cli.build_parser().parse_args(["run", "--budget", ""])
    assert args.budget == ""            # no budget given, as before
    args = cli.build_parser().parse_args(["daemon"])
    assert args.budget is None and args.ops is None and args.max_disk == 2 * 2**30
    assert cli.build_parser().parse_args(["coverage"]).selection == "all"
