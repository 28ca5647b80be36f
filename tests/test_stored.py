"""The store of expected values on disk (judge/stored.py): a run that loads them judges exactly as one that computes
them, and nothing is read that a submission, another user or a damaged file could have put there."""
from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from attnkit.grading import grade
from attnkit.judge import expected, stored
from attnkit.judge.expected import References
from attnkit.report.summary import to_json
from attnkit.judge.stored import Store
from attnkit.judge.tensorfile import MAGIC, Unstorable, read, write
from conftest import SANDBOXES, SOLUTIONS, make_impl, snapshot

PROBLEMS = ["numpy_additive_attention", "masked_softmax"]  # two cheap problems
SEED = 7


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("ATTNKIT_CACHE", str(folder))
    return folder


@pytest.fixture
def computed(monkeypatch):
    """The problems whose expected values a run computes (not loaded), in order."""
    done = []
    real = expected._compute

    def spy(problem, cases, between=lambda: None):
        done.append(problem.id)
        return real(problem, cases, between)

    monkeypatch.setattr(expected, "_compute", spy)
    return done


def _graded(impl=SOLUTIONS, problems=PROBLEMS, **kwargs) -> dict:
    """The report as the kit writes it (report/summary.py: every verdict, message and evidence), less the folder."""
    report = to_json(grade(impl, problems, seed=SEED, references=References(), **kwargs))
    report.pop("impl", None)
    return report


def _files(cache) -> list:
    return sorted(cache.glob("expected/*/*.bin"))


def test_values_come_back_as_written(tmp_path):
    values = {
        "a/b": {"ok": True, "outputs": [torch.randn(3, 4, dtype=torch.float64), torch.randn(2, 5).t(),
                                        torch.randn(4).to(torch.bfloat16), torch.randn(3).half()],
                "mask": torch.rand(3, 3) > 0.5, "ints": torch.arange(7), "bytes": torch.arange(5, dtype=torch.uint8),
                "complex": torch.randn(2, dtype=torch.complex64), "empty": torch.empty(0, 3), "scalar": torch.tensor(2.5),
                "tuple": (1, "x", None, 2.5, False)},
        ("tuple", "key"): [None, {"n": 3}],
    }
    path = tmp_path / "v.bin"
    write(path, values)
    back = read(path)
    assert back.keys() == values.keys() and isinstance(back["a/b"]["tuple"], tuple)
    assert back["a/b"]["tuple"] == values["a/b"]["tuple"] and back[("tuple", "key")] == values[("tuple", "key")]
    for name in ("mask", "ints", "bytes", "complex", "empty", "scalar"):
        got, want = back["a/b"][name], values["a/b"][name]
        assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want), name
    for got, want in zip(back["a/b"]["outputs"], values["a/b"]["outputs"]):
        assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
    back["a/b"]["outputs"][0].add_(1)  # a copy in memory: the file keeps its values
    assert torch.equal(read(path)["a/b"]["outputs"][0], values["a/b"]["outputs"][0])


def test_a_value_it_cannot_keep_writes_nothing(tmp_path):
    with pytest.raises(Unstorable):
        write(tmp_path / "v.bin", {"f": lambda: 1})
    with pytest.raises(Unstorable):
        write(tmp_path / "v.bin", {"s": torch.eye(3).to_sparse()})
    assert list(tmp_path.iterdir()) == []


def test_a_second_run_loads_the_values_and_judges_alike(cache, computed):
    first = _graded()
    assert computed == ["numpy_additive_attention", "masked_softmax"]
    files = _files(cache)
    assert [f.name for f in files] == [f"masked_softmax-{SEED}.bin", f"numpy_additive_attention-{SEED}.bin"]
    assert all(f.stat().st_mode & 0o777 == 0o600 for f in files)
    assert all(d.stat().st_mode & 0o777 == 0o700 for d in (cache, cache / "expected", files[0].parent))
    computed.clear()
    second = _graded()
    assert computed == [] and second == first and first["score"] == first["max_score"] > 0


def test_a_wrong_submission_is_judged_alike_from_the_store(cache, computed, tmp_path):
    wrong = make_impl(tmp_path / "wrong", {"masked_softmax.py": (SOLUTIONS / "masked_softmax.py").read_text().replace(
        "dim=-1", "dim=-2")})
    fresh = _graded(wrong)
    computed.clear()
    again = _graded(wrong)
    assert computed == [] and again == fresh and fresh["score"] < fresh["max_score"]


def test_a_second_run_reads_the_inputs_digests_and_still_sees_a_write_into_them(cache, monkeypatch, tmp_path):
    """What each call sends is hashed once (grading._inputs_changed) and kept with the values: a run that loads them
    hashes none of its inputs, and still fails the submission that writes into its scores (softmax does not change
    when every score grows by one, so side effects alone fail), exactly as the run that hashed them did."""
    from attnkit import grading

    hashed = []
    real = grading.value_digest
    monkeypatch.setattr(grading, "value_digest", lambda t: hashed.append(1) or real(t))
    writes = make_impl(tmp_path / "writes", {"masked_softmax.py": (SOLUTIONS / "masked_softmax.py").read_text().replace(
        '"""scores: (B, Tq, Tk); valid_lens: None, (B,) or (B, Tq) -> weights (B, Tq, Tk)."""',
        '"""scores: (B, Tq, Tk); valid_lens: None, (B,) or (B, Tq) -> weights (B, Tq, Tk)."""\n    scores.add_(1.0)')})
    fresh = _graded(writes, ["masked_softmax"])
    assert hashed, "the first run hashes what it sends"
    verdicts = {c["id"]: c["status"] for c in fresh["problems"][0]["checks"]}
    assert verdicts["side_effects"] == "failed", verdicts
    hashed.clear()
    again = _graded(writes, ["masked_softmax"])
    assert hashed == [] and again == fresh


def test_no_store_where_a_worker_could_write_it_or_when_off(cache, monkeypatch):
    assert Store.here(jailed=True) is not None
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # not root, and no bubblewrap: the worker has our uid
    assert Store.here(jailed=False) is None
    monkeypatch.setenv("ATTNKIT_CACHE", "off")
    assert Store.here(jailed=True) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="without root and bubblewrap the store is not used at all (above)")
def test_the_store_is_used_as_root_without_bubblewrap(cache, computed):
    _graded(sandbox=False)
    assert len(_files(cache)) == 2


def test_files_not_private_to_this_uid_are_not_read(cache, computed, tmp_path):
    first = _graded()
    victim = next(f for f in _files(cache) if f.name.startswith("masked_softmax"))
    victim.chmod(0o644)  # readable by others: someone else may have written it
    computed.clear()
    assert read(victim) is None and _graded() == first and computed == ["masked_softmax"]
    linked = tmp_path / "elsewhere.bin"
    victim.rename(linked)
    victim.symlink_to(linked)  # a link in the store: not followed
    assert read(victim) is None
    victim.unlink()
    folder = victim.parent
    folder.chmod(0o755)  # the folder open to others: nothing in it is read, nothing written
    computed.clear()
    assert _graded() == first and computed == ["numpy_additive_attention", "masked_softmax"]
    assert not victim.exists()


def test_a_file_naming_code_runs_none_of_it(cache, tmp_path):
    _graded()
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    victim = _files(cache)[0]
    skeleton = pickle.dumps({"x": Evil()})
    victim.write_bytes(MAGIC + len(skeleton).to_bytes(8, "little") + skeleton)
    assert read(victim) is None and not marker.exists()


def test_a_damaged_or_incomplete_file_is_computed_again(cache, computed):
    first = _graded()
    victim = next(f for f in _files(cache) if f.name.startswith("masked_softmax"))
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])  # cut short: its tensors' bytes are missing
    computed.clear()
    assert _graded() == first and computed == ["masked_softmax"]
    values = read(victim)
    del values["values"][sorted(values["values"])[0]]  # a case of the plan missing from the stored values
    write(victim, values)
    computed.clear()
    assert _graded() == first and computed == ["masked_softmax"]


def test_a_write_cut_short_is_removed_once_old(cache, computed):
    _graded()
    folder = _files(cache)[0].parent
    old, new = folder / ".writing-old", folder / ".writing-new"
    for f in (old, new):
        f.write_bytes(b"half a file")
    os.utime(old, (0, 0))
    (folder / "masked_softmax-7.bin").unlink()  # something to save, so that the next run opens the folder
    _graded()
    assert not old.exists() and new.exists()


def test_a_new_kit_fingerprint_replaces_the_old_folder(cache, monkeypatch):
    _graded()
    old = _files(cache)[0].parent
    monkeypatch.setattr(stored, "fingerprint", lambda: "0" * 40)
    _graded()
    assert not old.exists() and [f.parent.name for f in _files(cache)] == ["0" * 40] * 2


@pytest.fixture
def reachable(monkeypatch):
    """A store whose parent folders anyone may cross (pytest's own are 0700): only the store's modes protect it."""
    parent = tempfile.mkdtemp(prefix="attnkit-test-store-")
    os.chmod(parent, 0o711)
    monkeypatch.setenv("ATTNKIT_CACHE", os.path.join(parent, "cache"))
    yield Path(parent) / "cache"
    shutil.rmtree(parent, ignore_errors=True)


@pytest.mark.parametrize("jailed", SANDBOXES)
def test_a_submission_cannot_change_the_store(reachable, tmp_path, jailed):
    if not jailed and os.geteuid() != 0:
        pytest.skip("without root and bubblewrap the store is not used (test_no_store_where_a_worker_could_write_it)")
    cache = reachable
    _graded(sandbox=jailed)
    before = snapshot(cache)
    folder = _files(cache)[0].parent
    hostile = (SOLUTIONS / "masked_softmax.py").read_text() + f'''
import os as _os


def _spoil(folder):
    try:
        names = _os.listdir(folder)
    except OSError:
        names = ["masked_softmax-{SEED}.bin", "numpy_additive_attention-{SEED}.bin"]  # their names are known
    for name in [*names, "new.bin"]:
        for attempt in (lambda p: open(p, "wb").write(b"x"), _os.unlink, lambda p: _os.chmod(p, 0o666)):
            try:
                attempt(_os.path.join(folder, name))
            except OSError:
                pass


_spoil({str(folder)!r})
'''
    impl = make_impl(tmp_path / "hostile", {"masked_softmax.py": hostile})
    report = _graded(impl, sandbox=jailed)
    assert snapshot(cache) == before and report["score"] == report["max_score"]
