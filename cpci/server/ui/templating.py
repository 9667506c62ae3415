"""The Jinja2 environment: templates from the package, autoescape always on, strict undefined.

Autoescape is forced for every template name (not only `.html`), because config names and
failure messages come from uploads; plots arrive as `Markup` already escaped by `svg`.
"""

from __future__ import annotations

import re
from datetime import datetime

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from starlette.templating import Jinja2Templates

from cpci import urls
from cpci.schema import verdicts


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


def make_templates() -> Jinja2Templates:
    env = Environment(
        loader=PackageLoader("cpci.server", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(percent=percent, seconds=seconds, when=when, breakable=breakable)
    env.globals["urls"] = urls
    env.globals["verdict_info"] = verdicts.info  # one name, icon and order per verdict
    return Jinja2Templates(env=env)
