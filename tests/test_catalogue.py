"""The translations' catalogue (grader/problems/<lang>/<id>.json, grader/model/i18n.py) is checked against its spec
when the spec is first loaded: a missing text and a key that translates nothing in the spec each fail with a
SpecError naming the catalogue file and the key, before any grading, whatever language was asked for."""
from __future__ import annotations

import json
import shutil

import pytest

import attnkit.problems as registry
from attnkit.errors import SpecError
from attnkit.problems import ORDER, get

SHIPPED = registry.CATALOGUES / "zh"


@pytest.fixture
def catalogue(tmp_path, monkeypatch):
    """A throwaway copy of the Chinese catalogue, loaded in its place: edit(pid, change) rewrites one entry."""
    shutil.copytree(SHIPPED, tmp_path / "zh")
    monkeypatch.setattr(registry, "CATALOGUES", tmp_path)

    def edit(name: str, change) -> None:
        path = tmp_path / "zh" / f"{name}.json"
        entry = json.loads(path.read_text(encoding="utf-8"))
        change(entry)
        path.write_text(json.dumps(entry, ensure_ascii=False), encoding="utf-8")

    return edit


def _fails(pid: str, *words: str) -> str:
    with pytest.raises(SpecError) as info:
        get(pid, "en")  # the English spec: every language's catalogue is checked at the first load
    message = str(info.value)
    assert all(w in message for w in words), message
    return message


def test_the_copy_loads_as_the_shipped_one(catalogue):
    assert get("masked_softmax", "zh").title == "带掩码的 softmax"


def test_a_missing_mistake_text_fails_at_load(catalogue):
    catalogue("masked_softmax", lambda e: e["mistakes"]["wrong_axis"].pop("hint"))
    _fails("masked_softmax", "masked_softmax.json", "zh/", "missing translation 'mistakes.wrong_axis.hint'",
           "spec grader/problems/masked_softmax.py has it")


def test_a_missing_mistake_fails_at_load(catalogue):
    catalogue("luong_attention", lambda e: e["mistakes"].pop("dot_no_dim_check"))
    _fails("luong_attention", "zh/luong_attention.json", "missing translation 'mistakes.dot_no_dim_check.name'")


@pytest.mark.parametrize("key,change", [
    ("hints[2]", lambda e: e["hints"].pop()),
    ("statements[0]", lambda e: e["statements"].__setitem__(0, "  ")),
    ("class_doc", lambda e: e.pop("class_doc")),
    ("title", lambda e: e.pop("title")),
])
def test_each_missing_text_is_named(catalogue, key, change):
    catalogue("additive_attention", change)
    _fails("additive_attention", "zh/additive_attention.json", f"missing translation {key!r}")


@pytest.mark.parametrize("pid,key,change", [
    ("masked_softmax", "mistakes.not_a_mistake.name",
     lambda e: e["mistakes"].__setitem__("not_a_mistake", {"name": "不存在", "explain": "不存在", "hint": "不存在"})),
    ("masked_softmax", "hints[3]", lambda e: e["hints"].append("多出来的提示")),
    ("masked_softmax", "class_doc", lambda e: e.__setitem__("class_doc", "函数题没有类")),  # a function problem
    ("masked_softmax", "summery", lambda e: e.__setitem__("summery", "拼错的键")),
    ("masked_softmax", "mistakes.wrong_axis.explains", lambda e: e["mistakes"]["wrong_axis"].__setitem__("explains", "多余")),
])
def test_an_unknown_key_fails_at_load(catalogue, pid, key, change):
    catalogue(pid, change)
    _fails(pid, f"zh/{pid}.json", f"unknown key {key!r}", f"spec grader/problems/{pid}.py has no such text")


def test_shared_groups_are_checked(catalogue):
    catalogue("luong_attention", lambda e: e.__setitem__("shared", ["dropout", "droput"]))
    _fails("luong_attention", "zh/luong_attention.json", "key 'shared' names unknown group 'droput'")


def test_a_text_has_one_home(catalogue):
    shared = json.loads((SHIPPED / "_shared.json").read_text(encoding="utf-8"))["mistakes"]["dropout"]
    catalogue("luong_attention", lambda e: e["mistakes"].update({"dropout_wrong_p": shared["dropout_wrong_p"]}))
    _fails("luong_attention", "zh/luong_attention.json", "'mistakes.dropout_wrong_p' is also in group 'dropout'")


def test_a_missing_catalogue_file_fails_at_load(catalogue, tmp_path):
    (tmp_path / "zh" / "rope.json").unlink()
    _fails("rope", "zh/rope.json is missing", "spec grader/problems/rope.py needs its zh texts")


def test_the_command_line_names_it_in_one_line(catalogue, tmp_path, monkeypatch, capsys):
    from attnkit.fronts.cli import main

    monkeypatch.setenv("ATTNKIT_STATE", str(tmp_path / "state.json"))
    catalogue("masked_softmax", lambda e: e["hints"].pop(0))
    code = main(["hint", "masked", "--lang", "en"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1 and "zh/masked_softmax.json" in err[0] and "'hints[2]'" in err[0], err


def test_every_catalogue_entry_belongs_to_a_spec():
    names = {p.stem for p in SHIPPED.glob("*.json")} - {"_shared"}
    assert names == set(ORDER)
    groups = json.loads((SHIPPED / "_shared.json").read_text(encoding="utf-8"))["mistakes"]
    used = {g for pid in ORDER for g in json.loads((SHIPPED / f"{pid}.json").read_text(encoding="utf-8")).get("shared", ())}
    assert used == set(groups), "a shared group no catalogue names"
