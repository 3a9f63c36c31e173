"""Every relative link in README.md and docs/*.md resolves: to a file or folder of the repository,
and, with a `#fragment`, to a heading of the linked page (GitHub's anchors: lower case, spaces to
hyphens, punctuation dropped)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")


def links(page: Path) -> list[str]:
    text = CODE.sub("", FENCE.sub("", page.read_text()))
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a markdown page."""
    found = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        if m := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line):
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            found.add(slug)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in links(page):
        path, _, fragment = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        shown = dest.relative_to(ROOT).as_posix() if dest.is_relative_to(ROOT) else str(dest)
        if not dest.exists():
            broken.append(f"{target}: no {shown}")
            continue
        if fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: {shown} has no heading #{fragment}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_anchor_rule_matches_githubs() -> None:
    """The slugs the docs link to, as GitHub makes them from these headings."""
    page = ROOT / "docs" / "contracts.md"
    assert {"1-the-sql-file", "2-accounting-rules-the-ledger", "4-compare",
            "5-a-run-on-a-server-names-secrets-ownership-interrupts"} <= anchors(page)


def test_readme_is_an_entry_page() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
