"""The web management UI: a single page served from the package at ``/`` of the HTTP port.

The page (``static/index.html``) and its assets (``static/app.js``, ``static/app.css``, the
licences of the bundled libraries) are built from ``ui/`` by ``npm run build`` and committed, so
the broker needs no Node.js and fetches nothing from elsewhere at run time. Everything the page
shows comes from the management API under ``/api`` (the same calls RabbitMQ's UI makes), with
the user's credentials sent by the page as HTTP basic auth.

What this module adds to the API's aiohttp application (``add_routes``):

* ``GET /`` (and ``/index.html``): the page, ``Cache-Control: no-cache`` so a new broker version
  is picked up at once; ``GET /static/{file}``: the assets. The page names each asset with
  ``?v=<hash of its content>`` (written by the build); a request with the current hash is cached
  for a year (``immutable``), any other ``no-cache``. Every answer has an ETag (304 on
  ``If-None-Match``) and text assets are sent gzipped to clients that accept it.
* ``ui_middleware``, placed in front of the API's error and auth middlewares: the UI routes need
  no login (the login form is on the page), so they are answered here directly. For the API
  calls of the page (marked ``X-Requested-With: XMLHttpRequest``) a 401 loses its
  ``WWW-Authenticate`` header, so a wrong password shows the page's own message instead of the
  browser's login dialog; other clients still get the challenge.

The files are read once, when the application is built: a few hundred KiB in memory.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from aiohttp import hdrs, web

__all__ = ["add_routes", "ui_middleware", "STATIC_DIR", "Asset", "load_assets"]

log = logging.getLogger("warren.management")

STATIC_DIR = Path(__file__).with_name("static")
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".txt": "text/plain; charset=utf-8",
    ".json": "application/json",
    ".png": "image/png",
}
COMPRESSIBLE = (".html", ".js", ".css", ".svg", ".txt", ".json")
CACHE_FOREVER = "public, max-age=31536000, immutable"
CACHE_REVALIDATE = "no-cache"
# the page runs only its own script, talks only to this origin, and is never framed
PAGE_HEADERS = {
    "Content-Security-Policy": ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                                "img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; "
                                "form-action 'self'; base-uri 'none'"),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_UI_HANDLERS = web.AppKey("ui_handlers", frozenset) if hasattr(web, "AppKey") else "warren.ui_handlers"


@dataclass(frozen=True)
class Asset:
    body: bytes
    gzipped: bytes | None
    content_type: str
    version: str  # the first 12 hex digits of the content's SHA-256, as the build writes in the page

    @property
    def etag(self) -> str:
        return f'"{self.version}"'


def content_version(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()[:12]


def load_assets(folder: Path = STATIC_DIR) -> dict[str, Asset]:
    """Every file under ``folder`` by its relative path (``app.js``, ``licenses/preact.txt``)."""
    assets: dict[str, Asset] = {}
    if not folder.is_dir():
        return assets
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        body = path.read_bytes()
        suffix = path.suffix.lower()
        packed = gzip.compress(body, 9, mtime=0) if suffix in COMPRESSIBLE and len(body) > 512 else None
        if packed is not None and len(packed) >= len(body):
            packed = None
        assets[path.relative_to(folder).as_posix()] = Asset(
            body, packed, CONTENT_TYPES.get(suffix, "application/octet-stream"), content_version(body))
    return assets


def _accepts_gzip(request: web.Request) -> bool:
    return any(part.split(";")[0].strip() == "gzip"
               for part in request.headers.get(hdrs.ACCEPT_ENCODING, "").split(","))


def _serve(request: web.Request, asset: Asset, cache_control: str, extra: dict | None = None) -> web.Response:
    headers = {hdrs.CACHE_CONTROL: cache_control, hdrs.ETAG: asset.etag, hdrs.VARY: "Accept-Encoding",
               "X-Content-Type-Options": "nosniff"}
    headers.update(extra or {})
    tags = {t.strip() for t in request.headers.get(hdrs.IF_NONE_MATCH, "").split(",")}
    if asset.etag in tags or "*" in tags:
        return web.Response(status=304, headers=headers)
    body = asset.body
    if asset.gzipped is not None and _accepts_gzip(request):
        body = asset.gzipped
        headers[hdrs.CONTENT_ENCODING] = "gzip"
    # content_type as a header: aiohttp's content_type argument would drop the charset we set
    headers[hdrs.CONTENT_TYPE] = asset.content_type
    return web.Response(body=body, headers=headers)


class _Handlers:
    def __init__(self, assets: dict[str, Asset]) -> None:
        self.assets = assets

    async def page(self, request: web.Request) -> web.Response:
        asset = self.assets.get("index.html")
        if asset is None:
            return web.Response(status=503, text="the management UI is not built (run `npm run build` in ui/)\n",
                                headers={hdrs.CACHE_CONTROL: CACHE_REVALIDATE})
        return _serve(request, asset, CACHE_REVALIDATE, PAGE_HEADERS)

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["file"]
        asset = self.assets.get(name) if name != "index.html" else None
        if asset is None:  # only names read at start-up are served: nothing here reaches the disk
            return web.Response(status=404, text="not found\n", headers={hdrs.CACHE_CONTROL: CACHE_REVALIDATE})
        fresh = request.query.get("v") == asset.version
        return _serve(request, asset, CACHE_FOREVER if fresh else CACHE_REVALIDATE)


def _strip_challenge(request: web.Request, headers) -> None:
    if request.headers.get("X-Requested-With") == "XMLHttpRequest":
        headers.popall(hdrs.WWW_AUTHENTICATE, None)


@web.middleware
async def ui_middleware(request: web.Request, handler):
    route_handler = request.match_info.handler
    if route_handler in request.app[_UI_HANDLERS]:
        return await route_handler(request)  # no login for the page itself; see the module docstring
    try:
        response = await handler(request)
    except web.HTTPException as e:
        if e.status == 401:
            _strip_challenge(request, e.headers)
        raise
    if response.status == 401:
        _strip_challenge(request, response.headers)
    return response


def add_routes(app: web.Application, folder: Path = STATIC_DIR) -> None:
    """Serve the UI from ``folder`` at ``/`` and ``/static/``, and put ``ui_middleware`` first
    among the application's middlewares (call before the application starts)."""
    assets = load_assets(folder)
    if "index.html" not in assets:
        log.warning("management UI: no built page in %s; / answers 503", folder)
    handlers = _Handlers(assets)
    r = app.router
    r.add_get("/", handlers.page, name="ui-page")
    r.add_get("/index.html", handlers.page)
    r.add_get("/static/{file:.+}", handlers.static, name="ui-static")
    app[_UI_HANDLERS] = frozenset({handlers.page, handlers.static})
    app.middlewares.insert(0, ui_middleware)
