"""Generated files are fresh, and regenerating never touches a learner's work."""
from __future__ import annotations

import re
import shutil

import pytest

from attnkit import ROOT
from attnkit.dev.docs import readme_table
from attnkit.dev.tasks import self_check, stale, sync
from attnkit.problems import all_problems, get


def test_generated_files_are_fresh():
    assert stale() == []


def test_readme_table_lists_every_problem_with_its_points():
    table = readme_table()
    for p in all_problems():
        assert f"`{p.id}`" in table and f"`{p.symbol}`" in table


def test_sync_rewrites_outdated_stubs_and_keeps_learner_work(tmp_path):
    (tmp_path / "exercises").mkdir()
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    (tmp_path / "grader").mkdir(exist_ok=True)
    shutil.copy(ROOT / "grader" / "report.schema.json", tmp_path / "grader" / "report.schema.json")
    work = "def masked_softmax(scores, valid_lens=None):\n    return scores.softmax(-1)\n"
    (tmp_path / "exercises" / "masked_softmax.py").write_text(work)
    (tmp_path / "exercises" / "luong_attention.py").write_text('def f():\n    """old"""\n    raise NotImplementedError\n')
    assert any("is missing" in line for line in stale(tmp_path))
    done = sync(tmp_path)
    assert (tmp_path / "exercises" / "masked_softmax.py").read_text() == work
    assert any("kept exercises/masked_softmax.py" in line for line in done)
    assert stale(tmp_path) == []


def test_stale_notebook_is_found_and_learner_notebooks_are_kept(tmp_path):
    shutil.copytree(ROOT / "exercises", tmp_path / "exercises")
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    (tmp_path / "grader").mkdir(exist_ok=True)
    shutil.copy(ROOT / "grader" / "report.schema.json", tmp_path / "grader" / "report.schema.json")
    path = tmp_path / "notebooks" / "luong_attention.ipynb"
    path.write_text(path.read_text().replace("Quick checks", "Old heading"))
    assert stale(tmp_path) == ["notebooks/luong_attention.ipynb is stale: run `attnkit dev sync`"]
    mine = tmp_path / "notebooks" / "masked_softmax.ipynb"
    work = mine.read_text().replace('raise NotImplementedError(\\"masked_softmax: not started\\")',
                                    "return scores.softmax(-1)")
    assert work != mine.read_text()
    mine.write_text(work)
    done = sync(tmp_path)
    assert "wrote notebooks/luong_attention.ipynb" in done and mine.read_text() == work
    assert any("kept notebooks/masked_softmax.ipynb" in line for line in done)
    assert stale(tmp_path) == []


def test_stale_names_the_command_that_fixes_it(tmp_path):
    shutil.copytree(ROOT / "exercises", tmp_path / "exercises")
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    (tmp_path / "README.md").write_text((ROOT / "README.md").read_text().replace("| 1 |", "| one |"))
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    contract = tmp_path / "docs" / "contract.md"
    contract.write_text(contract.read_text().replace("interleaved=False) -> output`", "interleaved=True) -> output`"))
    checks = tmp_path / "docs" / "checks.md"
    checks.write_text(checks.read_text().replace("| float32 | 1e-4 |", "| float32 | 1e-5 |"))
    (tmp_path / "exercises" / "luong_attention.py").write_text('def f():\n    """old"""\n    raise NotImplementedError\n')
    (tmp_path / "grader").mkdir()
    schema = (ROOT / "grader" / "report.schema.json").read_text()
    (tmp_path / "grader" / "report.schema.json").write_text(schema.replace('"chunked_additive_attention"', '"x"'))
    (tmp_path / "notebooks" / "zh" / "masked_softmax.ipynb").unlink()
    lines = stale(tmp_path)
    assert len(lines) == 6 and all("run `attnkit dev sync`" in line for line in lines), lines
    assert any(line.startswith("docs/contract.md") for line in lines) and any(line.startswith("docs/checks.md")
                                                                             for line in lines), lines
    sync(tmp_path)
    assert stale(tmp_path) == [] and (ROOT / "docs" / "contract.md").read_text() == contract.read_text()


def test_the_contract_has_one_numbered_section_per_problem_and_names_a_missing_one(tmp_path):
    from attnkit.dev.docs import render_contract, section_ids

    text = (ROOT / "docs" / "contract.md").read_text()
    numbered, generated = section_ids(text)
    assert sorted(generated) == sorted(p.id for p in all_problems())
    for pid in generated:  # numbered as the shared contract: a reserved number (a problem to come) is skipped
        number = numbered.index(pid) + 1
        head = rf"^## {number}\. (`|{re.escape(get(pid).title)}$)"  # a signature, or a file of several functions' title
        assert re.search(head, text.split(f"<!-- contract:{pid}:begin", 1)[1], re.M), pid
    without = re.sub(r"<!-- contract:rope:begin.*?<!-- contract:rope:end -->", "", text, flags=re.S)
    with pytest.raises(ValueError, match="no section for \\['rope'\\]"):
        render_contract(without)
    for part in ("exercises", "notebooks", "docs"):
        shutil.copytree(ROOT / part, tmp_path / part)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    (tmp_path / "grader").mkdir()
    shutil.copy(ROOT / "grader" / "report.schema.json", tmp_path / "grader" / "report.schema.json")
    (tmp_path / "docs" / "contract.md").write_text(without)
    lines = stale(tmp_path)
    assert len(lines) == 1 and "no section for ['rope']" in lines[0], lines


def test_dev_check_passes():
    assert self_check() == []


def test_the_order_registers_every_spec_in_track_order_with_prerequisites_first():
    from attnkit.problems import ORDER
    from attnkit.fronts.tracks import prerequisites
    from attnkit.model.tracks import TRACKS

    specs = sorted(p.stem for p in (ROOT / "grader" / "problems").glob("*.py") if not p.stem.startswith("_"))
    assert sorted(ORDER) == specs, "add the new spec's id to ORDER in grader/problems/__init__.py"
    rank = [name for name, _ in TRACKS]
    problems = all_problems()
    assert [rank.index(p.track) for p in problems] == sorted(rank.index(p.track) for p in problems)
    for i, p in enumerate(problems):
        assert all(ORDER.index(d) < i for d in prerequisites(p)), (p.id, prerequisites(p))
