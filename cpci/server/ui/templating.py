"""The Jinja2 environment: templates from the package, autoescape always on, strict undefined.

Autoescape is forced for every template name (not only `.html`), because config names and
failure messages come from uploads; plots arrive as `Markup` already escaped by `svg`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from starlette.templating import Jinja2Templates

from cpci import urls
from cpci.schema import verdicts
from cpci.server.ui.icons import icon, sprite
from cpci.server.views import grid


def percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def seconds(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 120:
        return f"{value / 60:.1f} min"
    return f"{value:.3g} s"


def when(value: datetime | None) -> str:
    return "–" if value is None else value.strftime("%Y-%m-%d %H:%M UTC")


#: Where a config id may wrap: after a path's `/`, a node id's `::` and a parameter's `-`, and
#: before its parameter list's `[`; never inside a name.
_BREAKS = re.compile(r"(?<=/)|(?<=::)|(?=\[)|(?<=-)")


def breakable(text: str) -> Markup:
    """`text`, escaped, with a line-break opportunity (`<wbr>`) at each of `_BREAKS`: a narrow
    column wraps a config id between its parts instead of mid-name."""
    return Markup("<wbr>").join(part for part in _BREAKS.split(text) if part)


#: The PR page's headline per gate (`cpci.github.gate`): what the check run concludes, in words.
GATE_TITLES = {
    "failure": "Fails the gate",
    "neutral": "Passes the gate, with failures not blamed on this PR",
    "success": "Passes",
    "pending": "Pending: no verdict until every shard is in",
}


#: A grid cell per state: a class for its colour and a character for readers who cannot tell
#: the colours apart (plain text, in every font).
_GRID_CELLS = {
    "pass": '<td class="c pass"></td>',
    "fail": '<td class="c fail">x</td>',
    "mixed": '<td class="c mixed">~</td>',
    "skip": '<td class="c skip">-</td>',
    "": '<td class="c none"></td>',
}


def grid_cells(states: Sequence[str]) -> Markup:
    """A grid row's cells, joined here rather than looped in Jinja: thousands of rows of thirty
    cells are most of the grid page's markup."""
    return Markup("".join(_GRID_CELLS[s] for s in states))


def make_templates() -> Jinja2Templates:
    env = Environment(
        loader=PackageLoader("cpci.server", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        percent=percent, seconds=seconds, when=when, breakable=breakable, grid_cells=grid_cells
    )
    env.globals["urls"] = urls
    env.globals["verdict_info"] = verdicts.info  # one name, title and order per verdict
    env.globals["VERDICTS"] = verdicts.VERDICTS
    env.globals["GATE_TITLES"] = GATE_TITLES
    env.globals["GRID_VERDICTS"] = (*grid.ORDER, "quarantined")
    env.globals["icon"] = icon  # inline SVG, never an emoji (`ui.icons`)
    env.globals["icon_sprite"] = sprite
    return Jinja2Templates(env=env)
