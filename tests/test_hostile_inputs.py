"""The verifier and the problem loader under hostile input: deep nesting, huge values, content that is not text,
files with bad bytes and bad rows mixed in, rows the solver would take minutes on. Regression tests, then Hypothesis
properties (derandomised in CI: tests/conftest.py)."""

from __future__ import annotations

import gc
import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from countdown_gym import Problem, Rules, verify
from countdown_gym.data.generator import GeneratorConfig
from countdown_gym.data.problem_files import load_problems
from countdown_gym.envs.problem_source import resolve_rules
from countdown_gym.game.reachability import SolverTimeout
from countdown_gym.game.solver import is_solvable
from countdown_gym.game.turn_format import parse_turn
from countdown_gym.game.verifier import REASONS

PROBLEM = Problem((21, 16, 17, 26), 46)
RIGHT = "<answer>21 + 16 - 17 + 26</answer>"
VERIFY_CPU_LIMIT = 0.050
"""The bound of the property test: CPU seconds (this thread's, so other work on a shared machine does not count) of
one verify() call on any JSON-like value up to 1 MB, the garbage collector's pass over the test's own large values
excluded. Measured: the slowest example of a run took 0.5-13 ms in 11 random runs and 2.9 ms with the CI profile
(`python -m pytest tests/test_hostile_inputs.py -k verify_never -s` prints it)."""


def nested(depth: int, leaf=None, kind=list):
    value = leaf if leaf is not None else []
    for _ in range(depth):
        value = [value] if kind is list else {"k": value}
    return value


# ---- regressions ----------------------------------------------------------------------------------------------


def test_verify_deeply_nested_or_huge_values_without_recursion_or_a_full_repr():
    for value in (nested(100_000), nested(100_000, kind=dict), [nested(100_000)], 10**5000, list(range(3_000_000))):
        start = time.thread_time()
        v = verify(PROBLEM, value)
        assert time.thread_time() - start < VERIFY_CPU_LIMIT
        assert v.reason == "invalid_input" and len(v.message) < 250, v.message


def test_message_content_that_is_not_text_is_not_read():
    for content in ({"text": RIGHT}, {"x": RIGHT}, 46, [{"type": "text", "text": {"t": RIGHT}}]):
        v = verify(PROBLEM, [{"role": "assistant", "content": content}])
        assert not v.correct and v.reason == "no_answer", (content, v)
    assert verify(PROBLEM, [{"role": "assistant", "content": [{"type": "text", "text": RIGHT}]}]).correct


def test_load_problems_reads_past_bad_bytes_deep_nesting_and_wrong_json(tmp_path):
    good = b'{"nums": [3, 4, 5], "target": 12}\n'
    path = tmp_path / "rows.jsonl"
    path.write_bytes(good + b'{"nums": [1, 2, \xff3], "target": 6}\n' + b"[" * 100_000 + b"\n" + good)
    loaded = load_problems(path, progress=False)
    assert loaded.rows == [0, 3] and loaded.total_rows == 4
    assert [(i.row, i.reason) for i in loaded.issues] == [(1, "malformed"), (2, "malformed")]
    assert "not UTF-8" in loaded.issues[0].message and "nested too deeply" in loaded.issues[1].message
    for text, needle in (("5", "holds int"), ('"str"', "holds str"), ("[" * 100_000, "nested too deeply")):
        (tmp_path / "one.json").write_text(text)
        loaded = load_problems(tmp_path / "one.json", progress=False)
        assert loaded.total_rows == 1 and not loaded.problems and needle in loaded.issues[0].message, loaded.report()
    (tmp_path / "one.json").write_bytes(b'[{"nums": [3, 4, 5], "target": 12, "note": "\xff"}]')
    assert "not UTF-8" in load_problems(tmp_path / "one.json", progress=False).issues[0].message
    (tmp_path / "one.json").write_text('{"nums": [3, 4, 5], "target": 12}')  # one row object, read as one row
    assert load_problems(tmp_path / "one.json", progress=False).rows == [0]
    (tmp_path / "rows.csv").write_bytes(b'nums,target\n"[3, 4, 5]",12\n"[3, 4, 5]",\xff\n"[3, 4, 5]",12\n')
    loaded = load_problems(tmp_path / "rows.csv", progress=False)
    assert loaded.rows == [0, 2] and loaded.issues[0].row == 1 and "not UTF-8" in loaded.issues[0].message


def test_load_problems_caps_the_solver_time_per_row(tmp_path):
    hard = {"nums": [3, 7, 11, 13, 17, 19, 23], "target": 99991}  # TinyZero rules: seconds of search
    rows = [{"nums": [3, 4, 5], "target": 12}, hard, {"nums": [3, 4, 5], "target": 12}]
    start = time.perf_counter()
    loaded = load_problems(rows, progress=False, solver_timeout=0.05)
    assert time.perf_counter() - start < 5
    assert loaded.rows == [0, 2] and [(i.row, i.reason) for i in loaded.issues] == [(1, "timeout")]
    with pytest.raises(SolverTimeout):
        is_solvable(hard["nums"], hard["target"], Rules.tinyzero(), timeout=0.01)
    assert is_solvable([3, 4, 5], 12, timeout=0.01)  # a quick answer is unaffected


@pytest.mark.parametrize("timeout", [float("nan"), -1.0])
def test_a_solver_timeout_of_nan_is_refused_not_read_as_no_limit(timeout):
    """NaN made every deadline check false: the solver ran without a limit (seconds on a 7-number TinyZero row)."""
    with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0 or None"):
        is_solvable([3, 7, 11, 13, 17, 19, 23], 99991, Rules.tinyzero(), timeout=timeout)


def test_the_solver_time_cap_holds_on_rows_of_many_numbers():
    """A 22-number row took 11 s and 1.35 GiB, a 199-number one never ended: every split was built before the
    deadline was looked at. 20,000 numbers took 12 s and 10**6 never ended while the deadline was looked at only
    every 1,024 splits (one split of a long row costs O(n))."""
    for n in (22, 60, 199, 20_000, 200_000):
        start = time.perf_counter()
        loaded = load_problems([{"nums": list(range(1, n + 1)), "target": 10**9 + 7}], progress=False, solver_timeout=0.3)
        assert time.perf_counter() - start < 3, n
        assert [i.reason for i in loaded.issues] == ["timeout"], loaded.report()
        assert len(loaded.issues[0].message) < 200 and f"({n} numbers)" in loaded.issues[0].message


def test_the_solver_time_cap_holds_without_use_all_and_a_target_out_of_range():
    """Under rules that leave numbers unused the solver asks every sub-multiset, 2**n of them; a target no move can
    make (0 under classic) was refused per part before the deadline was looked at: 22 numbers ran 20 s past 0.2 s."""
    start = time.perf_counter()
    loaded = load_problems([{"numbers": list(range(1, 23)), "target": 0, "rules": "classic"}], progress=False,
                           solver_timeout=0.2)
    assert time.perf_counter() - start < 3
    assert [i.reason for i in loaded.issues] == ["timeout"], loaded.report()


@pytest.mark.parametrize("line", [b'{"id": "a", "samples": Infinity, "correct": 1}', b'{"id": "a", "samples": 4, "correct": 1}\n\xff',
                                  b'{"id": "a", "samples": 2.9, "correct": 1}', b'{"id": "a", "samples": true, "correct": true}',
                                  b'{"id": "a", "samples": 4, "correct": 0, "correct": 3}', pytest.param(b"[" * 100_000, id="deep")])
def test_a_pass_rates_line_that_is_no_count_or_no_utf8_is_named(tmp_path, line):
    """Infinity raised OverflowError, a bad byte UnicodeDecodeError and 100,000 '[' RecursionError (tracebacks); 2.9
    samples read as 2, true as 1 and a 'correct' twice as the last."""
    from countdown_gym.data.pass_rates import filter_by_pass_rate

    (tmp_path / "rates.jsonl").write_bytes(line + b"\n")
    with pytest.raises(SystemExit, match=r"rates.jsonl:\d: expected"):
        filter_by_pass_rate([Problem((1, 2, 3), 6, id="a")], tmp_path / "rates.jsonl", 0.0, 1.0)


def test_verify_answers_a_value_too_long_for_str():
    """The product of 320 fifteen-digit numbers (rules without a limit) has over 4,300 digits: verify() raised
    Python's ValueError writing it into the message, as it did for a problem whose target is that long."""
    big = "*".join(["100000000000007"] * 320)
    problem = Problem((10**14 + 7,) * 320 + (0,), 5, Rules.classic())
    for answer, reason in ((big, "wrong_value"), (f"({big})/0", "division_by_zero"), (f"0-({big})", "negative_result")):
        v = verify(problem, f"<answer>{answer}</answer>")
        assert v.reason == reason and "<a number of over 4300 digits>" in v.message, v


def test_one_bad_csv_cell_leaves_out_its_row_only(tmp_path):
    good = '"[3, 4, 5]",12\n'
    path = tmp_path / "rows.csv"
    path.write_text("nums,target\n" + good + '"[3, 4, 5]",' + "7" * 5000 + "\n" + good
                    + '"' + "1" * 140_000 + '",12\n' + good + '"[3, 4, 5]",' + "[" * 5000 + "\n" + good)
    loaded = load_problems(path, progress=False)
    assert loaded.rows == [0, 2, 4, 6] and loaded.total_rows == 7, loaded.report()
    assert [(i.row, i.reason) for i in loaded.issues] == [(1, "malformed"), (3, "malformed"), (5, "malformed")]
    assert "digits" in loaded.issues[0].message and "field limit" in loaded.issues[1].message
    assert "nested too deeply" in loaded.issues[2].message


def test_a_csv_with_a_byte_order_mark_keeps_its_rows(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(b"\xef\xbb\xbfnums,target\r\n\"[3, 4, 5]\",12\r\n\"[1, 2, 3]\",6\r\n")
    loaded = load_problems(path, progress=False)
    assert loaded.rows == [0, 1] and not loaded.issues, loaded.report()
    assert loaded.problems[0].numbers == (3, 4, 5)


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_a_json_file_with_a_byte_order_mark_keeps_its_rows(tmp_path, suffix):
    rows = [{"numbers": [3, 5, 7, 11], "target": 26}, {"numbers": [2, 4, 6], "target": 12}]
    text = json.dumps(rows) if suffix == ".json" else "\n".join(map(json.dumps, rows))
    path = tmp_path / f"rows{suffix}"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    loaded = load_problems(path, progress=False)
    assert loaded.rows == [0, 1] and not loaded.issues, loaded.report()


def test_a_jsonl_byte_order_mark_on_a_line_of_its_own_is_no_row(tmp_path):
    """A BOM followed by a line break (or a file of only a BOM) was reported as a malformed row 0."""
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'\xef\xbb\xbf\r\n{"numbers": [3, 5, 7, 11], "target": 26}\r\n')
    loaded = load_problems(path, progress=False)
    assert loaded.rows == [0] and loaded.total_rows == 1 and not loaded.issues, loaded.report()
    path.write_bytes(b"\xef\xbb\xbf")
    assert load_problems(path, progress=False).total_rows == 0


def test_a_json_file_of_several_lists_is_reported_not_read_in_part(tmp_path):
    """{"train": [...], "test": [...]} read the train rows alone, and the test rows were lost without a word."""
    path = tmp_path / "splits.json"
    path.write_text(json.dumps({"train": [{"nums": [3, 4, 5], "target": 12}], "test": [{"nums": [1, 2, 3], "target": 6}]}))
    loaded = load_problems(path, progress=False)
    assert not loaded.problems and "several lists of rows ['train', 'test']" in loaded.issues[0].message, loaded.report()
    path.write_text(json.dumps({"version": 1, "data": [{"nums": [3, 4, 5], "target": 12}]}))  # one list: its rows
    assert load_problems(path, progress=False).rows == [0]


def test_a_huge_target_is_reported_not_raised_and_its_line_stays_short():
    """str() of an int above 4,300 digits raises: a 5,000-digit target of a Python row stopped the whole load (a
    target of over 640 digits is now no Problem: malformed)."""
    rows = [{"nums": [3, 4, 5], "target": 10**5000}, {"nums": [3, 4, 5], "target": -(10**4000)},
            {"nums": [3, 4, 5], "target": 12}, {"nums": [3, 4, 5], "target": 10**639}]
    loaded = load_problems(rows, progress=False)
    assert loaded.rows == [2] and [i.reason for i in loaded.issues] == ["malformed"] * 2 + ["unsolvable"], loaded.report()
    assert all(len(i.message) < 200 for i in loaded.issues), loaded.report()
    assert "about 5,001 digits" in loaded.issues[0].message and "about 4,001 digits" in loaded.issues[1].message
    assert "<an integer of about 639 digits>" in loaded.issues[2].message  # its report line: cut short


def test_a_fifo_or_a_device_is_refused_without_being_opened(tmp_path):
    import os

    os.mkfifo(tmp_path / "rows.jsonl")  # opening it would wait for a writer forever
    (tmp_path / "zero.jsonl").symlink_to("/dev/zero")
    for path, kind in ((tmp_path / "rows.jsonl", "a FIFO"), (tmp_path / "zero.jsonl", "a special file"),
                       ("/dev/null", "a special file")):
        with pytest.raises(ValueError, match=f"is {kind}, not a file of rows"):
            load_problems(path, progress=False)
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        load_problems(tmp_path / "missing.jsonl", progress=False)


def test_json_lines_with_carriage_returns_alone_as_line_breaks(tmp_path):
    row = '{"nums": [3, 4, 5], "target": 12}'
    path = tmp_path / "rows.jsonl"
    path.write_bytes((row + "\r" + row + "\r\r" + '{"nums": [3, 4,\r 5], "target": 12}' + "\r\n" + row).encode())
    loaded = load_problems(path, progress=False)
    assert loaded.total_rows == 5 and loaded.rows == [0, 1, 4], loaded.report()  # a CR inside a row splits it
    path.write_bytes(('{"nums": [3, 4,\r 5],\r "target": 12}\n' + row).encode())  # CR as JSON whitespace: one row
    assert load_problems(path, progress=False).rows == [0, 1]
    path.write_bytes(b"\x00\r\xff\n" + row.encode())  # no part of it a row: one bad line, one issue
    loaded = load_problems(path, progress=False)
    assert loaded.total_rows == 2 and loaded.rows == [1] and len(loaded.issues) == 1, loaded.report()


@pytest.mark.parametrize("timeout", [float("nan"), -1, 0, float("-inf")])
def test_a_solver_timeout_that_is_no_limit_or_none_at_all_is_refused(timeout):
    with pytest.raises(ValueError, match="solver_timeout must be > 0"):  # NaN was silently no limit
        load_problems([{"nums": [3, 4, 5], "target": 12}], progress=False, solver_timeout=timeout)
    with pytest.raises(TypeError, match="solver_timeout must be a number"):
        load_problems([{"nums": [3, 4, 5], "target": 12}], progress=False, solver_timeout="1")


# ---- properties -----------------------------------------------------------------------------------------------

JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                      st.text(max_size=50), st.sampled_from([RIGHT, "<answer>", "</answer>", "<Solution>\n1 + 1 = 2\n",
                                                             "assistant", "role", "content"]))
JSON_SMALL = st.recursive(JSON_LEAF, lambda kids: st.one_of(st.lists(kids, max_size=5),
                                                            st.dictionaries(st.text(max_size=10), kids, max_size=5)),
                          max_leaves=20)
MB = 1_000_000


SHAPES = ("small", "repeat", "wide-dict", "nest-list", "nest-dict", "long-text", "chat", "chat-parts")
PIECES = ("(", "<answer>", "1+", "<answer>(((", "<Solution>\n", "1 + 1 = 2\n", "x", "\u00a0")


@st.composite
def recipes(draw) -> tuple[str, object, str, float]:
    """``(shape, base, piece, fill)``: how :func:`build` makes a JSON-like value of at most about 1 MB. The test
    draws the recipe, not the value, so that a failing example prints in a few lines (a 100,000-deep value could not
    be printed). ``fill``: the fraction of 1 MB used, often all of it (Hypothesis favours small numbers)."""
    fill = draw(st.one_of(st.sampled_from([1.0, 0.5]), st.floats(0.0, 1.0)))
    return draw(st.sampled_from(SHAPES)), draw(JSON_SMALL), draw(st.sampled_from(PIECES)), fill


def build(shape: str, base: object, piece: str, fill: float):
    """The value of a recipe: ``base`` alone, repeated, in a wide dict, nested deep, a long string, or chat
    messages whose content is ``base`` or a list of text parts holding it."""
    size = len(json.dumps(base)) + 2

    def count(per_item: int) -> int:
        return max(1, int(fill * MB / per_item))

    if shape == "repeat":
        return [base] * count(size)
    if shape == "wide-dict":
        return {str(i): base for i in range(count(size + 10))}
    if shape in ("nest-list", "nest-dict"):
        return nested(count(8), base, list if shape == "nest-list" else dict)
    if shape == "long-text":
        return piece * count(len(piece.encode()))
    if shape in ("chat", "chat-parts"):
        content = base if shape == "chat" else [{"type": "text", "text": base}] * count(size + 30)
        return [{"role": "user", "content": "x"}, {"role": "assistant", "content": content}]
    return base


SLOWEST: list[float] = [0.0]


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(recipe=recipes())
def test_verify_never_raises_and_stays_fast_on_json_like_values(recipe):
    value = build(*recipe)
    gc.disable()  # a collector's pass over the test's own large values is not verify's time (no gc.collect() before:
    try:  # over the whole suite's heap it took 100 s of the default suite's 50 examples)
        start = time.thread_time()  # this thread's CPU time: other work on a shared machine does not count
        v = verify(PROBLEM, value)
        took = time.thread_time() - start
    finally:
        gc.enable()
    SLOWEST[0] = max(SLOWEST[0], took)
    print(f"slowest verify so far: {1000 * SLOWEST[0]:.1f} ms CPU")
    assert v.reason in REASONS and isinstance(v.message, str)
    assert took < VERIFY_CPU_LIMIT, f"{took * 1000:.1f} ms"


GOOD_ROW = st.builds(lambda nums: {"nums": nums, "target": sum(nums)}, st.lists(st.integers(1, 99), min_size=2, max_size=4))
BAD_LINE = st.one_of(
    st.binary(min_size=1, max_size=30).map(lambda b: b.replace(b"\n", b"") + b"\xff"),  # not UTF-8
    st.text(min_size=1, max_size=30).filter(lambda t: "\n" not in t and "\r" not in t and t.strip())
    .map(lambda t: ("{" + t).encode()),  # not JSON
    st.integers(1, 200_000).map(lambda d: b"[" * d),  # nested too deeply (or unclosed)
    JSON_SMALL.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode()),  # not an object
    st.sampled_from([b'{"nums": "abc", "target": 3}', b'{"nums": [1, 2]}', b'{"target": 3}', b'{"nums": [1.5, 2], "target": 3}',
                     b'{"nums": [1, 2], "target": true}', b'{"nums": [1, 2], "target": "x"}']),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(lines=st.lists(st.one_of(GOOD_ROW.map(lambda r: ("good", r)), BAD_LINE.map(lambda b: ("bad", b))), max_size=30))
def test_load_problems_reads_every_good_row_and_names_every_bad_one(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("rows") / "rows.jsonl"
    path.write_bytes(b"".join((json.dumps(x).encode() if kind == "good" else x) + b"\n" for kind, x in lines))
    loaded = load_problems(path, progress=False)
    good = [i for i, (kind, _) in enumerate(lines) if kind == "good"]
    assert loaded.total_rows == len(lines)
    assert loaded.rows == good
    assert [(p.numbers, p.target) for p in loaded.problems] == [(tuple(lines[i][1]["nums"]), lines[i][1]["target"]) for i in good]
    assert [(i.row, i.reason) for i in loaded.issues] == [(i, "malformed") for i, (kind, _) in enumerate(lines) if kind == "bad"]


def test_the_ci_profile_is_derandomised():
    import os

    if os.environ.get("CI"):
        assert settings().derandomize
    assert settings.get_profile("ci").derandomize


HUGE = 10 ** 5000  # past str()'s 4,300-digit limit: a hand-written {value!r} raised that ValueError instead


@pytest.mark.parametrize("build, error, message", [
    (lambda: Rules(name=HUGE), TypeError, "Rules.name must be a str, got int"),
    (lambda: Rules(integer_only=HUGE), TypeError, "Rules.integer_only must be a bool, got int"),
    (lambda: Rules.from_dict(HUGE), ValueError, "needs a dict of Rules fields, got int"),
    (lambda: Problem((1, 2), "3" * 10 ** 6), TypeError, "must be an int, got str"),
    (lambda: resolve_rules([HUGE] * 10 ** 6), ValueError, "rules must be a Rules, a rules preset name or None, got list"),
    (lambda: GeneratorConfig(rules=[HUGE] * 10 ** 6), ValueError, "rules must be a Rules .*, got list"),
    (lambda: parse_turn(HUGE), TypeError, "a turn must be a str, got int"),
])
def test_a_bad_value_too_long_to_print_is_described_not_raised_from_its_repr(build, error, message):
    with pytest.raises(error, match=message) as info:
        build()
    assert len(str(info.value)) < 300


def test_a_scale_too_long_to_print_is_named_not_raised_from_its_repr():
    from countdown_gym.game.rules import check_finite

    with pytest.raises(ValueError, match="scale must be a finite number, got int"):
        check_finite(HUGE)
