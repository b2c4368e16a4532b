"""Every relative link and image in README.md and docs/**/*.md resolves: the file exists, and an anchor
(`doc.md#a-heading`) names a heading of that file (GitHub's heading ids)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1", flags=re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_REF = re.compile(r"<(?:img|a)\s[^>]*?(?:src|href)=\"([^\"]+)\"", flags=re.I)


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where a ``[..](..)`` is not a link."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def links(path: Path) -> list[str]:
    text = prose(path.read_text(encoding="utf-8"))
    return LINK.findall(text) + HTML_REF.findall(text)


def slug(heading: str) -> str:
    """GitHub's id of a heading: markup dropped, lower case, punctuation removed, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    ids = set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        ids.add(base if n == 0 else f"{base}-{n}")
    ids.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", path.read_text(encoding="utf-8")))
    return frozenset(ids)


def broken(path: Path) -> list[str]:
    bad = []
    for target in links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, flags=re.I):  # https:, mailto:, ...
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor.lower() not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {dest.name}")
    return bad


def test_the_checker_sees_links_images_and_anchors(tmp_path: Path) -> None:
    doc = tmp_path / "a.md"
    doc.write_text("# Top `x.py` (here)\n\n## Two\n\n## Two\n\n[ok](#top-xpy-here) [ok](#two-1) ![img](b.png)\n"
                   "[gone](missing.md) [bad](#three) `[code](not-a-link.md)` [web](https://example.org/x.md)\n"
                   "```\n[fenced](nope.md)\n```\n", encoding="utf-8")  # fmt: skip
    (tmp_path / "b.png").write_bytes(b"")
    assert broken(doc) == ["missing.md: no such file", "#three: no heading #three in a.md"]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_images_resolve(path: Path) -> None:
    assert broken(path) == [], f"{path.relative_to(ROOT)}: broken links"
