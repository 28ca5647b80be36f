"""Differently written correct implementations all get full marks, with no mistake named and no grader error.

tests/impls/<style>/ holds one style's modules (the reference fills in the others): d2l, einsum, inf_guard,
loops, autograd_fn (custom autograd Functions), linear_subclass (nn.Linear subclasses, F.linear), where_guard
(torch.where guards), float64_internal (float64 inside), bmm_flat (heads folded into the batch), log_softmax,
chunk_rows (blocks of query rows), complex (RoPE as complex multiplication), hf_style (Hugging Face's and tutorials' layouts), stdlib_imports (standard
library modules the worker has not loaded: the sandbox must let them be imported)."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import make_impl, grade_shared
from attnkit.problems import all_problems

STYLES = sorted(p for p in (Path(__file__).parent / "impls").iterdir() if p.is_dir())


def test_at_least_twelve_styles():
    assert len(STYLES) >= 12


@pytest.mark.parametrize("style", STYLES, ids=lambda p: p.name)
def test_correct_style_gets_full_marks(tmp_path, style):
    files = {f.name: f.read_text() for f in style.glob("*.py")}
    # the style's own problems and what imports them: the others are the reference's files, unchanged
    mine = {f.stem for f in style.glob("*.py")}
    report = grade_shared(make_impl(tmp_path, files), [p.id for p in all_problems() if p.id in mine or set(p.requires) & mine])
    assert report.grader_errors == 0
    for p in report.problems:
        assert p.status == "passed", [(c.id, c.message) for c in p.checks if c.status not in ("passed", "skipped")]
        assert all(c.mistake is None for c in p.checks)  # never given a mistake
    assert report.score == report.max_score
