"""The leaderboard under hostile submissions: agent names that look alike, text that GitHub would turn into live
links or reverse, and entries of the submissions folder that are not regular files."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from countdown_gym.leaderboard import Rejection, Scores, render_markdown, score_directory
from countdown_gym.leaderboard.__main__ import main as lb_main
from countdown_gym.leaderboard.names import agent_key, display_name

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "leaderboard" / "submissions" / "exhaustive-solver.longproc-0.5k.test.jsonl"


def put(d: Path, name: str, **change) -> Path:
    """A copy of a shipped submission under ``name`` with header fields changed."""
    lines = SOURCE.read_text(encoding="utf-8").splitlines()
    header = {**json.loads(lines[0]), **change}
    path = d / name
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    return path


def github_html(md: str) -> str:
    """``md`` as GitHub renders it (cmark-gfm: tables, autolinks, raw HTML kept as GitHub's sanitiser sees it)."""
    return cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)


@pytest.fixture
def board(tmp_path: Path) -> Path:
    d = tmp_path / "lb" / "submissions"
    d.mkdir(parents=True)
    return d


LOOK_ALIKES = [
    "exhaustive-solver ",  # trailing space
    "exhaustive\u200b-solver",  # zero-width space
    " Exhaustive-Solver",  # leading space and a case change
    "\uff45xhaustive-solver",  # full-width e
    "EXHAUSTIVE-SOLVER\u202e",  # case and a right-to-left override
    "exhaustive-solver\ufeff",  # byte-order mark
    "exhaustive-solver\x01",  # control characters
    "exhaustive-solver\x7f",
    "exhaustive-solver\x00",
    "exhaustive\x1b-solver",
    "\u0435xhaustive-s\u043elver",  # Cyrillic e and o
    "exhaustive-\u0455olver",  # Cyrillic dze
    "exhaustive-s\u03bflver",  # Greek omicron
    "exhaustive\u2011solver",  # non-breaking hyphen
    "exhaustive-solver\u2800",  # Braille blank
    "exhaustive-so1ver",  # digit one for l
    "exhaustive-solver \u0301",  # a combining accent with no letter under it
    "\u0301\u20ddexhaustive-solver",  # combining marks before the first letter
    "exhaustive-solver\U000e0041\ufe0f\u2064\u3164",  # a tag, a variation selector, an invisible plus, a filler
]


@pytest.mark.parametrize("name", LOOK_ALIKES)
def test_agent_key_folds_case_width_invisible_characters_and_space(name):
    assert agent_key(name) == agent_key("exhaustive-solver") == "exhaustive-solver"


def test_control_and_confusable_names_are_one_agent_and_render_as_one(board):
    """U+0001 and U+007F once gave a second ranked row, byte-identical in the table; Cyrillic, Greek, U+2011 and
    U+2800 look-alikes gave keys of their own."""
    put(board, "a.longproc-0.5k.test.jsonl", agent="exhaustive-solver")
    tricky = ["exhaustive-solver\x01", "exhaustive-solver\x7f", "\u0435xhaustive-s\u043elver", "exhaustive\u2011solver",
              "exhaustive-solver\u2800", "exhaustive-s\u03bflver"]
    for i, name in enumerate(tricky):
        put(board, f"b{i}.longproc-0.5k.test.jsonl", agent=name)
    put(board, "c.longproc-0.5k.test.jsonl", agent="\u200b\x01\u2800")  # shows as nothing
    results = score_directory(board)
    ranked_names = [r.header["agent"] for r in results if isinstance(r, Scores)]
    assert ranked_names == ["exhaustive-solver"], ranked_names
    reasons = {r.path.name: r.reason for r in results if isinstance(r, Rejection)}
    assert all("already on the board" in reasons[f"b{i}.longproc-0.5k.test.jsonl"] for i in range(len(tricky)))
    assert "shows as nothing" in reasons["c.longproc-0.5k.test.jsonl"]
    md = render_markdown(results, board.parent, None)
    assert md.count("| exhaustive-solver |") == 1 and "\x01" not in md and "\x7f" not in md


@pytest.mark.parametrize("name", ["exhaustive-solver\x01", "exhaustive\x7fsolver", " exhaustive\u2028solver "])
def test_one_function_decides_duplicates_and_renders_names(name):
    shown = display_name(name)
    assert shown.isprintable() and shown == shown.strip() and agent_key(shown) == agent_key(name)


@pytest.mark.parametrize("name", ["\u0301", " \u0301\u0302 ", "\u200b\u20dd", "\x01 \u0336"])
def test_a_name_of_bare_combining_marks_shows_as_nothing(name):
    assert display_name(name) == "" and agent_key(name) == ""


def test_submit_refuses_an_agent_name_that_shows_as_nothing_before_playing(tmp_path, capsys):
    out = tmp_path / "x.jsonl"
    solver = str(ROOT / "baselines" / "reference_agents.py") + ":SolverPolicy"
    for name in ("\u200b\u2063", "\x01\x7f", "\u0301"):
        code = lb_main(["submit", "--policy", solver, "--out", str(out), "--agent", name, "--authors", "a", "--model",
                        "m", "--method", "m", "--reward-variant", "none", "--no-progress", "--preset", "tinyzero",
                        "--split", "validation"])
        err = capsys.readouterr().err
        assert code == 2 and "shows as nothing" in err and "Traceback" not in err, err
    assert not out.exists()


def test_distinct_names_keep_distinct_keys():
    names = ["exhaustive-solver", "exhaustive-solver-2", "random-agent", "sb3-ppo", "sb3-ppo-oracle", "grpo 7b"]
    assert len({agent_key(n) for n in names}) == len(names)


@pytest.mark.parametrize(("first", "second"), [("exhaustive-solver", "exhaustive-soIver"), ("HARD-AGENT", "\u0397ARD-AGENT")])
def test_capital_look_alikes_that_case_folding_loses_are_one_agent(board, first, second):
    """Case folding before the skeleton made a capital I an i and a Greek capital eta an eta (like n): a capital I for
    an l, or a Greek H, was ranked as an agent of its own beside the name it copies."""
    put(board, "a.longproc-0.5k.test.jsonl", agent=first)
    put(board, "b.longproc-0.5k.test.jsonl", agent=second)
    a, b = score_directory(board)
    assert isinstance(a, Scores) and isinstance(b, Rejection) and "already on the board" in b.reason, b


def test_look_alike_agent_names_are_one_agent_on_the_board(board, capsys):
    put(board, "a.longproc-0.5k.test.jsonl", agent="exhaustive-solver")
    for i, name in enumerate(LOOK_ALIKES[:3]):
        put(board, f"b{i}.longproc-0.5k.test.jsonl", agent=name)
    results = {r.path.name: r for r in score_directory(board)}
    assert isinstance(results["a.longproc-0.5k.test.jsonl"], Scores)
    for i in range(3):
        r = results[f"b{i}.longproc-0.5k.test.jsonl"]
        assert isinstance(r, Rejection) and "already on the board" in r.reason and "one agent" in r.reason, r
    assert lb_main(["score", "--dir", str(board.parent), "--no-progress"]) == 0
    assert lb_main(["check", "--dir", str(board.parent)]) == 1  # a rejected file fails the check
    assert capsys.readouterr().err.count("already on the board") >= 3


def test_no_untrusted_text_becomes_a_live_link_or_reverses_the_table(board):
    hostile = {
        "url.longproc-0.5k.test.jsonl": dict(agent="https://evil.example/login", method="see HTTP://EVIL.EXAMPLE/x"),
        "www.longproc-0.5k.test.jsonl": dict(agent="www.evil.example", model="WWW.evil.example/login"),
        "mail.longproc-0.5k.test.jsonl": dict(agent="mailto:boss@evil.example", authors="Eve <eve@evil.example>"),
        "rlo.longproc-0.5k.test.jsonl": dict(agent="gpt\u202e4-lmth.exe", notes="x"),
        "entity.longproc-0.5k.test.jsonl": dict(agent="gpt&rlm;4&ZeroWidthSpace;", method="&#x202e;&#x68;ttps://evil.example"),
        "xmpp.longproc-0.5k.test.jsonl": dict(agent="xmpp:eve@evil.example", reward_variant="none"),
        # GitHub renders $...$ as LaTeX (its Markdown escapes first: \\rule becomes \rule, a box over the page)
        "math.longproc-0.5k.test.jsonl": dict(agent="$\\rule{99em}{99em}$", method="$$\\Huge{WINNER}$$"),
    }
    for name, change in hostile.items():
        put(board, name, **change)
    results = score_directory(board)
    assert all(isinstance(r, Scores) for r in results)
    md = render_markdown(results, board.parent, None)
    html = github_html(md)
    links = re.findall(r'<a href="([^"]*)"', html)
    assert links and all(not re.match(r"(?i)[a-z]+:|www\.", href) and href.startswith("submissions/") for href in links), links
    assert not any(c in text for c in "\u202e\u200f\u200b" for text in (md, html))  # also none from an entity
    assert "https://evil.example/login" in html.replace("\\", "")  # the text is still shown, inert
    assert "eve@<!-- -->evil.example" in md
    assert re.search(r"(?<!\\)\$", md) is None and "\\$\\\\rule" in md  # every $ escaped: no math
    rows = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line and "rank" not in line]
    assert len(rows) == len(hostile)
    assert html.count("<tr>") == len(hostile) + 1 and html.count("<td") == 15 * len(hostile)


def test_links_fifos_dangling_links_and_folders_are_listed_as_rejected(board, tmp_path):
    put(board, "ok.longproc-0.5k.test.jsonl", agent="ok")
    (board / "passwd.longproc-0.5k.test.jsonl").symlink_to("../../../../../../../../etc/passwd")
    (board / "dangling.longproc-0.5k.test.jsonl").symlink_to(tmp_path / "nowhere")
    (board / "folder.longproc-0.5k.test.jsonl").mkdir()
    os.mkfifo(board / "fifo.longproc-0.5k.test.jsonl")  # opening it would block the scorer
    (board / ".gitkeep").write_text("")
    results = {r.path.name: r for r in score_directory(board)}
    assert set(results) == {"ok.longproc-0.5k.test.jsonl", "passwd.longproc-0.5k.test.jsonl",
                            "dangling.longproc-0.5k.test.jsonl", "folder.longproc-0.5k.test.jsonl",
                            "fifo.longproc-0.5k.test.jsonl"}
    assert isinstance(results.pop("ok.longproc-0.5k.test.jsonl"), Scores)
    reasons = {name: r.reason for name, r in results.items()}
    assert "symbolic link" in reasons["passwd.longproc-0.5k.test.jsonl"]
    assert "symbolic link" in reasons["dangling.longproc-0.5k.test.jsonl"]
    assert "a folder" in reasons["folder.longproc-0.5k.test.jsonl"]
    assert "a FIFO" in reasons["fifo.longproc-0.5k.test.jsonl"]
    md = render_markdown(list(score_directory(board)), board.parent, None)
    assert "etc/passwd" not in md and "`submissions/passwd.longproc-0.5k.test.jsonl`" in md
    assert md.count("\n- `submissions/") == 4


def test_a_file_name_cannot_write_a_line_or_an_escape_into_the_log(board, capsys):
    """A submission named ``x\\n::error::...\\x1b[31m.jsonl`` printed its name raw: a line of its own in CI's log (a
    GitHub workflow command) and a terminal escape."""
    put(board, "x\n::error::injected\x1b[31mred.jsonl")
    put(board, "ok.longproc-0.5k.test.jsonl", agent="ok")
    assert lb_main(["check", "--dir", str(board.parent)]) == 1
    assert lb_main(["score", "--dir", str(board.parent), "--no-progress"]) == 0
    assert lb_main(["score", "--no-progress", *map(str, board.iterdir())]) == 0  # named files: scored, names unchecked
    out = capsys.readouterr()
    lines = (out.out + out.err).splitlines()
    assert not any(line.startswith("::") for line in lines) and "\x1b" not in out.out + out.err, lines
    assert sum("::error::injected" in line for line in lines) == 3


# ---- properties (derandomised in CI: tests/conftest.py) ----------------------------------------------------------

INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u202e", "\u2066", "\u180e", "\ufe0f"]
SPACE = [" ", "\t", "\u00a0", "\u3000", "\u2003"]


@st.composite
def look_alike(draw, base: str) -> str:
    """``base`` with some letters in the other case, some ASCII characters full-width, invisible characters put in
    and spaces around it."""
    out = []
    for c in base:
        if draw(st.booleans()) and c.swapcase().casefold() == c.casefold():
            c = c.swapcase()
        c = "".join(chr(ord(x) + 0xFEE0) if "!" <= x <= "~" and draw(st.booleans()) else x for x in c)  # full-width
        out.append(c + "".join(draw(st.lists(st.sampled_from(INVISIBLE), max_size=2))))
    lead, trail = (draw(st.text(st.sampled_from(SPACE), max_size=3)) for _ in range(2))
    return lead + "".join(draw(st.lists(st.sampled_from(INVISIBLE), max_size=2))) + "".join(out) + trail


NAME = st.text(st.characters(categories=["L", "N"], include_characters="-_. "), min_size=1, max_size=30).filter(
    lambda s: s.strip())


@settings(max_examples=300, deadline=None)
@given(data=st.data(), base=NAME)
def test_names_differing_in_case_width_invisible_characters_or_surrounding_space_collide(data, base):
    other = data.draw(look_alike(base))
    assert agent_key(other) == agent_key(base), (base, other)


@pytest.fixture(scope="module")
def two_answer_submission(tmp_path_factory) -> Path:
    """tinyzero/validation with two answers a problem: right, wrong, malformed or moves-free, in a varied mix."""
    from countdown_gym import load_split, solve
    from countdown_gym.leaderboard import write_submission

    answers = []
    for i, p in enumerate(load_split("tinyzero", "validation")):
        right = f"<answer>{solve(p, limit=1)[0]}</answer>"
        answers.append([[right, "<answer>1+1</answer>", "no answer", f"<think>{i}</think>{right}"][i % 4],
                        [right, "<answer>(((</answer>"][i % 3 == 0]])
    return write_submission(tmp_path_factory.mktemp("lb") / "mix.tinyzero.validation.jsonl", preset="tinyzero",
                            split="validation", answers=answers, sampling={"k": 2, "temperature": 1.0}, agent="mix",
                            authors="t", model="m", model_size="0", method="m", reward_variant="none", compute="-",
                            command="-")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(range(200)))
def test_reordering_a_submissions_lines_changes_neither_its_scores_nor_its_rank(two_answer_submission, tmp_path, order):
    from countdown_gym.leaderboard import score_file
    from countdown_gym.leaderboard.score import ranked

    lines = two_answer_submission.read_text(encoding="utf-8").splitlines(keepends=True)
    shuffled = tmp_path / "mix.tinyzero.validation.jsonl"
    shuffled.write_text(lines[0] + "".join(lines[1 + i] for i in order), encoding="utf-8")
    a, b = score_file(two_answer_submission), score_file(shuffled)
    assert isinstance(a, Scores) and isinstance(b, Scores)
    fields = ("pass_at_1", "pass_at_k", "per_sample", "invalid_step_rate", "mean_length", "num_answers", "failure_reasons")
    assert {f: getattr(a, f) for f in fields} == {f: getattr(b, f) for f in fields}
    rival = dataclasses.replace(a, header={**a.header, "agent": "rival"}, pass_at_1=a.pass_at_1 - 1e-12)
    for board in ([a, rival], [b, rival]):
        assert [(rank, s.header["agent"]) for rank, s in ranked(board)[("tinyzero", "validation")]] == [(1, "mix"), (1, "rival")]


def test_score_replaces_a_fifo_or_link_it_would_write_and_names_an_output_it_cannot(board, capsys):
    """The table, chart and page are written aside and renamed: a FIFO or a link at their names is replaced, never
    opened (opening a FIFO would block), and a folder there is one error line, exit 1."""
    put(board, "a.longproc-0.5k.test.jsonl", agent="exhaustive-solver")
    d = board.parent
    os.mkfifo(d / "leaderboard.html")
    (d / "LEADERBOARD.md").symlink_to(d / "elsewhere.md")
    assert lb_main(["score", "--dir", str(d), "--no-progress"]) == 0
    assert (d / "leaderboard.html").is_file() and not (d / "LEADERBOARD.md").is_symlink()
    assert not (d / "elsewhere.md").exists() and not list(d.glob("*.tmp")) and not list(d.glob("*.old"))
    assert lb_main(["check", "--dir", str(d)]) == 0
    (d / "leaderboard.png").unlink()
    (d / "leaderboard.png").mkdir()
    capsys.readouterr()
    assert lb_main(["score", "--dir", str(d), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "error: cannot write" in err and "leaderboard.png" in err and "Traceback" not in err
    # refused before anything is written: a journal left behind made every check fail naming a .part file
    assert not list(d.glob("*.part*")) and lb_main(["check", "--dir", str(d)]) == 1
    err = capsys.readouterr().err
    assert "leaderboard.png is missing" in err and ".part" not in err


@pytest.mark.parametrize("kill_at", ["part", 0, 1, 2])
def test_a_kill_while_score_renames_is_finished_by_the_next_check(board, monkeypatch, capsys, kill_at):
    """score renamed the table, chart and page with no record of them: a kill between the renames left files of two
    scorings, stale until the next score. Now a journal names the renames (``dataclass_cli.write_together``, the page
    last) and the next check (or score) finishes them; a kill before the journal leaves the old board whole, which
    check calls stale, naming the command that mends it. A journal that is not one is a clear error."""
    d = board.parent
    put(board, "a.longproc-0.5k.test.jsonl", agent="exhaustive-solver")
    assert lb_main(["score", "--dir", str(d), "--no-progress"]) == 0
    before = {name: (d / name).read_bytes() for name in ("LEADERBOARD.md", "leaderboard.png", "leaderboard.html")}
    put(board, "b.longproc-0.5k.test.jsonl", agent="another-agent")  # every file changes
    real, renamed = os.replace, []

    def replace(src, dst):
        if Path(dst).name in before:  # a whole file replaces the board's
            if len(renamed) == kill_at:
                raise KeyboardInterrupt  # the kill
            renamed.append(Path(dst).name)
        elif kill_at == "part":  # a file written aside
            raise KeyboardInterrupt
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    assert lb_main(["score", "--dir", str(d), "--no-progress"]) == 130
    monkeypatch.setattr(os, "replace", real)
    assert [name for name, data in before.items() if (d / name).read_bytes() != data] == renamed
    capsys.readouterr()
    if kill_at == "part":
        assert not renamed and not list(d.glob("*.part*")) and lb_main(["check", "--dir", str(d)]) == 1
        err = capsys.readouterr().err
        assert "is stale" in err and "run countdown-gym leaderboard score" in err
        assert lb_main(["score", "--dir", str(d), "--no-progress"]) == 0
    else:
        assert renamed == list(before)[:kill_at]  # the page last
    assert lb_main(["check", "--dir", str(d)]) == 0 and not list(d.glob("*.part*")) and not list(d.glob("*.tmp"))
    assert all((d / name).read_bytes() != data for name, data in before.items())
    (d / "leaderboard.html.parts").write_text("[1, 2]")
    with pytest.raises(SystemExit, match="leaderboard.html.parts: not the journal of an interrupted write"):
        lb_main(["check", "--dir", str(d)])
