"""The reward comparison's analysis (baselines/reward_analysis.py): its statistics against scipy's, and the page it
recomputes from records alone."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from baselines import reward_analysis as ra
from baselines.analysis.protocol import ids_digest


def test_welch_matches_scipy_and_holm_steps_down() -> None:
    from scipy.stats import ttest_ind

    a, b = [0.17, 0.19, 0.16, 0.18, 0.2], [0.15, 0.14, 0.17, 0.13]
    w = ra.welch(a, b)
    ref = ttest_ind(a, b, equal_var=False)
    assert w["p"] == pytest.approx(ref.pvalue) and w["difference"] == pytest.approx(np.mean(a) - np.mean(b))
    ci = ref.confidence_interval(0.95)
    assert (w["low"], w["high"]) == pytest.approx((ci.low, ci.high))
    assert ra.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert ra.holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert ra.welch([0.1, 0.1], [0.1, 0.1])["p"] == 1.0


def test_arms_of_one_rate_on_every_seed_differ_by_nothing() -> None:
    """Both arms without spread, of the same rate (an unchanged model's greedy play on every seed), but with 3 and 2
    seeds: their means differed by a rounding (1e-17), read as a certain difference (p = 0: a 'helps' verdict)."""
    assert ra.welch([0.1] * 3, [0.1] * 2) == {"difference": 0.0, "p": 1.0, "low": 0.0, "high": 0.0}
    assert ra.welch([0.3] * 2, [0.1] * 5)["p"] == 0.0  # no spread, another rate: a real difference


def test_bootstrap_interval_covers_the_difference_and_repeats() -> None:
    rng = np.random.default_rng(1)
    base = (rng.random((6, 400)) < 0.15).astype(np.uint8)
    better = (rng.random((6, 400)) < 0.25).astype(np.uint8)
    ci = ra.bootstrap_differences({"sparse": base, "x": better}, "sparse", resamples=2000)
    diff = better.mean() - base.mean()
    assert ci["x"][0] < diff < ci["x"][1] and ci["x"][0] > 0
    assert ra.bootstrap_differences({"sparse": base, "x": better}, "sparse", resamples=2000) == ci


def records(tmp_path: Path, arms: dict[str, list[float]], n: int = 200) -> Path:
    folder = tmp_path / "page"
    rng = np.random.default_rng(0)
    ids = [f"p/{i}" for i in range(n)]
    for arm, rates in arms.items():
        for seed, p in enumerate(rates):
            bits = "".join("1" if x else "0" for x in rng.random(n) < p)
            ra.write_record(folder / f"{arm}-s{seed}.json.gz", {
                "arm": arm, "seed": seed, "test_outcomes": bits, "start_outcomes": "0" * n,
                "problem_ids_sha256": ids_digest(ids), "seconds_per_step": 8.0, "steps": 30,
                "frac_reward_zero_std": [0.6, 0.7], "validation": [{"step": 0, "greedy_success": 0.1}, {"step": 30, "greedy_success": 0.2}],
                "options": {"learning_rate": 1e-4}})
    return folder


def test_the_page_is_recomputed_from_the_records_and_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = records(tmp_path, {"sparse": [0.15, 0.16, 0.14], "oracle-perfect": [0.3, 0.32, 0.31], "critic": [0.15, 0.17, 0.16]})
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Protocol\n\nWritten first.\n\n## Results\n\nold\n")
    ra.main(["--page", str(page)])
    text = page.read_text()
    assert text.startswith("# Title\n\n## Protocol\n\nWritten first.\n\n## Results\n") and "\nold\n" not in text
    assert "**Interim**" in text and "sparse: 3, oracle-perfect: 3, critic: 3 seeds" in text
    assert "| `oracle-perfect` | +" in text and "**helps**" in text  # 15 points on every seed
    assert (tmp_path / "page_forest.png").stat().st_size > 1000
    result = ra.analyse(ra.read_records(folder))
    line = ra.answer_line(result)
    assert line.startswith("Dense rewards against sparse (interim, 3 of 11 seeds an arm): oracle-perfect +")
    assert line.endswith("; oracle-perfect helps.") and f"**{line}**" in text
    assert result["arms"]["sparse"]["zero_spread"] == pytest.approx(0.65)
    assert set(result["comparisons"]) == {"oracle-perfect", "critic"}
    ra.main(["--page", str(page), "--check"])
    assert "matches the 9 records" in capsys.readouterr().out
    page.write_text(text.replace("**helps**", "no difference found"))
    with pytest.raises(SystemExit) as exc:
        ra.main(["--page", str(page), "--check"])
    assert exc.value.code == 1


def test_records_of_other_problems_or_without_arm_are_refused(tmp_path: Path) -> None:
    folder = records(tmp_path, {"sparse": [0.1, 0.2]})
    ra.write_record(folder / "x-s0.json.gz", {"arm": "x", "seed": 0, "test_outcomes": "1", "problem_ids_sha256": "other",
                                                  "seconds_per_step": 1.0, "steps": 1})
    with pytest.raises(SystemExit, match="different problems"):
        ra.analyse(ra.read_records(folder))
    (folder / "bad.json").write_text("[1]")
    with pytest.raises(SystemExit, match=r"needs at least 'arm' \(a string\) and 'seed' \(an integer\)"):
        ra.read_records(folder)
    (folder / "bad.json").write_text('{"arm": "x", "seed": 0, "test_outcomes": "1", "test_outcomes": "0"}')
    with pytest.raises(SystemExit, match="bad.json: not a JSON record .*appears twice"):  # was read last-wins
        ra.read_record(folder / "bad.json")


def test_two_records_of_one_run_are_refused(tmp_path: Path) -> None:
    """A record unpacked beside itself (sparse-s0.json and sparse-s0.json.gz) counted as two seeds: a smaller SE."""
    folder = records(tmp_path, {"sparse": [0.1, 0.2], "critic": [0.3, 0.3]})
    (folder / "sparse-s0.json").write_bytes(gzip.decompress((folder / "sparse-s0.json.gz").read_bytes()))
    with pytest.raises(SystemExit, match=r"sparse-s0.json.gz: a second record of arm 'sparse' seed 0 \(the first: sparse-s0.json\)"):
        ra.read_records(folder)


@pytest.mark.parametrize("short", [["sparse-s1"], ["critic-s0", "critic-s1"]])
def test_records_of_different_lengths_are_refused_naming_the_files(tmp_path: Path, short: list[str]) -> None:
    """Records without problem_ids_sha256 whose outcomes differ in length crashed in np.stack (within an arm) or in
    the bootstrap's matrix product (across arms) with a traceback; now one error naming the files."""
    folder = records(tmp_path, {"sparse": [0.1, 0.2], "critic": [0.3, 0.3]})
    for rec in ra.read_records(folder):
        name = f"{rec['arm']}-s{rec['seed']}"
        ra.write_record(folder / f"{name}.json.gz", {k: v for k, v in rec.items() if k != "problem_ids_sha256"}
                        | {k: rec[k][: 150 if name in short else None] for k in ("test_outcomes", "start_outcomes")})
    with pytest.raises(SystemExit) as exc:
        ra.main(["--page", str(tmp_path / "page.md")])
    long = sorted({"sparse-s0", "sparse-s1", "critic-s0", "critic-s1"} - set(short))
    assert f"{folder}: the records were tested on different problems: " in str(exc.value)
    assert f"150 outcomes in {', '.join(f'{n}.json.gz' for n in short)}" in str(exc.value)
    assert f"200 outcomes in {', '.join(f'{n}.json.gz' for n in long)}" in str(exc.value)


def test_the_committed_page_and_readme_answer_match_the_committed_records(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/results/reward_comparison.md and the README's answer line are what the committed records give (commit
    them together: ``python baselines/reward_analysis.py`` rewrites both)."""
    ra.main(["--check"])
    assert "matches the" in capsys.readouterr().out
    readme = ra.README.read_text(encoding="utf-8")
    assert ra.ANSWER_MARK in readme and ra.answer_line(ra.analyse(ra.read_records(ra.PAGE.with_suffix("")))) in readme


def test_the_quick_comparisons_page_expects_its_own_eight_seeds(tmp_path: Path) -> None:
    """``compare_llm_rewards.py --quick`` writes ``reward_comparison_quick.md``: its protocol (QUICK) has 8 seeds an
    arm, not the full comparison's 11, and its page says it is the quick version."""
    from baselines.compare_llm_rewards import QUICK

    folder = records(tmp_path, {"sparse": [0.15] * 3, "oracle-perfect": [0.3] * 3})
    page = tmp_path / f"{QUICK['name']}.md"
    folder.rename(page.with_suffix(""))
    ra.write_page(page, page.with_suffix(""))
    text = page.read_text()
    assert "**Dense rewards against sparse (quick version, interim, 3 of 8 seeds an arm): " in text
    assert "**Interim**: the quick version's answer needs 8 seeds in every arm." in text and "of 11" not in text
    full = records(tmp_path / "full", {"sparse": [0.15] * 8, "oracle-perfect": [0.3] * 8})
    for rec in full.iterdir():
        rec.rename(page.with_suffix("") / rec.name)
    ra.write_page(page, page.with_suffix(""))
    assert "(quick version, 8 seeds an arm)" in page.read_text() and "Interim" not in page.read_text()
    ra.main(["--page", str(page), "--check"])


def test_tuning_of_one_learning_rate_is_tabulated(tmp_path: Path) -> None:
    """One learning rate in ``tuning/`` was an IndexError (no next-best mean to compare with)."""
    for seed in (100, 101):
        ra.write_record(tmp_path / f"lr1e-4-s{seed}.json.gz", {"arm": "sparse", "seed": seed, "options": {"learning_rate": 1e-4},
                                                              "validation": [{"step": 30, "greedy_success": 0.2, "problems": 200}]})
    text = "\n".join(ra.tuning_lines(tmp_path))
    assert "| 1e-4 (chosen) | s100 20.0%, s101 20.0% |" in text and "One learning rate was tried;" in text


def test_one_seed_and_missing_figures_are_said_not_printed_as_numbers(tmp_path: Path) -> None:
    """One seed's SE and SD were printed as 0.0, a record without start outcomes or reward-spread rows as nan%."""
    folder = records(tmp_path, {"sparse": [0.2]})
    ra.write_record(folder / "sparse-s0.json.gz", {**ra.read_records(folder)[0], "start_outcomes": "", "frac_reward_zero_std": []})
    text = "\n".join(ra.results_lines(ra.analyse(ra.read_records(folder)), folder, tmp_path / "page.md"))
    assert "(the starting model: not recorded)" in text and "nan" not in text
    assert "(SE undefined: one seed) | undefined |" in text and "not recorded |" in text


def test_a_run_that_timed_no_step_is_not_recorded_not_a_traceback(tmp_path: Path) -> None:
    """A run resumed after its last checkpoint trains no step: its summary has no seconds_per_step, its record None,
    and the analysis raised a TypeError in np.mean; now the mean of the runs that timed steps, or "not recorded"."""
    folder = records(tmp_path, {"sparse": [0.2, 0.2], "critic": [0.3, 0.3]})
    for rec in ra.read_records(folder):
        if rec["arm"] == "critic" or rec["seed"] == 0:
            ra.write_record(folder / f"{rec['arm']}-s{rec['seed']}.json.gz", {**rec, "seconds_per_step": None})
    text = "\n".join(ra.results_lines(ra.analyse(ra.read_records(folder)), folder, tmp_path / "page.md"))
    assert "| `sparse` | 2 | " in text and "| 8.00 | 30 |" in text and "| not recorded | 30 |" in text


def test_a_missing_records_folder_is_a_usage_error_and_the_page_is_kept(tmp_path: Path) -> None:
    """A mistyped --records (or --page) read as no records: the page's results became 'No run has finished yet.'
    (and, for the project's page, the README's answer line 'no comparison yet'), exit 0."""
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n## Results\n\nthe results\n")
    for argv in (["--records", str(tmp_path / "typo")], []):
        with pytest.raises(SystemExit) as exc:
            ra.main(["--page", str(page), *argv])
        assert exc.value.code == 2
    assert page.read_text() == "# Title\n\n## Results\n\nthe results\n"
    for runs in (tmp_path / "typo", page):  # a --tuning-runs missing or a file: 'Not a directory', exit 1
        with pytest.raises(SystemExit) as exc:
            ra.main(["--page", str(page), "--tuning-runs", str(runs)])
        assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:  # played no AUROC: --auroc-samples was ignored, exit 0
        ra.main(["--page", str(page), "--records", str(records(tmp_path, {"sparse": [0.1]})), "--auroc-samples", "8"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:  # a page in no folder: an error naming a temporary file, exit 1
        ra.main(["--page", str(tmp_path / "typo" / "page.md"), "--records", str(records(tmp_path, {"sparse": [0.1]}))])
    assert exc.value.code == 2


def test_a_page_that_is_not_utf8_is_one_error_naming_it(tmp_path: Path) -> None:
    """A --page of other bytes (UTF-16, Latin-1) was a UnicodeDecodeError traceback, with --check too."""
    records(tmp_path, {"sparse": [0.1, 0.2]})
    (tmp_path / "page.md").write_bytes(b"\xff\xfe# Title\n")
    for check in ([], ["--check"]):
        with pytest.raises(SystemExit, match=r"page.md is not UTF-8 text \(byte 0\)"):
            ra.main(["--page", str(tmp_path / "page.md"), *check])
    assert (tmp_path / "page.md").read_bytes() == b"\xff\xfe# Title\n"


@pytest.mark.parametrize("damage", ["cut", "not gzip", "no outcomes", "outcomes 0-2", "nested", "auroc", "seed", "start short"])
def test_a_damaged_record_is_one_error_naming_its_file(tmp_path: Path, damage: str) -> None:
    """A cut-off .json.gz raised EOFError (a traceback), a file not gzipped said 'Not a gzipped file' naming no file,
    a record without test_outcomes raised KeyError, and outcomes "0120" counted the 2 as two successes."""
    folder = records(tmp_path, {"sparse": [0.1, 0.2]})
    path = folder / "sparse-s0.json.gz"
    rec = ra.read_records(folder)[0]
    if damage == "cut":
        path.write_bytes(path.read_bytes()[:60])
    elif damage == "not gzip":
        path.write_bytes(b"hi")
    elif damage == "nested":  # was a RecursionError traceback
        path.write_bytes(gzip.compress(b"[" * 100_000))
    elif damage == "seed":  # "seed": "x" was a ValueError traceback from the sort
        ra.write_record(path, {**rec, "seed": "x"})
    elif damage == "start short":  # start outcomes of 5 problems gave the starting model's rate over those 5, silently
        ra.write_record(path, {**rec, "start_outcomes": "11111"})
    elif damage == "auroc":  # a cut-off dense_term_auroc.json: a JSONDecodeError traceback
        path = folder / ra.AUROC_FILE
        path.write_text('{"terms": {"oracle')
    else:
        ra.write_record(path, {k: v for k, v in rec.items() if k != "test_outcomes"} if damage == "no outcomes"
                        else {**rec, "test_outcomes": "0120" + rec["test_outcomes"][4:]})
    with pytest.raises(SystemExit, match=f"{path.name}:? "):
        ra.main(["--page", str(tmp_path / "page.md")])


@pytest.mark.parametrize("auroc", [{}, {"terms": [1]}, {"solved": "x"}, {"temperature": float("nan")},
                                   {"terms": {"critic": {"per_move": 0.6}}}])
def test_an_auroc_file_without_its_figures_is_one_error_naming_it(tmp_path: Path, auroc: dict) -> None:
    """A dense_term_auroc.json that is JSON but not --auroc's table (a field missing or of another kind) was a KeyError /
    AttributeError / ValueError traceback, and a temperature NaN was printed as 'T = nan'."""
    import json

    folder = records(tmp_path, {"sparse": [0.1, 0.2]})
    whole = {"episodes": 8, "problems": 2, "moves": 20, "temperature": 0.5, "solved": 0.25, "clipo_note": "n",
             "terms": {"critic": {"per_move": 0.6, "per_episode": 0.7}}}
    (folder / ra.AUROC_FILE).write_text(json.dumps(whole))
    ra.main(["--page", str(tmp_path / "page.md")])
    (folder / ra.AUROC_FILE).write_text(json.dumps({} if not auroc else {**whole, **auroc}))
    with pytest.raises(SystemExit, match=f"{ra.AUROC_FILE}: not what --auroc writes"):
        ra.main(["--page", str(tmp_path / "page.md")])


def test_an_interrupted_forest_plot_keeps_the_old_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, torn_savefig) -> None:
    """The forest plot was saved in place: Ctrl-C mid-save left a torn PNG beside the page; now the old one stays."""

    records(tmp_path, {"sparse": [0.15, 0.16], "critic": [0.2, 0.21]})
    ra.main(["--page", str(tmp_path / "page.md")])
    png = tmp_path / "page_forest.png"
    old = png.read_bytes()

    torn_savefig()
    with pytest.raises(KeyboardInterrupt):
        ra.main(["--page", str(tmp_path / "page.md")])
    assert png.read_bytes() == old and not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize(("field", "value"), [
    ("test_outcomes", ["1", 0, 1]), ("test_outcomes", [None, 1]), ("test_outcomes", [2, 0]), ("test_outcomes", [0.5, 1]),
    ("steps", -3), ("seed", 1.5), ("seed", True), ("seconds_per_step", "fast"), ("frac_reward_zero_std", [2]),
    ("validation", [{"step": 30}]), ("validation", [{"step": 30, "greedy_success": 0.2, "problems": -1}]),
    ("options", {"learning_rate": "1e-4"}), ("arm", None), ("seconds_per_step", float("inf")),
    ("validation", [{"step": float("inf"), "greedy_success": 0.2}]), ("options", {"learning_rate": float("inf")})])
def test_a_hand_edited_field_is_one_error_naming_the_file_and_field(tmp_path: Path, field: str, value: object) -> None:
    """Values edited by hand inside a valid record were read on: a list of outcomes with "1" or 2 or 0.5 counted as
    successes, None as a failure, a negative step count or a bad seed was a traceback from deep inside (np.mean, int(),
    the sort), a validation row without greedy_success a KeyError; now one error naming the file and the field."""
    folder = records(tmp_path, {"sparse": [0.1, 0.2], "critic": [0.3, 0.3]})
    path = folder / "critic-s1.json.gz"
    ra.write_record(path, {**ra.read_record(path), field: value})
    with pytest.raises(SystemExit, match=f"critic-s1.json.gz: '{field}' must be "):
        ra.main(["--page", str(tmp_path / "page.md")])


@pytest.mark.parametrize("damage", ["no learning rate", "no validation", "no problems count"])
def test_a_tuning_record_without_what_the_table_reads_is_one_error(tmp_path: Path, damage: str) -> None:
    """A tuning record without options' learning_rate, with no validation row or no 'problems' in its last one was a
    KeyError / IndexError."""
    rec = {"arm": "sparse", "seed": 100, "options": {"learning_rate": 1e-4}, "validation": [{"step": 30, "greedy_success": 0.2}]}
    if damage == "no learning rate":
        rec["options"] = {}
    elif damage == "no validation":
        rec["validation"] = []
    ra.write_record(tmp_path / "lr-s100.json.gz", rec)
    with pytest.raises(SystemExit, match="lr-s100.json.gz: " if damage != "no problems count" else "seed 100 needs 'problems'"):
        ra.tuning_lines(tmp_path)


@pytest.mark.parametrize("kill_at", [2, 3, "part"])  # at the 2nd or 3rd rename (the page), or writing a part
def test_a_write_killed_between_its_files_is_finished_by_the_next_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str], kill_at) -> None:
    """The forest plot, the page and the README's answer line were each replaced on its own: a kill between them left
    a new plot (or answer line) beside the old page, and --check passed on the README alone. Now all are written
    aside first, a journal names them, the page is renamed last; a kill while renaming is finished by the next run
    (even --check), a kill before the journal leaves the old set and no temporary file."""
    import os

    from countdown_gym.dataclass_cli import output as together

    records(tmp_path, {"sparse": [0.15, 0.16], "critic": [0.2, 0.21]})
    page, readme = tmp_path / "page.md", tmp_path / "README.md"
    readme.write_text(f"intro\n{ra.ANSWER_MARK}\nold answer\nend\n")
    monkeypatch.setattr(ra, "PAGE", page)
    monkeypatch.setattr(ra, "README", readme)
    ra.main(["--page", str(page)])
    old = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    records(tmp_path, {"sparse": [0.15, 0.16, 0.5], "critic": [0.2, 0.21, 0.1]})  # a third seed: other results
    real, renames = os.replace, []

    def killed(src, dst):  # dst a part: it is written; src a part: it replaces its file
        if ".part." in Path(src).name and not str(src).endswith(".tmp"):
            renames.append(dst)
        if kill_at == "part" and ".part." in Path(dst).name or len(renames) == kill_at:
            raise KeyboardInterrupt
        return real(src, dst)

    monkeypatch.setattr(together.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        ra.main(["--page", str(page)])
    monkeypatch.setattr(together.os, "replace", real)
    now = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    assert now["page.md"] == old["page.md"]  # the page is renamed last
    if kill_at == "part":
        assert now == old  # nothing replaced, no temporary left
        return
    assert now["page_forest.png"] != old["page_forest.png"] and (now["README.md"] != old["README.md"]) == (kill_at == 3)
    ra.main(["--page", str(page), "--check"])  # the next run finishes the write first
    assert "matches the 6 records" in capsys.readouterr().out
    assert not [p.name for p in tmp_path.iterdir() if ".part" in p.name]
