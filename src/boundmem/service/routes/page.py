"""The transparency page (/ui): static files under a strict Content-Security-Policy, never cached."""
from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, RedirectResponse

STATIC = Path(__file__).resolve().parents[1] / "static"
PAGE_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
            "form-action 'none'; frame-ancestors 'none'; base-uri 'none'")

router = APIRouter(include_in_schema=False)


def page_file(name: str) -> FileResponse:
    r = FileResponse(STATIC / name)
    r.headers["Content-Security-Policy"] = PAGE_CSP
    r.headers["X-Content-Type-Options"] = "nosniff"
    r.headers["Referrer-Policy"] = "no-referrer"
    r.headers["Cache-Control"] = "no-store"
    return r


@router.get("/")
def root():
    return RedirectResponse("/ui")


@router.get("/ui")
def ui():
    return page_file("index.html")


@router.get("/ui/{name}")
def ui_asset(name: str):
    if name not in ("app.js", "style.css"):
        raise HTTPException(404, f"no such file {name!r}")
    return page_file(name)
