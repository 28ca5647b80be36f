"""The docs say true things about the repository: every path and relative link they name exists, every check is
described, the README stays short, and docs/contract.md agrees with the course's shared contract where it is present.
(docs/contract.md being fresh against the specs is test_generated.py's `stale()`.)"""
from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from attnkit import ROOT
from attnkit.dev.docs import section_ids
from attnkit.problems import all_problems

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# A repository path: one of the kit's top-level folders (or .ci/run, pyproject.toml), not inside a longer path or URL.
PATH = re.compile(r"(?<![\w/.~-])((?:grader|docs|tests|exercises|solutions|benchmarks|notebooks|\.ci)/[\w./<>*-]*"
                  r"|pyproject\.toml)")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def repo_paths(text: str) -> list[str]:
    """The repository paths a Markdown text names; `<id>`-style placeholders stand for any name."""
    return sorted({m.rstrip(".,:;") for m in PATH.findall(text)})


def path_exists(path: str, root: Path = ROOT) -> bool:
    pattern = re.sub(r"<[^>]*>", "*", path).rstrip("/")
    if "*" in pattern:
        return any(root.glob(pattern))
    return (root / pattern).exists()


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


def broken_links(path: Path) -> list[str]:
    out = []
    for target in LINK.findall(path.read_text()):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            out.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            out.append(f"{target} (no heading #{anchor} in {dest.name})")
    return out


def test_every_repository_path_the_docs_name_exists():
    missing = [f"{doc.relative_to(ROOT)}: {p}" for doc in DOCS for p in repo_paths(doc.read_text())
               if not path_exists(p)]
    assert missing == []


def test_the_path_scan_finds_paths_and_fails_on_a_bad_one(tmp_path):
    text = ("see `grader/judge/compare.py`, [x](docs/x.md), grader/problems/<id>.py, .ci/run and pyproject.toml;"
            " not /autograder/submission nor https://x.org/tests/a")
    assert repo_paths(text) == [".ci/run", "docs/x.md", "grader/judge/compare.py", "grader/problems/<id>.py",
                                "pyproject.toml"]
    assert not path_exists("docs/x.md") and not path_exists("grader/judge/nothing.py")
    assert path_exists("grader/problems/<id>.py") and path_exists("exercises/")
    (tmp_path / "a.md").write_text("# Top\n\n## Two words\n\n[ok](#two-words) [bad](b.md) [worse](#nowhere)\n")
    assert broken_links(tmp_path / "a.md") == ["b.md (no such file)", "#nowhere (no heading #nowhere in a.md)"]


def test_every_relative_link_between_docs_resolves():
    broken = [f"{doc.relative_to(ROOT)}: {b}" for doc in DOCS for b in broken_links(doc)]
    assert broken == []


def test_the_readme_is_short_and_points_to_every_doc():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    for doc in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{doc.name})" in readme, f"the README's list of docs lacks docs/{doc.name}"
    # CI (.ci/run) runs the README's test commands, word for word
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    for command in ("pytest tests -n 2 --dist loadfile", "pytest tests -m slow -n 2 --dist loadfile"):
        assert f"\n{command}  #" in readme, command
        assert any(line.split("#")[0].strip() == command for line in ci), command


def test_docs_checks_describes_every_registered_check():
    from attnkit.judge.checks import CHECKS

    text = (ROOT / "docs" / "checks.md").read_text()
    rows = re.findall(r"^\| (`[^|]+`) \|", text, re.M)
    described = {cid for row in rows for cid in re.findall(r"`(\w+)`", row)} - {"check"}
    assert described == set(CHECKS), (sorted(set(CHECKS) - described), sorted(described - set(CHECKS)))


# The course's shared contract ---------------------------------------------------------------------------------

SHARED = Path(os.environ.get("ATTNKIT_SHARED_CONTRACT", ROOT.parent / "shared" / "CONTRACT.md"))


def _params(text: str) -> list[tuple[str, str | None]]:
    """[(name, default source or None)] of a parameter list "a, b=2**20", defaults normalised by ast."""
    fn = ast.parse(f"def f({text}): pass").body[0]
    args = [a.arg for a in fn.args.args if a.arg != "self"]
    defaults = [ast.unparse(d) for d in fn.args.defaults]
    return list(zip(args, [None] * (len(args) - len(defaults)) + defaults))


def _arity(returns: str) -> int:
    """How many values a `-> (a, b)` / `-> a` returns at its top level."""
    returns = returns.strip()
    if not returns.startswith("("):
        return 1
    return len(ast.parse(returns, mode="eval").body.elts) if returns else 0


def shared_sections(text: str) -> dict[int, tuple[str, str]]:
    """{number: (heading's code span, or its title where it has none ("ALiBi"), section body)} of the contract's
    numbered sections."""
    heads = list(re.finditer(r"^## (\d+)\. (?:`([^`]+)`.*|(.+))$", text, flags=re.M))
    ends = [h.start() for h in heads[1:]] + [len(text)]
    return {int(h.group(1)): (h.group(2) or h.group(3).strip(), re.split(r"^## ", text[h.end():end], flags=re.M)[0])
            for h, end in zip(heads, ends)}


SIG = r"{name}\(([^()]*(?:\([^()]*\)[^()]*)*)\)(?:\s*->\s*(\([^`]*\)|\w+))?"


def disagreements(shared: str) -> list[str]:
    """Every way the kit's problems differ from the shared contract's signature lines, argument names and defaults,
    returns' arity, section numbers and file table; [] when they agree."""
    from attnkit.dev.docs import _name

    out = []
    sections = shared_sections(shared)
    ours = section_ids((ROOT / "docs" / "contract.md").read_text())[0]
    own = set(ours[max(sections, default=0):])  # numbered after the shared contract's last section: the kit's own (the
    # kernels stage), which docs/contract.md says
    for p in [p for p in all_problems() if p.id not in own]:
        found = [(n, head, body) for n, (head, body) in sections.items()
                 if (head == p.title if p.companions else re.match(rf"{p.symbol}\(", head))]
        if len(found) != 1:
            out.append(f"{p.id}: {len(found)} sections of the shared contract define {p.symbol}")
            continue
        number, head, body = found[0]
        if p.id in ours and ours.index(p.id) + 1 != number:
            out.append(f"{p.id}: section {ours.index(p.id) + 1} of docs/contract.md, {number} of the shared contract")
        calls = [(p.methods[0], head)]
        if p.companions:  # a file of several functions: each one's signature in code in the section's body
            calls = []
            for method in p.methods:
                line = re.search(r"`(" + SIG.format(name=re.escape(_name(method))) + ")`", body)
                if not line:
                    out.append(f"{p.id}: the shared contract's section {number} gives no signature of {_name(method)}")
                    continue
                calls.append((method, line.group(1)))
        if p.is_module:
            forward = re.search(r"`(" + SIG.format(name="forward") + ")`", body)
            if not forward:  # "forward has the same signature ... as `Other.forward`"
                other = re.search(r"same signature.*?`(\w+)\.forward`", body, re.S)
                ref = [b for _, (h, b) in sections.items() if other and h.startswith(other.group(1) + "(")]
                forward = ref and re.search(r"`(" + SIG.format(name="forward") + ")`", ref[0])
            if not forward:
                out.append(f"{p.id}: the shared contract gives no signature of forward")
                continue
            calls.append((p.methods[-1], forward.group(1)))
        for method, line in calls:
            name = p.symbol if method is p.methods[0] and p.is_module else _name(method)
            theirs = re.match(SIG.format(name=re.escape(name)), line)
            if not theirs:
                out.append(f"{p.id}: the shared contract's signature {line!r} does not call {name}")
                continue
            kit_params = re.fullmatch(r"\s*def\s+\w+\((.*)\)\s*:\s*", method.signature).group(1)
            if _params(kit_params) != _params(theirs.group(1)):
                out.append(f"{p.id}: {name}({kit_params}) in the kit, {name}({theirs.group(1)}) in the shared contract")
            kit_arity = len({o.name for o in method.returns if o.role != "cache"}) + any(
                o.role == "cache" for o in method.returns)
            if theirs.group(2) and method.returns and _arity(theirs.group(2)) != kit_arity:
                out.append(f"{p.id}: {name} returns {kit_arity} values in the kit, {theirs.group(2)} in the shared "
                           f"contract")
    table = dict(re.findall(r"^\| `(\w+)\.py` \| (.+?) \|$", shared, re.M))
    for p in [p for p in all_problems() if p.id not in own]:
        row = table.get(p.id)
        if row is None or p.symbol not in row:
            out.append(f"{p.id}: the shared contract's file table has {row!r} for {p.id}.py, not {p.symbol}")
        elif not p.is_module:
            for method in p.methods:
                theirs = re.search(SIG.format(name=re.escape(_name(method))), row)
                kit_params = re.fullmatch(r"\s*def\s+\w+\((.*)\)\s*:\s*", method.signature).group(1)
                if not theirs or _params(theirs.group(1)) != _params(kit_params):
                    out.append(f"{p.id}: the shared contract's file table has {row}, the kit {_name(method)}({kit_params})")
    return out


@pytest.mark.skipif(not SHARED.exists(), reason=f"no shared contract at {SHARED} (a fresh clone has none)")
def test_every_problem_agrees_with_the_shared_contract():
    """Sections 1 to 13 (CONTRACT.md) and, where it is beside it, 14 on (CONTRACT-next.md): the kit's later problems."""
    following = SHARED.with_name("CONTRACT-next.md")
    assert disagreements(SHARED.read_text() + ("\n" + following.read_text() if following.exists() else "")) == []


def test_a_disagreement_with_the_shared_contract_is_found():
    """The comparison is not vacuous: a contract that renames an argument, changes a default, drops a return value
    or renumbers a section is caught (on a synthetic contract built from the kit's own docs, so this runs on CI)."""
    ours = (ROOT / "docs" / "contract.md").read_text()
    assert disagreements(ours) == []
    broken = {
        "rope": ours.replace("## 9. `apply_rope(x, positions, base=10000.0,", "## 9. `apply_rope(x, positions, base=500.0,"),
        "masked_softmax": ours.replace("`masked_softmax(scores, valid_lens=None) -> weights`",
                                      "`masked_softmax(scores, lens=None) -> weights`"),
        "flash_attention": ours.replace("block_k=64) -> (output, lse)`", "block_k=64) -> (output, lse, m)`"),
        "alibi_attention": ours.replace("`alibi_slopes(num_heads) -> slopes`", "`alibi_slopes(n) -> slopes`"),  # a
        # file of several functions: each one's signature is compared
        "linear_attention": ours.replace("## 21. Causal linear attention", "## 21. Linear attention"),
        "multihead_attention": ours.replace("`forward(queries, keys, values, mask=None) -> (output, weights)`\n\n```text\n"
                                            "Per head", "`forward(queries, keys, mask=None) -> (output, weights)`\n\n"
                                            "```text\nPer head"),
    }
    for pid, text in broken.items():
        assert text != ours, pid
        assert any(line.startswith(pid + ":") for line in disagreements(text)), pid
