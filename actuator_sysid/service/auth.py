"""API tokens: `Authorization: Bearer <token>` (or the login form's cookie) → the caller's project.

Tokens are made by `actuator-sysid token create` and stored as sha256 hashes only. When auth is required
(settings.auth_required) every route except the public ones answers 401 without a valid token (pages
redirect to the login form). A valid token scopes every read and write to its project; without auth the
caller sees every project and writes to "default".
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .db import Repository

COOKIE = "actuator_sysid_token"
PUBLIC_PREFIXES = ("/static/",)
PUBLIC_PATHS = ("/healthz", "/login", "/favicon.ico")


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def _token_from(scope: Scope) -> str | None:
    headers = dict(scope.get("headers") or [])
    auth = headers.get(b"authorization", b"").decode("latin-1")
    if auth[:7].lower() == "bearer " and auth[7:].strip():
        return auth[7:].strip()
    for part in headers.get(b"cookie", b"").decode("latin-1").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE and value:
            return value
    return None


class AuthMiddleware:
    """Puts the caller's project in `scope["state"]["project"]` (None: every project); refuses when required."""

    def __init__(self, app: ASGIApp, repo: Repository, required: bool) -> None:
        self.app, self.repo, self.required = app, repo, required

    async def _project(self, token: str) -> str | None:
        """The token's project, looked up on every request (one indexed read): a token revoked by any process
        (`actuator-sysid token revoke`, another server worker) is refused on its next request, not after a
        cache expires."""
        if len(token) > 512 or not token.isprintable():  # no token made here looks like it: no read
            return None
        return await run_in_threadpool(self.repo.token_project, token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = _token_from(scope)
        project = await self._project(token) if token else None
        state = scope.setdefault("state", {})
        state["project"] = project
        state["authenticated"] = project is not None
        path = scope["path"]
        if self.required and project is None and not is_public(path):
            response: Response
            if scope["method"] == "GET" and not path.startswith(
                ("/api/", "/metrics", "/openapi", "/docs", "/redoc")
            ):
                target = path + (
                    ("?" + scope["query_string"].decode("latin-1")) if scope.get("query_string") else ""
                )
                response = RedirectResponse("/login?next=" + quote(target, safe=""), status_code=303)
            else:
                why = "invalid or revoked API token" if token else "missing API token"
                response = JSONResponse(
                    {
                        "detail": f"{why}: send 'Authorization: Bearer <token>' (make one with "
                        "`actuator-sysid token create --project <name>`)"
                    },
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def safe_next(target: str | None) -> str:
    """Where to go after login: only a path on this site (no scheme, no host, no '//')."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target
