"""Leaderboard: submission format, re-scoring, tampered files, the CLI and the shipped table."""

from __future__ import annotations

import json
import os
import shlex
import time
from fractions import Fraction
from itertools import combinations
from pathlib import Path

import jsonschema
import pytest

from countdown_gym import load_split, solution_path, solve
from countdown_gym.cli import main as cli_main
from countdown_gym.game.verifier import verify
from countdown_gym.leaderboard import (
    Rejection,
    Scores,
    SubmissionError,
    load_schema,
    moves_to_solution,
    pass_at_k,
    read_submission,
    render_markdown,
    score_directory,
    score_file,
    write_submission,
)
from countdown_gym.leaderboard.__main__ import main as lb_main
from countdown_gym.leaderboard.score import plot
from countdown_gym.leaderboard.submission import MAX_COMPLETION_CHARS, _strict_problem_line

ROOT = Path(__file__).resolve().parents[1]
PRESET, SPLIT = "tinyzero", "validation"  # 200 problems: small and fast
META = dict(
    agent="test-agent", authors="Tester <t@example.org>", model="none", model_size="0", method="solver",
    reward_variant="none", compute="1 core", command="pytest", date="2026-11-22",
)  # fmt: skip


@pytest.fixture(scope="module")
def problems():
    return load_split(PRESET, SPLIT)


@pytest.fixture(scope="module")
def good(tmp_path_factory, problems) -> Path:
    """A valid completions submission: every first answer correct, the second one wrong."""
    answers = [[f"<think>search</think><answer>{solve(p, limit=1)[0]}</answer>", "<answer>1+1</answer>"] for p in problems]
    path = tmp_path_factory.mktemp("lb") / "good.jsonl"
    return write_submission(path, preset=PRESET, split=SPLIT, answers=answers, sampling={"k": 2, "temperature": 0.7}, **META)


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def tamper(src: Path, dst: Path, edit) -> Path:
    """Copy ``src`` to ``dst`` with ``edit(list_of_json_objects)`` applied."""
    objs = [json.loads(line) for line in lines_of(src)]
    edit(objs)
    dst.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return dst


def rejected(path: Path, *needles: str) -> str:
    r = score_file(path)
    assert isinstance(r, Rejection), f"expected a rejection, got {r}"
    with pytest.raises(SubmissionError) as e:
        read_submission(path)
    assert path.name in str(e.value)
    for needle in needles:
        assert needle in r.reason, r.reason
    return r.reason


# ---- format and scoring ---------------------------------------------------------------------------


def test_round_trip_and_scores(good, problems):
    sub = read_submission(good)
    assert [pa.problem for pa in sub.answers] == problems
    assert sub.header["split_sha256"] and sub.header["answer_kind"] == "completions"
    s = score_file(good)
    assert isinstance(s, Scores)
    assert s.pass_at_1 == 1.0
    assert s.pass_at_k == pytest.approx(1.0)  # one of 2 answers right, k=2
    assert s.per_sample == pytest.approx(0.5)
    assert s.num_answers == 2 * len(problems)
    assert s.failure_reasons and not s.claim_notes


def test_header_and_lines_follow_the_json_schema(good):
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    header_v = jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/header"})
    line_v = jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/problem"})
    lines = [json.loads(x) for x in lines_of(good)]
    header_v.validate(lines[0])
    for obj in lines[1:20]:
        line_v.validate(obj)


def test_the_schema_has_one_file():
    """The leaderboard folder links to the package's schema instead of keeping a copy that could drift."""
    assert not (ROOT / "leaderboard" / "submission.schema.json").exists()
    assert "../countdown_gym/leaderboard/schema.json" in (ROOT / "leaderboard" / "README.md").read_text()
    assert load_schema()["$id"].endswith("schema.json")


def test_fast_line_check_never_accepts_what_the_schema_rejects():
    schema = load_schema()
    line_v = jsonschema.Draft202012Validator({"$defs": schema["$defs"], "$ref": "#/$defs/problem"})
    base = {"id": "x", "numbers": [1, 2], "target": 3}
    cases = [
        {**base, "completions": ["a"]},
        {**base, "moves": [[[1, "+", 2, 3]]]},
        {**base, "moves": [[["1/2", "*", 2, 1]], []]},
        {**base, "completions": ["a"], "claimed_correct": [True]},
        {**base, "completions": []},
        {**base, "completions": ["a"], "moves": [[]]},
        {**base},
        {**base, "completions": [1]},
        {**base, "completions": ["a"], "extra": 1},
        {**base, "numbers": [True, 2], "completions": ["a"]},
        {**base, "numbers": [], "completions": ["a"]},
        {**base, "target": "3", "completions": ["a"]},
        {**base, "moves": [[[1, "^", 2, 3]]]},
        {**base, "moves": [[[1, "+", 2]]]},
        {**base, "moves": [[["1.5", "+", 2, 3]]]},
        {**base, "completions": ["a"] * 65},
        {**base, "completions": ["a"], "claimed_correct": ["yes"]},
        {**base, "id": "", "completions": ["a"]},
        [1, 2, 3],
        "text",
    ]
    for obj in cases:
        if _strict_problem_line(obj):
            assert line_v.is_valid(obj), obj
    assert _strict_problem_line(cases[0]) and _strict_problem_line(cases[1]) and _strict_problem_line(cases[2])


def test_pass_at_k_matches_brute_force():
    for n in range(1, 7):
        for c in range(n + 1):
            for k in range(1, n + 1):
                subsets = list(combinations([1] * c + [0] * (n - c), k))
                expected = Fraction(sum(any(s) for s in subsets), len(subsets))
                assert pass_at_k(n, c, k) == pytest.approx(float(expected))
    with pytest.raises(ValueError):
        pass_at_k(2, 1, 3)


def test_moves_become_a_solution_block_scored_by_the_verifier(tmp_path):
    problems = load_split("longproc-0.5k", "validation")
    moves = [[solution_path(p.numbers, p.target, p.rules)] for p in problems]
    p0 = problems[0]
    assert verify(p0, moves_to_solution(moves[0][0])).correct
    bad = list(moves[0][0])
    a, op, b, r = bad[-1]
    bad[-1] = (a, op, b, r + 1)  # arithmetic error in the last line
    moves[0] = [bad]
    path = write_submission(tmp_path / "moves.jsonl", preset="longproc-0.5k", split="validation", answers=moves, **META)
    s = score_file(path)
    assert isinstance(s, Scores)
    assert s.pass_at_1 == pytest.approx(1 - 1 / len(problems))
    assert s.failure_reasons == {"arithmetic_error": 1}
    assert json.loads(lines_of(path)[0])["answer_kind"] == "moves"


def test_rational_moves_are_written_exactly():
    text = moves_to_solution([(Fraction(3), "/", 2, Fraction(3, 2)), (Fraction(3, 2), "*", 4, 6)])
    assert "3 / 2 = 3/2" in text and "3/2 * 4 = 6" in text


@pytest.mark.parametrize("move", [10**5000, ("x" * 10**6, "+", 1, 2), (1, "+", 2, [0] * 10**6), (1, 10**5000, 2, 3)],
                         ids=["huge-int", "long-str", "long-list", "huge-op"])
def test_a_bad_move_is_named_in_a_short_type_error(move):
    """A bad move's error printed its repr whole: a long string or list made a megabyte message, and a huge int
    gave Python's int->str digit-limit ValueError instead of the TypeError."""
    from countdown_gym.leaderboard.submission import normalize_move

    with pytest.raises(TypeError, match=r"^a move.* must be .*, got (int|str|list) ") as e:
        normalize_move(move)
    assert len(str(e.value)) < 200


def test_writer_refuses_answers_that_do_not_fit_the_split(problems, tmp_path):
    with pytest.raises(ValueError, match="entries"):
        write_submission(tmp_path / "x.jsonl", preset=PRESET, split=SPLIT, answers=[["a"]], **META)
    with pytest.raises(ValueError, match="mix"):
        answers = [["<answer>1</answer>"]] * (len(problems) - 1) + [[[(1, "+", 2, 3)]]]
        write_submission(tmp_path / "x.jsonl", preset=PRESET, split=SPLIT, answers=answers, **META)
    by_id = {p.id: "<answer>1</answer>" for p in problems}
    assert read_submission(write_submission(tmp_path / "y.jsonl", preset=PRESET, split=SPLIT, answers=by_id, **META))
    with pytest.raises(ValueError, match=r"claimed_correct for tinyzero/validation/0: each value must be True or False"):
        write_submission(tmp_path / "z.jsonl", preset=PRESET, split=SPLIT, answers=by_id, **META,
                         claimed_correct=[["false"]] * len(problems))  # was written as true: bool("false")


# ---- tampered and bad input -----------------------------------------------------------------------


def test_wrong_answer_marked_correct_is_scored_wrong_and_reported(good, tmp_path):
    def edit(objs):
        objs[0]["claimed"] = {"pass@1": 1.0, "per_sample": 1.0}
        objs[1]["completions"][0] = "<answer>1+1</answer>"
        objs[1]["claimed_correct"] = [True, True]

    s = score_file(tamper(good, tmp_path / "liar.jsonl", edit))
    assert isinstance(s, Scores)
    assert s.pass_at_1 < 1.0
    notes = " ".join(s.claim_notes)
    assert "claimed per_sample = 1.0000, re-scored" in notes
    assert "claimed pass@1 = 1.0000" in notes
    assert "2 answers claimed correct were scored wrong" in notes


def test_swapped_problem_is_rejected(good, tmp_path):
    def edit(objs):
        objs[5]["numbers"] = objs[5]["numbers"][::-1] if len(set(objs[5]["numbers"])) > 1 else [1, 2, 3]
        objs[5]["target"] += 1

    reason = rejected(tamper(good, tmp_path / "swap.jsonl", edit), "line 6", "frozen split")
    assert "tinyzero/validation/4" in reason

    def huge(objs):  # 32 numbers of 4,000 digits: the reason stays one short line
        objs[5]["numbers"], objs[5]["target"] = [10**4000] * 32, 10**4000

    reason = rejected(tamper(good, tmp_path / "huge.jsonl", huge), "line 6", "frozen split")
    assert len(reason) < 1000, len(reason)


def test_ids_swapped_between_lines_is_rejected(good, tmp_path):
    def edit(objs):
        objs[1]["id"], objs[2]["id"] = objs[2]["id"], objs[1]["id"]

    rejected(tamper(good, tmp_path / "ids.jsonl", edit), "frozen split")


def test_truncated_file_is_rejected(good, tmp_path):
    raw = good.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(raw[: len(raw) // 2])
    rejected(cut, "not valid JSON (truncated file?)")
    whole_lines = tmp_path / "cut_lines.jsonl"
    whole_lines.write_text("".join(lines_of(good)[:50]), encoding="utf-8")
    rejected(whole_lines, "problems missing")
    header_only = tmp_path / "header.jsonl"
    header_only.write_text(lines_of(good)[0], encoding="utf-8")
    rejected(header_only, "200 of 200 problems missing")
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    rejected(empty, "empty")


def test_100_mb_completion_is_rejected_fast(good, tmp_path):
    big = tmp_path / "big.jsonl"
    lines = lines_of(good)
    obj = json.loads(lines[1])
    obj["completions"][0] = "PAD"
    head, tail = json.dumps(obj).split("PAD")
    with big.open("w", encoding="utf-8") as f:
        f.write(lines[0] + head)
        chunk = "x" * (1 << 20)
        for _ in range(100):
            f.write(chunk)
        f.write(tail + "\n" + "".join(lines[2:]))
    assert big.stat().st_size > 100 * 10**6
    start = time.perf_counter()
    rejected(big, "MiB; the limit is 64 MiB")
    assert time.perf_counter() - start < 1.0


def test_long_completion_is_scored_wrong_others_unaffected(good, tmp_path):
    def edit(objs):
        objs[1]["completions"][0] = "<answer>" + "1+" * MAX_COMPLETION_CHARS + "1</answer>"

    s = score_file(tamper(good, tmp_path / "long.jsonl", edit))
    assert isinstance(s, Scores)
    assert s.pass_at_1 == pytest.approx(1 - 1 / 200)
    assert s.failure_reasons["completion_too_long"] == 1


def test_over_long_line_is_rejected(good, tmp_path, monkeypatch):
    import countdown_gym.leaderboard.submission as sub

    monkeypatch.setattr(sub, "MAX_LINE_BYTES", 100)
    reason = rejected(good, "longer than")
    assert "line" in reason


def test_invalid_utf8_is_rejected(good, tmp_path):
    lines = [line.encode() for line in lines_of(good)]
    lines[3] = lines[3].replace(b"<think>", b"<think>\xff\xfe")
    bad = tmp_path / "utf8.jsonl"
    bad.write_bytes(b"".join(lines))
    rejected(bad, "line 4 is not valid UTF-8")


def test_duplicate_problem_line_is_rejected(good, tmp_path):
    lines = lines_of(good)
    dup = tmp_path / "dup.jsonl"
    dup.write_text("".join(lines + [lines[7]]), encoding="utf-8")
    rejected(dup, "appears twice", "line 8")


def test_wrong_split_hash_is_rejected(good, tmp_path):
    def edit(objs):
        objs[0]["split_sha256"] = "0" * 64

    rejected(tamper(good, tmp_path / "hash.jsonl", edit), "split_sha256", "different problem set")


def test_schema_violations_are_rejected_with_the_field(good, tmp_path):
    rejected(tamper(good, tmp_path / "h1.jsonl", lambda o: o[0].pop("authors")), "header", "authors")
    rejected(tamper(good, tmp_path / "h2.jsonl", lambda o: o[0].update(evil=1)), "header", "evil")
    rejected(tamper(good, tmp_path / "h3.jsonl", lambda o: o[0].update(preset="nope")), "unknown preset")
    rejected(tamper(good, tmp_path / "h4.jsonl", lambda o: o[0].update(format_version=9)), "format_version")
    assert len(rejected(tamper(good, tmp_path / "h4b.jsonl", lambda o: o[0].update(format_version="9" * 10**6)),
                        "format_version")) < 1000  # the value cut, not a megabyte reason
    rejected(tamper(good, tmp_path / "h5.jsonl", lambda o: o[0].update(claimed={"pass@1": 10**400})), "header", "claimed")
    rejected(tamper(good, tmp_path / "p1.jsonl", lambda o: o[3].update(completions="x")), "line 4", "schema")
    rejected(tamper(good, tmp_path / "p2.jsonl", lambda o: o[3].update(target=float(o[3]["target"]))), "line 4", "integers")
    rejected(tamper(good, tmp_path / "p3.jsonl", lambda o: o[3].update(completions=["a"])), "line 4", "fewer than sampling.k")
    rejected(tamper(good, tmp_path / "p4.jsonl", lambda o: o[3].update(claimed_correct=[True])), "claimed_correct")
    rejected(tamper(good, tmp_path / "p5.jsonl", lambda o: o[3].update(id="nope")), "not in the tinyzero/validation split")


def test_a_move_number_string_with_a_line_break_is_rejected_for_what_it_is(good, tmp_path):
    """The schema's pattern (Python's "$" also matches before a final line break) accepts "3\\n", which the reader
    refuses: the file was rejected for numbers "written with a decimal point" that it did not hold."""
    def edit(objs):
        objs[0]["answer_kind"] = "moves"
        for o in objs[1:]:
            o["moves"] = [[[1, "+", 2, 3]]] * len(o.pop("completions"))
        objs[3]["moves"][1] = [[1, "+", 2, "3\n"]]

    reason = rejected(tamper(good, tmp_path / "newline.jsonl", edit), "line 4", "'3/2'")
    assert "\n" not in reason


@pytest.mark.parametrize("k", [1.0, 2.0])
def test_sampling_k_written_as_a_float_is_rejected_clearly(good, tmp_path, k):
    def edit(objs):
        objs[0]["sampling"]["k"] = k  # JSON Schema's "integer" accepts 2.0; pass@k needs an int

    rejected(tamper(good, tmp_path / "kfloat.jsonl", edit), "sampling.k must be a JSON integer")


@pytest.mark.parametrize(("field", "value", "reason"), [
    ("date", "2026-13-45", "is not a calendar day"), ("date", "2026-02-30", "is not a calendar day"),
    ("date", "2026-01-01\n", "is not a calendar day"),  # Python's "$" matches before a last newline
    ("interaction", "moves", "interaction 'moves' does not produce answer_kind 'completions'"),
])
def test_header_dates_and_interactions_that_the_schema_lets_by_are_rejected(good, tmp_path, field, value, reason):
    """Each was accepted: the board showed the day as written, or "moves" for completions."""
    def edit(objs):
        objs[0][field] = value

    rejected(tamper(good, tmp_path / "header.jsonl", edit), reason)


def test_garbage_files_never_crash_the_scorer(good, tmp_path):
    samples = {
        "deep.jsonl": lines_of(good)[0] + "[" * 100_000 + "\n",
        "bigint.jsonl": lines_of(good)[0] + '{"id": "x", "numbers": [' + "9" * 5000 + '], "target": 1}\n',
        "nan.jsonl": lines_of(good)[0].replace('"temperature":0.7', '"temperature":NaN'),
        "array.jsonl": "[1, 2, 3]\n",
        "dupkey.jsonl": lines_of(good)[0].replace('"agent":', '"agent":"x","agent":'),
        "bom.jsonl": "\ufeff" + "".join(lines_of(good)),
        "surrogate.jsonl": "".join(lines_of(good)).replace('"agent":"test-agent"', '"agent":"\\ud800"', 1),
        "nul.jsonl": "\x00" * 100,
    }
    reasons = {}
    for name, text in samples.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        r = score_file(path)
        assert isinstance(r, Rejection), name
        reasons[name] = r.reason
    assert "NaN is not JSON" in reasons["nan.jsonl"]
    assert "'agent' appears twice" in reasons["dupkey.jsonl"]
    assert "surrogate" in reasons["surrogate.jsonl"]
    assert isinstance(score_file(tmp_path / "missing.jsonl"), Rejection)


def test_bad_files_never_change_another_submissions_score(good, tmp_path):
    alone = score_file(good)
    d = tmp_path / "submissions"
    d.mkdir()
    (d / f"a-good.{PRESET}.{SPLIT}.jsonl").write_bytes(good.read_bytes())
    tamper(good, d / f"b-hash.{PRESET}.{SPLIT}.jsonl", lambda o: o[0].update(split_sha256="1" * 64))
    (d / f"c-cut.{PRESET}.{SPLIT}.jsonl").write_bytes(good.read_bytes()[:5000])
    (d / "d-notes.txt").write_text("hello")
    results = score_directory(d)
    assert [type(r).__name__ for r in results] == ["Scores", "Rejection", "Rejection", "Rejection"]
    s = results[0]
    assert (s.pass_at_1, s.pass_at_k, s.per_sample, s.mean_length) == (
        alone.pass_at_1, alone.pass_at_k, alone.per_sample, alone.mean_length,
    )  # fmt: skip
    md = render_markdown(results, tmp_path)
    assert f"b-hash.{PRESET}.{SPLIT}.jsonl" in md and f"c-cut.{PRESET}.{SPLIT}.jsonl" in md and "does not follow" in md


def test_untrusted_text_cannot_break_the_table(good, tmp_path):
    def edit(objs):
        objs[0]["agent"] = "evil | agent\n## injected <script> $x^2$"

    s = score_file(tamper(good, tmp_path / "evil.jsonl", edit))
    md = render_markdown([s], tmp_path)
    row = next(line for line in md.splitlines() if "evil" in line)
    assert "evil \\| agent \\#\\# injected &lt;script&gt;" in row
    assert "\n## injected" not in md
    assert plot([s], tmp_path / "evil.png").stat().st_size > 1000


# ---- commands -------------------------------------------------------------------------------------


def test_score_and_check_commands(good, tmp_path, capsys):
    d = tmp_path / "board"
    (d / "submissions").mkdir(parents=True)
    (d / "submissions" / f"test-agent.{PRESET}.{SPLIT}.jsonl").write_bytes(good.read_bytes())
    assert lb_main(["check", "--dir", str(d)]) == 1  # no LEADERBOARD.md yet
    assert lb_main(["score", "--dir", str(d), "--no-progress"]) == 0
    assert (d / "leaderboard.png").stat().st_size > 1000
    first = (d / "LEADERBOARD.md").read_text()
    assert "| 1 | test-agent |" in first and "1.000 (k=2)" in first
    assert cli_main(["leaderboard", "check", "--dir", str(d)]) == 0
    assert lb_main(["score", "--dir", str(d), "--no-progress"]) == 0
    assert (d / "LEADERBOARD.md").read_text() == first  # deterministic
    (d / "LEADERBOARD.md").write_text(first.replace("1.000", "0.999"))
    assert lb_main(["check", "--dir", str(d)]) == 1
    assert "stale" in capsys.readouterr().err
    lb_main(["score", "--dir", str(d), "--no-progress"])
    (d / "submissions" / f"bad.{PRESET}.{SPLIT}.jsonl").write_bytes(good.read_bytes()[:3000])
    assert lb_main(["check", "--dir", str(d)]) == 1
    assert f"bad.{PRESET}.{SPLIT}.jsonl" in capsys.readouterr().err
    assert lb_main(["score", str(good), "--no-progress"]) == 0
    assert "pass@1 1.000" in capsys.readouterr().out


def test_a_board_without_a_valid_submission_keeps_no_old_chart(good, tmp_path, capsys):
    """With every submission rejected there is no chart: score left the last leaderboard.png (scores that no longer
    stand) and check said the board was up to date."""
    d = tmp_path / "board"
    (d / "submissions").mkdir(parents=True)
    sub = d / "submissions" / f"test-agent.{PRESET}.{SPLIT}.jsonl"
    sub.write_bytes(good.read_bytes())
    assert lb_main(["score", "--dir", str(d), "--no-progress"]) == 0 and (d / "leaderboard.png").is_file()
    sub.write_bytes(good.read_bytes()[:3000])  # torn: rejected
    assert lb_main(["check", "--dir", str(d)]) == 1
    assert "leaderboard.png is stale (no submission is valid" in capsys.readouterr().err
    assert lb_main(["score", "--dir", str(d), "--no-progress"]) == 0 and not (d / "leaderboard.png").exists()
    assert "leaderboard.png" not in capsys.readouterr().out
    assert lb_main(["check", "--dir", str(d)]) == 1  # the rejected file, only
    assert "stale" not in capsys.readouterr().err


def test_standard_output_closed_while_scoring_exits_141(good, monkeypatch, capsys):
    """The error line for an unwritable --out (an OSError) must not swallow standard output's own failure: a pipe
    closed by its reader (| head) gave 'error: Broken pipe' and 1, not the quiet 141 of every command."""
    import errno
    import io
    import sys

    class Closed(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert lb_main(["score", "--no-progress", str(good)]) == 141 and capsys.readouterr().err == ""


def test_cli_usage(capsys):
    assert cli_main([]) == 2
    assert cli_main(["--help"]) == 0
    assert cli_main(["nope"]) == 2
    capsys.readouterr()
    from countdown_gym import __version__

    assert cli_main(["--version"]) == 0 and capsys.readouterr().out == f"countdown-gym {__version__}\n"


def test_shipped_leaderboard_is_valid_and_up_to_date(capsys):
    code = lb_main(["check", "--dir", str(ROOT / "leaderboard")])
    err = capsys.readouterr().err
    assert code == 0, err


def test_shipped_reference_entries_record_their_commands():
    files = sorted((ROOT / "leaderboard" / "submissions").glob("*.jsonl"))
    agents = {}
    for f in files:
        header = json.loads(f.open(encoding="utf-8").readline())
        agents[header["agent"]] = header
        assert header["command"].startswith("python ")
    assert "random-legal" in agents and "exhaustive-solver" in agents
    assert agents["exhaustive-solver"]["preset"] == "longproc-0.5k" and agents["exhaustive-solver"]["split"] == "test"


# ---- reference agents and policy evaluation -------------------------------------------------------


def _reference_agents():
    from baselines import reference_agents

    return reference_agents


def test_reference_policies_on_countdown_v0():
    from countdown_gym.envs.countdown import CountdownEnv
    from countdown_gym.leaderboard.agents import evaluate_policy

    ref = _reference_agents()
    env = CountdownEnv(preset="longproc-0.5k", split="test")
    policy = ref.RandomLegalPolicy(seed=3)
    for _ in range(20):
        obs, info = env.reset()
        done = False
        while not done:
            a = policy(obs, info)
            assert info["action_mask"][a] == 1
            obs, _, terminated, truncated, info = env.step(a)
            done = terminated or truncated
    solver = evaluate_policy(ref.SolverPolicy(), "hard", "test", limit=25, progress=False)
    assert solver.successes == 25 and solver.invalid_actions == 0
    problems = load_split("hard", "test")[:25]
    assert all(verify(p, moves_to_solution(m)).correct for p, m in zip(problems, solver.moves, strict=True))
    rand = evaluate_policy(ref.RandomLegalPolicy(0), "longproc-0.5k", "test", limit=200, progress=False)
    assert rand.invalid_actions == 0 and rand.successes < 50



def test_reference_agents_refuse_an_out_that_is_a_folder_as_a_usage_error(tmp_path, capsys):
    """--out <a folder> raised check_output_path's ValueError out of submit_policy: a traceback, exit 1."""
    with pytest.raises(SystemExit) as exc:
        _reference_agents().main(["--agent", "random", "--out", str(tmp_path)])
    assert exc.value.code == 2 and "exists and is not a file" in capsys.readouterr().err


def test_masked_actions_are_kept_and_scored_wrong():
    import numpy as np

    from countdown_gym.leaderboard.agents import evaluate_policy

    def first_masked(obs, info):
        return int(np.flatnonzero(info["action_mask"] == 0)[0])

    ev = evaluate_policy(first_masked, "longproc-0.5k", "test", limit=10, progress=False)
    assert ev.invalid_actions == 10 and ev.successes == 0
    problems = load_split("longproc-0.5k", "test")[:10]
    for p, moves in zip(problems, ev.moves, strict=True):
        assert len(moves) == 1  # the illegal move is kept, with its unrestricted exact result
        verdict = verify(p, moves_to_solution(moves))
        # a non-integer result under integer rules is written p/q, which the verifier reads as malformed
        assert not verdict.correct and verdict.reason in ("negative_result", "zero_result", "exceeds_limit", "malformed_step")


def test_submit_command_with_a_policy_file(tmp_path, capsys):
    out = tmp_path / "solver.jsonl"
    argv = [
        "submit", "--policy", str(ROOT / "baselines" / "reference_agents.py") + ":SolverPolicy",
        "--preset", PRESET, "--split", SPLIT, "--out", str(out), "--agent", "solver", "--authors", "t",
        "--model", "none", "--method", "search", "--reward-variant", "none", "--no-progress",
    ]  # fmt: skip
    assert lb_main(argv) == 0
    s = score_file(out)
    assert isinstance(s, Scores) and s.pass_at_1 == 1.0 and not s.claim_notes
    header = json.loads(out.open().readline())
    assert header["command"].startswith("python -m countdown_gym.leaderboard submit --policy")
    assert header["claimed"] == {"pass@1": 1.0}
    assert lb_main(["submit", "--policy", "nope.py:X", "--out", str(tmp_path / "x.jsonl"), "--agent", "a",
                    "--authors", "a", "--model", "m", "--method", "m", "--reward-variant", "none"]) == 2
    assert "policy file not found" in capsys.readouterr().err
    meta = ["--out", str(tmp_path / "x.jsonl"), "--agent", "a", "--authors", "a", "--model", "m", "--method", "m",
            "--reward-variant", "none", "--no-progress"]  # fmt: skip
    assert lb_main(["submit", "--policy", "cg_no_such_module:X", *meta]) == 2  # no ModuleNotFoundError traceback
    assert "policy module 'cg_no_such_module' not found" in capsys.readouterr().err
    # bad metadata is refused before any episode is played (the policy would raise if it were called)
    for flags, message in ((["--temperature", "-1"], "temperature"), (["--temperature", "nan"], "NaN"),
                           (["--agent", "a" * 101], "agent"),
                           # an empty one was checked as "n/a" / "-": refused only after every episode was played
                           (["--model-size", ""], "model_size"), (["--compute", ""], "compute"),
                           (["--interaction", "multi-turn", "--max-turns", "9" * 20], "max_turns")):  # fmt: skip
        assert lb_main(["submit", "--policy", "os:getcwd", *meta, *flags]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_submit_a_multi_turn_text_policy(tmp_path, capsys):
    out = tmp_path / "turns.jsonl"
    meta = ["--preset", PRESET, "--split", SPLIT, "--agent", "turn-solver", "--authors", "t", "--model", "none",
            "--method", "search", "--reward-variant", "none", "--no-progress"]  # fmt: skip
    policy = str(ROOT / "baselines" / "reference_agents.py") + ":TurnSolverPolicy"
    assert lb_main(["submit", "--interaction", "multi-turn", "--policy", policy, "--out", str(out), *meta]) == 0
    header = json.loads(out.open().readline())
    assert header["interaction"] == "multi-turn" and header["sampling"]["max_turns"] == 16
    s = score_file(out)
    assert isinstance(s, Scores) and s.pass_at_1 == 1.0 and not s.claim_notes
    # the table's mode column names it
    lb = tmp_path / "lb"
    (lb / "submissions").mkdir(parents=True)
    out.rename(lb / "submissions" / f"turn-solver.{PRESET}.{SPLIT}.jsonl")
    assert lb_main(["score", "--dir", str(lb), "--no-progress"]) == 0
    assert "| multi-turn |" in (lb / "LEADERBOARD.md").read_text()
    # a one-turn budget: the first move cannot finish a 4-number problem, so nothing is solved
    assert lb_main(["submit", "--interaction", "multi-turn", "--max-turns", "1", "--policy", policy, "--out",
                    str(tmp_path / "one.jsonl"), *meta]) == 0
    assert score_file(tmp_path / "one.jsonl").pass_at_1 == 0.0
    # what does not fit the mode is refused before anything is played
    for flags, message in ((["--sb3", "m.zip"], "--sb3"), (["--policy", policy, "--max-turns", "0"], "--max-turns"),
                           (["--policy", policy, "--wrapper", "x:y"], "--wrapper")):  # fmt: skip
        code = lb_main(["submit", "--interaction", "multi-turn", *flags, "--out", str(tmp_path / "x.jsonl"), *meta])
        assert code == 2 and message in capsys.readouterr().err  # a usage error: exit code 2, the message on stderr
    assert lb_main(["submit", "--interaction", "multi-turn", "--policy", "operator:is_", "--out",
                    str(tmp_path / "x.jsonl"), *meta]) == 1  # a policy whose turn is not a str: a failure
    assert "returns the turn as a str; got bool" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_reference_agents_cli_writes_a_valid_submission(tmp_path):
    out = tmp_path / "random.jsonl"
    assert _reference_agents().main(["--agent", "random", "--preset", PRESET, "--split", SPLIT, "--k", "2",
                                     "--out", str(out), "--no-progress"]) == 0
    s = score_file(out)
    assert isinstance(s, Scores) and s.k == 2 and s.pass_at_k is not None and s.pass_at_1 < 0.5
    for k in ("0", "65"):
        with pytest.raises(SystemExit):
            _reference_agents().main(["--agent", "random", "--k", k, "--out", str(out), "--no-progress"])


@pytest.mark.parametrize("name", ["random-legal", "exhaustive-solver"])
def test_shipped_reference_submissions_repeat_from_their_commands(tmp_path, name):
    # a change to the environment's draws must come with regenerated files (their recorded commands)
    shipped = ROOT / "leaderboard" / "submissions" / f"{name}.longproc-0.5k.test.jsonl"
    lines = shipped.read_text().splitlines()
    argv = shlex.split(json.loads(lines[0])["command"])
    assert argv[:2] == ["python", "baselines/reference_agents.py"]
    i = argv.index("--out")
    argv[i + 1] = str(tmp_path / "again.jsonl")
    assert _reference_agents().main(argv[2:]) == 0
    assert (tmp_path / "again.jsonl").read_text().splitlines()[1:] == lines[1:], f"regenerate {shipped.name}"


def test_submit_a_saved_maskable_ppo_model_behind_a_wrapper(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    sb3_contrib = pytest.importorskip("sb3_contrib")
    from countdown_gym.envs.countdown import CountdownEnv

    torch.set_num_threads(1)
    (tmp_path / "cg_flip_wrapper.py").write_text(
        "import gymnasium as gym\n\n\nclass Flip(gym.ObservationWrapper):\n"
        "    def __init__(self, env, sign=1.0):\n        super().__init__(env)\n        self.sign = sign\n\n"
        "    def observation(self, obs):\n        return self.sign * obs\n"
    )
    from countdown_gym.leaderboard.agents import load_object

    flip = load_object(f"{tmp_path / 'cg_flip_wrapper.py'}:Flip", "wrapper")
    env = flip(CountdownEnv(preset=PRESET, split="train"), sign=-1.0)
    model = sb3_contrib.MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    from stable_baselines3.common.logger import configure

    model.set_logger(configure(str(tmp_path / "sb3_logs"), []))  # not SB3's default /tmp/SB3-<date> folder
    model.learn(32)
    model.save(tmp_path / "model.zip")
    out = tmp_path / "ppo.jsonl"
    argv = [
        "submit", "--sb3", str(tmp_path / "model.zip"), "--wrapper", f"{tmp_path / 'cg_flip_wrapper.py'}:Flip",
        "--wrapper-kwargs", '{"sign": -1.0}', "--preset", PRESET, "--split", SPLIT, "--out", str(out), "--agent", "ppo", "--authors", "t", "--model", "MLP",
        "--method", "MaskablePPO", "--reward-variant", "sparse", "--no-progress",
    ]  # fmt: skip
    assert lb_main(argv) == 0
    s = score_file(out)
    assert isinstance(s, Scores) and s.invalid_step_rate == 0.0
    assert "--wrapper" in s.header["command"] and '{"sign": -1.0}' in s.header["command"]
    i = argv.index("--wrapper-kwargs")
    for bad_argv, message in (([*argv[: i + 1], "[1]", *argv[i + 2 :]], "JSON object"),
                              ([*argv[: i + 1], "{sign", *argv[i + 2 :]], "JSON object"),
                              ([*argv[:3], *argv[i:]], "needs --wrapper"),
                              ([*argv, "--temperature", "0.5"], "must be 0 (deterministic actions) or 1")):  # fmt: skip
        assert lb_main(bad_argv) == 2 and message in capsys.readouterr().err
    sampled = []
    for name in ("s1.jsonl", "s2.jsonl"):  # sampled actions repeat for the same --seed
        j = argv.index("--out")
        lb_main([*argv[: j + 1], str(tmp_path / name), *argv[j + 2 :], "--temperature", "1", "--k", "2", "--seed", "3"])
        sampled.append((tmp_path / name).read_text().splitlines()[1:])
    assert sampled[0] == sampled[1]


def test_writer_accepts_one_move_sequence_or_completion_per_problem(tmp_path):
    problems = load_split("longproc-0.5k", "validation")
    moves = [solution_path(p.numbers, p.target, p.rules) for p in problems]
    shuffled = list(reversed(problems))
    path = write_submission(
        tmp_path / "sb3.jsonl", agent="ppo", authors="t", model="MLP", model_size=None, method="PPO",
        reward_variant="sparse", preset="longproc-0.5k", split="validation", problems=shuffled,
        moves=list(reversed(moves)), sampling={"k": 1, "temperature": 0.0}, compute="cpu", command="x",
    )  # fmt: skip
    s = score_file(path)
    assert isinstance(s, Scores) and s.pass_at_1 == 1.0 and s.header["model_size"] == "n/a"
    texts = [f"<answer>{solve(p, limit=1)[0]}</answer>" for p in problems]
    s2 = score_file(write_submission(tmp_path / "c.jsonl", preset="longproc-0.5k", split="validation", completions=texts, **META))
    assert isinstance(s2, Scores) and s2.pass_at_1 == 1.0
    with pytest.raises(ValueError, match="exactly one"):
        write_submission(tmp_path / "d.jsonl", preset="longproc-0.5k", split="validation", moves=moves, completions=texts, **META)
    with pytest.raises(ValueError, match="appears twice"):
        write_submission(tmp_path / "e.jsonl", preset="longproc-0.5k", split="validation", moves=moves,
                         problems=[problems[0]] * len(problems), **META)


def test_invalid_steps_of_a_trace_are_counted_by_the_text_env_replay():
    from countdown_gym import Problem, dfs_trace
    from countdown_gym.envs.text import replay_completion as replay
    from countdown_gym.leaderboard.score import score_answer

    p = Problem((21, 16, 17, 26), 46)
    trace = dfs_trace(p)
    ok = score_answer(p, trace, replay)
    assert ok.correct and ok.moves and ok.invalid_moves == 0
    bad = trace.replace("21 + 16 = 37", "21 + 16 = 38", 1)
    assert bad != trace
    wrong = score_answer(p, bad, replay)
    assert wrong.invalid_moves >= 1
    assert score_answer(p, "x" * (MAX_COMPLETION_CHARS + 1), replay).reason == "completion_too_long"


def test_padding_wrong_answers_past_the_replay_limit_cannot_hide_their_invalid_steps(problems, tmp_path):
    from countdown_gym import dfs_trace
    from countdown_gym.leaderboard.score import MAX_REPLAY_LINES

    bad = "<Solution>\n1 + 1 = 3\n</Solution>"  # one miscomputed move line: wrong either way
    texts = [dfs_trace(problems[0])] + [bad] * (len(problems) - 1)  # one clean trace
    s = score_file(write_submission(tmp_path / "a.jsonl", preset=PRESET, split=SPLIT, completions=texts, **META))
    assert s.invalid_step_rate > 0.1
    texts = texts[:1] + [bad + "\n" * MAX_REPLAY_LINES] * (len(problems) - 1)  # the bad ones too long to replay
    s = score_file(write_submission(tmp_path / "b.jsonl", preset=PRESET, split=SPLIT, completions=texts, **META))
    assert s.pass_at_1 == 1 / len(problems) and s.invalid_step_rate is None  # not measured ("-"), never 0.000


def test_random_corruption_never_crashes_the_scorer(good, tmp_path_factory):
    """Byte-level edits of a valid file (LB_FUZZ_EXAMPLES=400 for a longer local run)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    raw = good.read_bytes()
    d = tmp_path_factory.mktemp("fuzz")

    @settings(max_examples=int(os.environ.get("LB_FUZZ_EXAMPLES", "25")), deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.binary(min_size=0, max_size=4)), min_size=1, max_size=4))
    def run(edits):
        data = bytearray(raw)
        for pos, repl in edits:
            data[pos : pos + 1] = repl
        path = d / "fuzz.jsonl"
        path.write_bytes(bytes(data))
        r = score_file(path)
        assert isinstance(r, (Scores, Rejection))
        if isinstance(r, Rejection):
            assert r.reason and "could not be scored" not in r.reason, r.reason

    run()


def test_check_redraws_the_chart_and_refuses_a_made_up_one(tmp_path, capsys):
    import shutil

    lb = tmp_path / "leaderboard"  # a copy of the board in a copy of the repository's model cards (the page links them)
    shutil.copytree(ROOT / "leaderboard", lb)
    for card in (ROOT / "baselines").rglob("README.md"):
        (tmp_path / card.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(card, tmp_path / card.relative_to(ROOT))
    assert lb_main(["check", "--dir", str(lb)]) == 0
    (lb / "leaderboard.png").write_bytes(b"\x89PNG\r\n\x1a\n a made-up chart")
    assert lb_main(["check", "--dir", str(lb)]) == 1
    assert "leaderboard.png is stale" in capsys.readouterr().err


def test_board_text_is_inert_and_file_names_follow_the_rule(tmp_path):
    import shutil

    src = ROOT / "leaderboard" / "submissions" / "random-legal.longproc-0.5k.test.jsonl"
    lines = src.read_text().splitlines()
    header = json.loads(lines[0])
    d = tmp_path / "submissions"
    d.mkdir()

    def put(name, **change):
        (d / name).write_text("\n".join([json.dumps({**header, **change}), *lines[1:]]) + "\n")

    put("evil.longproc-0.5k.test.jsonl", agent="evil", method="![x](http://e.org/a.png) [click](http://e.org)")
    put("Bad Name.longproc-0.5k.test.jsonl", agent="badname")
    put("x.longproc-0.5k.test.jsonl\n| injected |", agent="nl")  # a newline in a name: rejected, not a new row
    put("twin.longproc-0.5k.test.jsonl", agent="evil")  # the same agent and split again
    put("other.longproc-0.5k.validation.jsonl", agent="other")  # the name says validation, the header test
    (d / "link.longproc-0.5k.test.jsonl").symlink_to(src)
    shutil.copy(src, d / "random-legal.longproc-0.5k.test.jsonl")
    results = {r.path.name: r for r in score_directory(d)}
    assert isinstance(results["evil.longproc-0.5k.test.jsonl"], Scores)
    assert isinstance(results["random-legal.longproc-0.5k.test.jsonl"], Scores)
    for name, reason in (("Bad Name.longproc-0.5k.test.jsonl", "does not follow"), ("link.longproc-0.5k.test.jsonl", "symbolic link"),
                         ("twin.longproc-0.5k.test.jsonl", "already on the board"), ("other.longproc-0.5k.validation.jsonl", "file name says")):
        assert isinstance(results[name], Rejection) and reason in results[name].reason, name
    md = render_markdown(list(results.values()), tmp_path, "leaderboard.png")
    assert "![x](" not in md and "[click](" not in md and "\\!\\[x\\]\\(http" in md
    assert all(line.count("|") >= 2 or not line.startswith("|") for line in md.splitlines())
    assert "\n| injected |" not in md


def test_scoring_work_per_answer_is_bounded():
    from countdown_gym.leaderboard.score import MAX_REPLAY_LINES, score_answer

    calls = []
    p = load_split("longproc-0.5k", "test")[0]
    junk = score_answer(p, "\n" * 150_000, replay=lambda *a: calls.append(a))
    assert not junk.correct and junk.moves is None and calls == []  # verified, never replayed
    trace = "<Solution>\n" + "1 + 1 = 2\n" * (MAX_REPLAY_LINES // 4) + "</Solution>"
    from countdown_gym.envs.text import replay_completion

    assert score_answer(p, trace, replay=replay_completion).moves is not None  # ordinary answers are replayed
