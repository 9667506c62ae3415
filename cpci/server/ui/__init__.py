"""The web UI: server-rendered pages with SVG plots, mounted by `create_app`.

`install_ui(app)` adds the pages under `/ui`, their static files under `/ui/static`, and makes
errors on UI paths render as HTML pages (the API keeps its JSON errors).
"""

from __future__ import annotations

import inspect
from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.staticfiles import StaticFiles

from cpci import urls
from cpci.server.core.errors import ApiError
from cpci.server.ui import landing
from cpci.server.ui.routes import render, router


def install_ui(app: FastAPI) -> None:
    static = str(files("cpci.server").joinpath("static"))
    # Before the pages, or `/ui/{owner}/{repo}` would claim `/ui/static/ui.css`.
    app.mount(urls.static(""), StaticFiles(directory=static), name="ui-static")
    app.include_router(router)
    app.include_router(landing.router)  # `/`, the front door
    api_handler = app.exception_handlers[ApiError]

    async def ui_error(request: Request, exc: Exception) -> Response:
        if not request.url.path.startswith(urls.UI_PREFIX + "/") or not isinstance(exc, ApiError):
            response = api_handler(request, exc)
            return await response if inspect.isawaitable(response) else response
        page = render(request, "error.html", status=exc.status, detail=exc.detail)
        page.status_code = exc.status
        return page

    app.add_exception_handler(ApiError, ui_error)


__all__ = ["install_ui"]
