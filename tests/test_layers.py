"""The grader's structure: imports point one way (import-linter's contracts in pyproject.toml), and no
import anywhere, deferred into a function or not, closes a cycle (so none is deferred to dodge one)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

from attnkit import ROOT


def test_import_linter_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint), "--config", str(ROOT / "pyproject.toml")], capture_output=True, text=True,
                       cwd=ROOT, timeout=300)
    assert r.returncode == 0 and "1 kept, 0 broken" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


def test_no_import_closes_a_cycle():
    """grimp sees every import, those inside functions too: a pair of modules reaching each other is a cycle
    that a deferred import only hides."""
    graph = grimp.build_graph("attnkit")
    cycles = sorted({tuple(sorted((a, b))) for a in graph.modules for b in graph.find_modules_directly_imported_by(a)
                     if graph.chain_exists(importer=b, imported=a)})
    assert cycles == [], cycles


def test_the_layers_are_the_flow_of_a_grading_run():
    """Every module of the package lives in one of the contract's layers (or is a leaf): nothing escapes it."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    layers = {name.strip() for layer in config["layers"] for name in layer.replace("|", ":").split(":")}
    graph = grimp.build_graph("attnkit")
    loose = sorted(m for m in graph.modules if m != "attnkit" and not any(m == l or m.startswith(l + ".") for l in layers))
    assert loose == [], f"modules outside every layer: {loose}"


def test_the_command_line_starts_its_workers_before_it_imports_torch():
    """`attnkit` starts the workers' forkserver (which imports torch) before importing torch itself, so the two
    imports overlap; importing the command line, or the modules it warms up with, must not import torch."""
    probe = ("import sys, attnkit.fronts.cli, attnkit.run.forkserver, attnkit.run.jail_process, attnkit.run.jail; "
             "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('attnkit.problems.')))")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout[-2000:] + r.stderr[-2000:]
