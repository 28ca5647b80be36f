"""Wrong code that a sixth red team (a helper with the kit's source) got full marks with, kept in tests/holes/ as it
wrote them (<problem>__<what>.py), each now failing the check named below:
- attention_backward: query blocks of 128 whose causal mask loses the block's offset, and key blocks of 128 summed
  under the first block's maximum (the stability check's long calls: 257 queries by 263 keys, 2 after 8209);
- flash_attention: a hand-written backward that follows the top-left diagonal (a causal gradient with Tq < Tk);
- sliding_window_attention: a block's keys taken 128 at a time under the first tile's maximum (a window of 300 on
  the long stability calls);
- additive, multi-head additive and cross-attention: one dropout mask for the whole batch (batch rows must drop
  independently), and additive attention's own dropout that divides by 1 - p = 0 at p = 1;
- linear_attention: the carried state detached every 64 positions (a gradient call of 131 positions in chunks of 8);
- cross_attention: a fused path of its own when the memory is the queries' very tensor (model(x, x));
- rope: 2-D positions read as (B, T) position ids ((H, T) positions are drawn)."""
from __future__ import annotations

from pathlib import Path

import pytest

from together import Together

pytestmark = pytest.mark.slow  # a grading per case: in the slow suite, which .ci/run also runs

HOLES = Path(__file__).parent / "holes"
FAILS = {
    "attention_backward__query_block_offset": "stability",
    "attention_backward__stale_max_key_blocks": "stability",
    "flash_attention__backward_skips_with_top_left_rule": "gradients",
    "sliding_window_attention__stale_max_key_tiles": "stability",
    "additive_attention__batch_shared_dropout": "dropout",
    "multihead_additive_attention__batch_shared_dropout": "dropout",
    "cross_attention__batch_shared_dropout": "dropout",
    "additive_attention__dropout_p1_nan": "dropout",
    "linear_attention__state_detached_every_64": "gradients",
    "cross_attention__fused_path_when_memory_is_x": "parity_float64",
    "rope__2d_positions_as_position_ids": "parity_float64",
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    together = Together(tmp_path_factory.mktemp)
    for name in FAILS:
        together.add(name, name.split("__")[0], (HOLES / f"{name}.py").read_text())
    return together


def test_every_file_here_is_listed():
    assert {p.stem for p in HOLES.glob("*.py")} == set(FAILS)


@pytest.mark.parametrize("name", sorted(FAILS))
def test_wrong_code_the_sixth_red_team_found_fails(runs, name):
    pid = name.split("__")[0]
    report = runs.report(name)
    assert report.grader_errors == 0
    failed = {c.id for c in report.problem(pid).checks if c.status == "failed"}
    assert FAILS[name] in failed, failed
