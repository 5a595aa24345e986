"""The web console: static files served as they are, no build step, nothing from
elsewhere (a Content-Security-Policy allows this origin only). `GET /` is the console;
its files are under `/console/`. The console calls the same `/v1/` routes as any client,
with the key a person pastes (kept in the browser tab's sessionStorage)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from fastapi import APIRouter, Response

from services.gateway.errors import ApiError

FILES = Path(__file__).with_name("console")
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}

router = APIRouter(tags=["console"], include_in_schema=False)


@cache
def _file(name: str) -> tuple[bytes, str] | None:
    path = FILES / name
    kind = TYPES.get(path.suffix)
    if kind is None or path.parent != FILES or not path.is_file():
        return None
    return path.read_bytes(), kind


def _serve(name: str) -> Response:
    found = _file(name)
    if found is None:
        raise ApiError(404, f"the console has no file {name}")
    content, kind = found
    return Response(content, media_type=kind, headers=HEADERS)


@router.get("/")
async def console() -> Response:
    return _serve("index.html")


@router.get("/console/{name}")
async def console_file(name: str) -> Response:
    return _serve(name)
