"""The pages' icons as inline SVG: drawn the same on every machine, with or without emoji fonts.

The verdict table's emoji (`cpci.schema.verdicts`) are for GitHub, which renders them; a browser
without an emoji font draws them as empty boxes, so the web UI never prints them. Each icon is a
16x16 path in the text's colour (`currentColor`), drawn once per page in a sprite and referred to
by each use, hidden from screen readers: the word beside it says the same.
"""

from __future__ import annotations

from markupsafe import Markup

#: Each icon's SVG body (16x16 viewBox; `svg.icon` in ui.css strokes it in the text's colour).
_BODIES: dict[str, str] = {
    "cross": '<path d="M4 4l8 8M12 4l-8 8"/>',
    "check": '<path d="M3 8.5l3.2 3.2L13 4.5"/>',
    "clock": '<circle cx="8" cy="8" r="6"/><path d="M8 4.5V8l2.5 1.5"/>',
    "question": '<circle cx="8" cy="8" r="6"/><path d="M6.2 6.3a1.9 1.9 0 1 1 2.6 1.8c-.6.3-.8.7'
    '-.8 1.3"/><circle cx="8" cy="11.4" r=".5" fill="currentColor"/>',
    "wrench": '<path d="M10.5 2.5a3 3 0 0 0-3.3 4L2.8 10.9a1.3 1.3 0 0 0 1.8 1.8L9 8.3a3 3 0 0 0'
    ' 4-3.3l-1.8 1.8-1.8-.5-.5-1.8z"/>',
    "dice": '<rect x="2.5" y="2.5" width="11" height="11" rx="2"/><circle cx="5.5" cy="5.5" '
    'r=".8" fill="currentColor"/><circle cx="8" cy="8" r=".8" fill="currentColor"/><circle '
    'cx="10.5" cy="10.5" r=".8" fill="currentColor"/>',
    "wall": '<rect x="2" y="3" width="12" height="10"/><path d="M2 6.3h12M2 9.7h12M6 3v3.3M10 '
    '6.3v3.4M6 9.7V13"/>',
    "skip": '<path d="M3 4l5 4-5 4zM8 4l5 4-5 4z"/>',
    "lock": '<rect x="3" y="7" width="10" height="7" rx="1"/><path d="M5.5 7V5a2.5 2.5 0 0 1 5 '
    '0v2"/>',
    "up": '<path d="M4 10l4-4 4 4"/>',
    "down": '<path d="M4 6l4 4 4-4"/>',
}

#: The icon of each PR verdict (the names of `cpci.schema.verdicts`), and of the UI's markers.
BY_NAME: dict[str, str] = {
    "new_failure": "cross",
    "pending": "clock",
    "no_baseline": "question",
    "infra": "wrench",
    "flaky": "dice",
    "flaky_on_arrival": "dice",
    "broken_at_base": "wall",
    "broken": "wall",
    "fixed": "check",
    "passed": "check",
    "skipped": "skip",
    "quarantined": "lock",
    "failure": "cross",
    "success": "check",
    "neutral": "question",
    "ascending": "up",
    "descending": "down",
}


def icon(name: str) -> Markup:
    """A reference to the icon for `name` (a verdict, a gate or a marker) in the page's `sprite`:
    a few dozen bytes, where the grid has one per row. An unknown name is a bug in a template,
    so it raises with the names there are."""
    shape = BY_NAME.get(name, name)
    if shape not in _BODIES:
        known = ", ".join(sorted({*BY_NAME, *_BODIES}))
        raise ValueError(f"no icon named {name!r}; the icons are {known}")
    return Markup(f'<svg class="icon" aria-hidden="true"><use href="#icon-{shape}"/></svg>')


def sprite() -> Markup:
    """Every icon once, as a `<symbol>` that `icon` refers to: each page's `base.html` holds it."""
    symbols = "".join(
        f'<symbol id="icon-{name}" viewBox="0 0 16 16">{body}</symbol>'
        for name, body in _BODIES.items()
    )
    return Markup(f'<svg class="sprite" aria-hidden="true" width="0" height="0">{symbols}</svg>')
