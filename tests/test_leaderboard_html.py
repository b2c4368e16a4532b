"""The leaderboard page ``leaderboard.html``: the rows of ``LEADERBOARD.md``, sortable, every submitted string inert,
nothing fetched at view time; opened in headless Chromium (skipped without it), with a screenshot kept."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from countdown_gym.leaderboard.__main__ import HTML, MARKDOWN, main
from countdown_gym.leaderboard.html import CSP, model_card
from countdown_gym.leaderboard.score import _md

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "leaderboard" / "submissions"
HOSTILE_AGENT = '<script>document.title="pwned"</script>'
HOSTILE_COMMAND = '"></code></details><img src=x onerror="document.title=\'pwned\'"><a href="https://evil.example">x</a>'


class Page(HTMLParser):
    """The tags, attributes, table rows (cell texts) and title of an HTML document."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.rows: list[list[str]] = []
        self.title = ""
        self._cell: list[str] | None = None
        self._in_body = self._in_title = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.rows.append([])
        elif tag == "td" and self._in_body:
            self._cell = []
        elif tag == "title":
            self._in_title = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "tbody":
            self._in_body = False
        elif tag == "td" and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._in_title:
            self.title += data


def _put(board: Path, source: str, name: str, **change: str) -> None:
    lines = (SHIPPED / source).read_text(encoding="utf-8").splitlines()
    header = {**json.loads(lines[0]), **change}
    (board / name).write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository-like folder: a model card, and a leaderboard of four submissions (one hostile) scored."""
    root = tmp_path_factory.mktemp("repo")
    card = root / "models" / "tiny"
    card.mkdir(parents=True)
    (card / "README.md").write_text("# a model card\n", encoding="utf-8")
    subs = root / "leaderboard" / "submissions"
    subs.mkdir(parents=True)
    shutil.copy(SHIPPED / "random-legal.longproc-0.5k.test.jsonl", subs)
    shutil.copy(SHIPPED / "maskableppo-sparse.longproc-0.5k.test.jsonl", subs)
    _put(subs, "exhaustive-solver.longproc-0.5k.test.jsonl", "hostile.longproc-0.5k.test.jsonl", agent=HOSTILE_AGENT,
         command=HOSTILE_COMMAND, method="<b>bold</b> & \u202eevil", model="../../etc")
    _put(subs, "exhaustive-solver.longproc-0.5k.test.jsonl", "carded.longproc-0.5k.test.jsonl", agent="carded-agent",
         model="models/tiny")
    assert main(["score", "--dir", str(root / "leaderboard"), "--no-progress"]) == 0
    return root / "leaderboard"


def _markdown_rows(md: str) -> list[list[str]]:
    lines = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith(("| rank", "| ---"))]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]


def _same_rows(html_rows: list[list[str]], md_rows: list[list[str]]) -> None:
    """Each page row is the Markdown row of the same rank: every figure, the agent, the file."""
    assert len(html_rows) == len(md_rows)
    by_file = {row[14].split("](")[0].lstrip("["): row for row in md_rows}
    for row in html_rows:
        md = by_file[_md(row[14], 60)]
        assert [row[0], *row[6:12]] == [md[0], *md[6:12]]  # rank, pass@1, pass@k, per-sample, invalid, length, answers
        assert _md(row[1], 40) == md[1] and row[3] == md[3]  # agent (as the Markdown shows it), mode


def test_page_has_the_markdown_rows_escaped_and_nothing_to_fetch(board: Path) -> None:
    text = (board / HTML).read_text(encoding="utf-8")
    page = Page(text)
    _same_rows(page.rows, _markdown_rows((board / MARKDOWN).read_text(encoding="utf-8")))
    assert main(["check", "--dir", str(board)]) == 0  # the page is part of what check compares
    assert [t for t, _ in page.tags].count("script") == 1 and [t for t, _ in page.tags].count("img") == 1
    assert not any(k.startswith("on") for _, attrs in page.tags for k in attrs)
    links = [a["href"] for t, a in page.tags if t == "a"]
    assert links and not any(re.match(r"(?i)[a-z][a-z0-9+.-]*:|//", h or "") for h in links), links  # relative only
    assert {a["src"][:22] for t, a in page.tags if t == "img"} == {"data:image/png;base64,"}
    assert f'content="{CSP}"' in text and "default-src 'none'" in CSP
    hostile = next(r for r in page.rows if r[1] == HOSTILE_AGENT)  # shown as text
    assert HOSTILE_COMMAND in hostile[13] and "\u202e" not in text and "<b>bold</b> &amp;" not in hostile[2]
    assert "model card" not in hostile[4]  # ../../etc is outside the repository: no link
    carded = next(r for r in page.rows if r[1] == "carded-agent")
    assert "model card" in carded[4] and "../models/tiny/README.md" in links


def test_model_card_links_only_readme_files_inside_the_repository(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "README.md").write_text("card")
    (tmp_path / "bare").mkdir()
    base = tmp_path / "leaderboard"
    base.mkdir()
    assert model_card("m", tmp_path, base) == "../m/README.md" == model_card("m/README.md", tmp_path, base)
    for model in ("bare", "../m", "/etc", "m/../../m", "https://evil.example/m", "", "x\x00", 5, None):
        assert model_card(model, tmp_path, base) in (None, "../m/README.md" if model == "m/../../m" else None)


def test_check_fails_on_a_stale_or_missing_page(board: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "leaderboard"
    shutil.copytree(board, copy)
    (copy / HTML).write_text((copy / HTML).read_text(encoding="utf-8").replace("carded-agent", "someone-else"))
    assert main(["check", "--dir", str(copy)]) == 1 and "leaderboard.html is stale" in capsys.readouterr().err
    (copy / HTML).unlink()
    assert main(["check", "--dir", str(copy)]) == 1 and "leaderboard.html is missing" in capsys.readouterr().err
    (copy / "LEADERBOARD.md").write_bytes(b"\xff\xfe# not UTF-8\n")  # was an error line naming no file
    assert main(["check", "--dir", str(copy)]) == 1 and "LEADERBOARD.md is stale" in capsys.readouterr().err


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _browse(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium on ``page`` with every host name unresolvable (a fetch at view time could not succeed)."""
    command = [_chromium() or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--host-resolver-rules=MAP * ~NOTFOUND", "--no-first-run", "--hide-scrollbars",
               f"--user-data-dir={page.parent / '.chromium-profile'}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.skipif(_chromium() is None, reason="needs Debian's chromium package (apt-get install -y chromium) to "
                                                "open the page in a headless browser")
def test_page_in_headless_chromium_sorts_and_matches_the_markdown(board: Path, tmp_path: Path) -> None:
    url = (board / HTML).resolve().as_uri()
    dom = _browse(tmp_path / "x", "--dump-dom", url + "#sort=pass@1:asc")
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = Page(dom.stdout)
    assert page.title == "countdown-gym leaderboard"  # no injected script ran
    _same_rows(page.rows, _markdown_rows((board / MARKDOWN).read_text(encoding="utf-8")))
    ascending = [float(r[6]) for r in page.rows]
    assert ascending == sorted(ascending) and ascending[0] < ascending[-1]  # the page's script sorted the table
    assert any(a.get("aria-sort") == "ascending" and a.get("data-column") == "pass@1" for t, a in page.tags if t == "th")
    shot = tmp_path / "leaderboard.png"
    run = _browse(tmp_path / "x", f"--screenshot={shot}", "--window-size=1500,1100", url)
    assert run.returncode == 0 and shot.stat().st_size > 10_000, run.stderr[-2000:]
    print(f"screenshot of the leaderboard page: {shot}")


@pytest.mark.skipif(_chromium() is None, reason="needs Debian's chromium package")
def test_a_malformed_percent_escape_in_the_address_does_not_stop_the_page_script(board: Path, tmp_path: Path) -> None:
    """decodeURIComponent threw on a link ending in '#sort=%E0': the script stopped before it wired the filter box."""
    url = (board / HTML).resolve().as_uri() + "#sort=%E0"
    run = _browse(tmp_path / "x", "--enable-logging=stderr", "--v=0", "--dump-dom", url)
    assert run.returncode == 0 and "CONSOLE" not in run.stderr, run.stderr[-2000:]
