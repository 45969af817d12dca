"""Every relative link in README.md, ARCHITECTURE.md and docs/*.md points at a file that
exists, and where it names a section (``page.md#section``), at a heading of that page
(GitHub's anchors: lower case, punctuation dropped, spaces as hyphens)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "ARCHITECTURE.md", *sorted((REPO / "docs").glob("*.md"))]
# [text](target) and ![alt](target), not inside code spans or fences.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
CODE = re.compile(r"`[^`\n]*`")


def prose(text: str) -> str:
    return CODE.sub("", FENCE.sub("", text))


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``page`` (a repeated one gets -1, -2 ...)."""
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text()))
            if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]   # http:, https:, mailto: ...


def test_the_pages_are_there():
    assert len(PAGES) > 3 and all(p.exists() for p in PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page):
    broken = []
    for target in relative_links(page):
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(REPO) if file.is_relative_to(REPO) else file}")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file):
            broken.append(f"{target}: no heading with anchor #{fragment} in {file.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)}:\n  " + "\n  ".join(broken)


def test_the_checker_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A title\n\n[ok](#a-title) [bad](missing.md) `[not a link](x.md)`\n\n"
                    "```\n[in a fence](y.md)\n```\n")
    assert relative_links(page) == ["#a-title", "missing.md"]
    assert anchors(page) == {"a-title"}
