"""Every relative link in README.md, CHANGELOG.md and docs/ (the notebook included) leads
somewhere: the file exists and, with an anchor, the file has a heading whose GitHub anchor it
is. Reference pages link to the notebook entry each number comes from, and sections get renamed
as results change; a broken link is the first thing a new user follows."""

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted(ROOT.glob("CHANGELOG.md")), *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation (backticks, dots, colons,
    parentheses, dashes other than '-') dropped, spaces to hyphens."""
    text = heading.strip().lower()
    kept = "".join(c for c in text
                   if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", path.read_text()).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = github_anchor(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def relative_links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text())
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z]+:", t)]


def test_anchor_rule_on_headings_the_docs_use():
    assert github_anchor("How far one machine goes (`bench/scale.py`)") == \
        "how-far-one-machine-goes-benchscalepy"
    assert github_anchor("All 20 cells with the handshake, and the CPU per cell (3 December)") == \
        "all-20-cells-with-the-handshake-and-the-cpu-per-cell-3-december"
    assert github_anchor("Restarting the window: MLTCP-DCTCP with `restart`") == \
        "restarting-the-window-mltcp-dctcp-with-restart"


def broken_links(doc: Path) -> list[str]:
    broken = []
    for target in relative_links(doc):
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.name}")
    return broken


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(doc):
    broken = broken_links(doc)
    assert not broken, f"{doc.relative_to(ROOT)}: " + "; ".join(broken)

def test_a_broken_anchor_and_a_missing_file_are_found(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("# Top\n\n## Two `words`\n\n```\n## not a heading\n```\n\n"
                   "[ok](#two-words) [bad](#not-a-heading) [gone](b.md) [web](https://x.org/#y)\n")
    assert anchors(doc) == {"top", "two-words"}
    assert relative_links(doc) == ["#two-words", "#not-a-heading", "b.md"]
    assert broken_links(doc) == ["#not-a-heading: no heading with that anchor in a.md", "b.md: no such file"]
