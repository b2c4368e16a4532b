"""The leaderboard as one static HTML page (``leaderboard/leaderboard.html``, written by ``leaderboard score``).

The rows of ``LEADERBOARD.md`` (:func:`~countdown_gym.leaderboard.score.ranked`), one table per preset and split,
sortable by any column (``#sort=<column>:<asc|desc>`` in the address sorts on load) and filtered by a search box;
each row links its submission file and its model card (when ``model`` names a repository folder with a
``README.md``). Chart, style and script are inline and the Content-Security-Policy allows nothing else. Every
submitted string is made plain (:func:`~countdown_gym.leaderboard.names.plain_text`) and HTML-escaped.
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from countdown_gym.leaderboard.names import display_name, plain_text
from countdown_gym.leaderboard.score import COLUMNS, Rejection, Scores, _fmt, _rel, interaction, ranked


def _asset(name: str) -> str:
    """The page's style or script (``page.css``, ``page.js`` beside this module) on one line for the page."""
    text = (resources.files("countdown_gym.leaderboard") / name).read_text(encoding="utf-8")
    return " ".join(line.strip() for line in text.strip().splitlines())


STYLE, SCRIPT = _asset("page.css"), _asset("page.js")


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


CSP = (f"default-src 'none'; img-src data:; style-src {_csp_hash(STYLE)}; script-src {_csp_hash(SCRIPT)}; "
       "base-uri 'none'; form-action 'none'")
"""The page's Content-Security-Policy: its own style and script (by hash) and ``data:`` images, nothing else."""


def _text(value: Any, limit: int | None = None) -> str:
    """Untrusted text as inert HTML: one plain line (:func:`plain_text`), then escaped (quotes included)."""
    return html.escape(plain_text(value, limit), quote=True)


def _href(rel: str) -> str:
    """A relative link the scorer computed, percent-encoded and escaped for an attribute."""
    return html.escape(quote(rel, safe="/"), quote=True)


def model_card(model: Any, root: Path, base: Path) -> str | None:
    """The link (relative to ``base``) to the model card of a submission's ``model``: ``<root>/<model>/README.md``
    or ``<root>/<model>`` when it is a ``README.md``, inside ``root`` once links are resolved; else ``None``."""
    if not isinstance(model, str) or not model.strip() or "\x00" in model or len(model) > 400:
        return None
    try:
        top = root.resolve()
        path = (top / model).resolve()
        if not path.is_relative_to(top):
            return None
        card = path / "README.md" if path.is_dir() else path
        if card.name != "README.md" or not card.is_file():
            return None
        return Path(os.path.relpath(card, base.resolve())).as_posix()
    except (OSError, ValueError, RuntimeError):
        return None


def _row(rank: int, s: Scores, root: Path, base: Path) -> str:
    h = s.header
    rel = _rel(s.path, base)
    card = model_card(h.get("model"), root, base)
    model = f"{_text(h['model'], 80)} ({_text(h['model_size'], 20)})"
    if card is not None:
        model += f' <a class="card" href="{_href(card)}">model card</a>'
    command, short = plain_text(h["command"]), plain_text(h["command"], 60)
    cells = [
        f'<td class="num">{rank}</td>',
        f'<td class="agent">{_text(display_name(h["agent"]), 100)}</td>',  # the board's one rule for names
        f'<td class="method">{_text(h["method"], 200)}</td>',
        f"<td>{_text(interaction(h))}</td>",
        f"<td>{model}</td>",
        f"<td>{_text(h['reward_variant'], 40)}</td>",
        f'<td class="num">{s.pass_at_1:.3f}</td>',
        ('<td class="num" data-sort="">-</td>' if s.pass_at_k is None
         else f'<td class="num" data-sort="{s.pass_at_k:.6f}">{s.pass_at_k:.3f} (k={s.k})</td>'),
        f'<td class="num">{s.per_sample:.3f}</td>',
        f'<td class="num">{_fmt(s.invalid_step_rate)}</td>',
        f'<td class="num">{s.mean_length:.0f}</td>',
        f'<td class="num">{s.num_answers}</td>',
        f"<td>{_text(h['authors'], 120)}</td>",
        f'<td class="command" data-sort="{html.escape(command, quote=True)}"><details><summary><code>{html.escape(short)}</code>'
        f"</summary><code>{html.escape(command)}</code></details></td>",
        f'<td class="file"><a href="{_href(rel)}">{_text(Path(rel).name)}</a></td>',
    ]
    return "<tr>" + "".join(cells) + "</tr>"


def render_html(results: list[Scores | Rejection], base: Path, png: bytes | None = None) -> str:
    """The text of ``leaderboard.html`` (deterministic: no timestamps); links relative to ``base``, model cards
    looked up in ``base``'s parent (the repository); ``png``: the chart's bytes, embedded."""
    scores = [r for r in results if isinstance(r, Scores)]
    rejected = [r for r in results if isinstance(r, Rejection)]
    root = base.parent
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>countdown-gym leaderboard</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>countdown-gym leaderboard</h1>",
        '<p class="note">Written by <code>python -m countdown_gym.leaderboard score</code> from '
        '<a href="submissions/">submissions/</a>, as <a href="LEADERBOARD.md">LEADERBOARD.md</a>; every answer '
        "re-verified with <code>countdown_gym.verify</code>. Click a column header to sort; pass@k is the unbiased "
        "estimator with the submission's k; invalid steps are illegal or miscomputed move lines of the first answers; "
        "length is mean characters per answer. How to submit: <a href=\"README.md\">README.md</a>.</p>",
        '<p><label>Filter rows: <input id="filter" type="search" placeholder="agent, method, model, reward..."></label></p>',
    ]
    if png and scores:
        data = base64.b64encode(png).decode("ascii")
        out.append(f'<figure><img alt="pass@1 per agent" src="data:image/png;base64,{data}"></figure>')
    head = "".join(f'<th data-column="{html.escape(name)}" data-type="{kind}">{html.escape(name)}</th>'
                   for name, kind in COLUMNS)
    for (preset, split), rows in ranked(scores).items():
        out += [
            f"<section><h2>{_text(preset)} / {_text(split)} ({rows[0][1].num_problems} problems)</h2>",
            f'<table class="board"><thead><tr>{head}</tr></thead><tbody>',
            *(_row(rank, s, root, base) for rank, s in rows),
            "</tbody></table></section>",
        ]
    out.append("<h2>Rejected submissions</h2>")
    out.append("<ul>" + "".join(f"<li><code>{_text(_rel(r.path, base), 100)}</code>: {_text(r.reason, 400)}</li>"
                                for r in rejected) + "</ul>" if rejected else "<p>None.</p>")
    out += [f"<script>{SCRIPT}</script>", "</body></html>"]
    return "\n".join(out) + "\n"
