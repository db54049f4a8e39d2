"""Operations and the site's furniture: health, Prometheus metrics, the login form and logout, the API docs
pages and the static files they and the reports load (from installed packages, no CDN)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from .. import pages
from ..auth import COOKIE, safe_next
from ..db import NotFoundError
from ..deps import MetricsDep, Repo
from ..schemas import ERRORS, Problem
from ..templating import plotly_js_path

DOCS_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'"
)

router = APIRouter()


@router.get("/healthz", tags=["operations"], responses={503: {"model": Problem}})
async def healthz(repo: Repo) -> Response:
    """Liveness and database reachability; no token needed."""
    try:
        repo.ping()
    except Exception as e:
        return JSONResponse(
            {"status": "error", "detail": f"database unreachable: {type(e).__name__}"}, status_code=503
        )
    return JSONResponse({"status": "ok"})


@router.get(
    "/metrics",
    tags=["operations"],
    response_class=Response,
    responses={
        200: {
            "content": {
                "text/plain": {
                    "example": 'actuator_sysid_fits{status="running"} 1.0\nactuator_sysid_queue_depth 0.0\n'
                }
            }
        },
        **ERRORS,
    },
)
def metrics_route(metrics: MetricsDep) -> Response:
    """Prometheus text: requests by route/status, fits by status, queue depth, fit duration histogram."""
    return Response(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/login", response_class=HTMLResponse, include_in_schema=False)
def login_form(next: str | None = None) -> str:
    return pages.render_login(safe_next(next))


@router.post("/login", include_in_schema=False)
async def login(request: Request, repo: Repo) -> Response:
    form = await request.form()
    token, target = str(form.get("token") or "").strip(), safe_next(str(form.get("next") or "/"))
    if not token or await run_in_threadpool(repo.token_project, token) is None:
        return HTMLResponse(
            pages.render_login(target, "That token is not valid (or was revoked)."), status_code=401
        )
    resp = RedirectResponse(target, status_code=303)
    resp.set_cookie(
        COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        max_age=30 * 24 * 3600,
    )
    return resp


@router.post("/logout", include_in_schema=False)
def logout() -> Response:
    resp = RedirectResponse("/login", status_code=303)
    resp.delete_cookie(COOKIE)
    return resp


# --- API docs from the installed fastapi-offline package's Swagger UI and ReDoc files (no CDN) ---


def _local_only(page: HTMLResponse) -> HTMLResponse:
    """The docs pages may load nothing from elsewhere: ReDoc's footer links a logo from its CDN."""
    page.headers["Content-Security-Policy"] = DOCS_CSP
    return page


@router.get("/docs", include_in_schema=False)
def swagger_ui() -> HTMLResponse:
    return _local_only(
        get_swagger_ui_html(
            openapi_url="/openapi.json",
            title="actuator-sysid · API docs",
            swagger_js_url="/static/docs/swagger-ui-bundle.js",
            swagger_css_url="/static/docs/swagger-ui.css",
            swagger_favicon_url="/static/docs/favicon.png",
            oauth2_redirect_url="/docs/oauth2-redirect",
        )
    )


@router.get("/docs/oauth2-redirect", include_in_schema=False)
def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@router.get("/redoc", include_in_schema=False)
def redoc() -> HTMLResponse:
    return _local_only(
        get_redoc_html(
            openapi_url="/openapi.json",
            title="actuator-sysid · API reference",
            redoc_js_url="/static/docs/redoc.standalone.js",
            redoc_favicon_url="/static/docs/favicon.png",
            with_google_fonts=False,
        )
    )


@router.get("/static/docs/{name}", include_in_schema=False)
def docs_asset(name: str) -> Response:
    data = pages.docs_asset_bytes(name)
    if data is None:
        raise NotFoundError(f"no docs asset {name!r}")
    return Response(
        data, media_type=pages.DOCS_ASSETS[name], headers={"Cache-Control": "public, max-age=86400"}
    )


@router.get("/favicon.ico", include_in_schema=False)
def favicon() -> Response:
    """The site's icon (the pages inline it; a browser asks /favicon.ico of the JSON routes)."""
    return Response(
        pages.favicon_svg(), media_type="image/svg+xml", headers={"Cache-Control": "public, max-age=86400"}
    )


@router.get("/static/plotly.min.js", include_in_schema=False)
def plotly_js() -> FileResponse:
    return FileResponse(
        plotly_js_path(),
        media_type="text/javascript",
        headers={"Cache-Control": "public, max-age=86400"},
    )
