"""The web UI's files as the broker serves them (warren/management/ui), over real HTTP: no login
for the page, content types, cache headers by asset version, ETag/304, gzip, no path reaching
the disk, the login challenge left out for the page's own API calls; and the committed build
against the sources (when ui/node_modules is there)."""

from __future__ import annotations

import fcntl
import gzip
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import EXTERNAL_URL
from warren.management.ui import STATIC_DIR, content_version

pytestmark = pytest.mark.skipif(bool(EXTERNAL_URL), reason="needs a private Warren broker")

REPO = Path(__file__).resolve().parents[2]


def fetch(url: str, headers: dict | None = None):
    """(status, headers, body) without following anything and without raising on 4xx/5xx."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


@pytest.fixture
def http(broker):
    """The session's broker: these tests only read."""
    if broker.http_port is None:
        pytest.skip("needs a Warren broker with its HTTP port")
    return broker.http_url


def asset_urls(page: str) -> list[str]:
    return re.findall(r'(?:src|href)="(static/[^"]+)"', page)


def test_page_needs_no_login_and_names_versioned_assets(http):
    status, headers, body = fetch(http + "/")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["Cache-Control"] == "no-cache"
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY" and headers["X-Content-Type-Options"] == "nosniff"
    page = body.decode()
    urls = asset_urls(page)
    assert {u.split("?")[0] for u in urls} == {"static/app.js", "static/app.css", "static/favicon.svg"}
    # nothing from elsewhere: every script and style is the package's own
    assert "http://" not in page.replace('href="api/overview"', "") and "https://" not in page
    assert fetch(http + "/index.html")[2] == body


@pytest.mark.parametrize("name, content_type", [("app.js", "text/javascript; charset=utf-8"),
                                                ("app.css", "text/css; charset=utf-8"),
                                                ("favicon.svg", "image/svg+xml"),
                                                ("licenses/uplot.txt", "text/plain; charset=utf-8")])
def test_assets_content_type_and_caching(http, name, content_type):
    on_disk = (STATIC_DIR / name).read_bytes()
    version = content_version(on_disk)
    status, headers, body = fetch(f"{http}/static/{name}?v={version}")
    assert status == 200 and body == on_disk and headers["Content-Type"] == content_type
    assert headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert headers["ETag"] == f'"{version}"'
    # another version (an old page asking after an upgrade) or none: revalidate every time
    assert fetch(f"{http}/static/{name}?v=000000000000")[1]["Cache-Control"] == "no-cache"
    assert fetch(f"{http}/static/{name}")[1]["Cache-Control"] == "no-cache"
    status, headers, body = fetch(f"{http}/static/{name}", {"If-None-Match": f'"{version}"'})
    assert status == 304 and body == b""


def test_page_versions_match_the_files(http):
    page = fetch(http + "/")[2].decode()
    for url in asset_urls(page):
        path, _, version = url.partition("?v=")
        assert version == content_version((STATIC_DIR / path.removeprefix("static/")).read_bytes()), url
        assert fetch(f"{http}/{url}")[1]["Cache-Control"].endswith("immutable")


def test_gzip_only_when_accepted(http):
    plain = (STATIC_DIR / "app.js").read_bytes()
    status, headers, body = fetch(http + "/static/app.js", {"Accept-Encoding": "gzip, deflate"})
    assert status == 200 and headers["Content-Encoding"] == "gzip" and headers["Vary"] == "Accept-Encoding"
    assert gzip.decompress(body) == plain and len(body) < len(plain) / 2
    status, headers, body = fetch(http + "/static/app.js", {"Accept-Encoding": "identity"})
    assert "Content-Encoding" not in headers and body == plain


@pytest.mark.parametrize("path", ["/static/nope.js", "/static/../__init__.py", "/static/%2e%2e/__init__.py",
                                  "/static/licenses/../../__init__.py", "/static/index.html"])
def test_unknown_or_escaping_paths_are_404(http, path):
    status, _, body = fetch(http + path)
    assert status == 404 and b"import" not in body


def test_login_challenge_only_for_non_page_clients(http):
    # a browser shows its own login dialog for a 401 with WWW-Authenticate; the page marks its calls
    status, headers, body = fetch(http + "/api/whoami", {"X-Requested-With": "XMLHttpRequest",
                                                         "Authorization": "Basic Z3Vlc3Q6d3Jvbmc="})
    assert status == 401 and "WWW-Authenticate" not in headers and b"Login failed" in body
    status, headers, _ = fetch(http + "/api/whoami", {"Authorization": "Basic Z3Vlc3Q6d3Jvbmc="})
    assert status == 401 and headers["WWW-Authenticate"] == 'Basic realm="RabbitMQ Management"'
    status, _, body = fetch(http + "/api/whoami", {"X-Requested-With": "XMLHttpRequest",
                                                   "Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q="})
    assert status == 200 and b'"administrator"' in body


def test_licences_of_bundled_libraries_are_served(http):
    status, _, body = fetch(http + "/static/licenses/README.txt")
    assert status == 200
    for lib in ("preact", "htm", "uplot"):
        assert lib in body.decode()
        text = fetch(f"{http}/static/licenses/{lib}.txt")[2].decode()
        licence = {"preact": "MIT", "htm": "Apache-2.0", "uplot": "MIT"}[lib]
        assert text.startswith(f"{lib} ") and f"({licence})" in text.splitlines()[0] and len(text) > 800


def test_package_data_lists_the_static_files():
    """A non-editable install carries the UI: pyproject's package-data covers every built file."""
    text = (REPO / "pyproject.toml").read_text()
    assert '"warren.management.ui" = ["static/*", "static/licenses/*"]' in text
    nested = {p.parent.relative_to(STATIC_DIR).as_posix() for p in STATIC_DIR.rglob("*") if p.is_file()}
    assert nested <= {".", "licenses"}, f"folders not in package-data: {nested}"


def _ui_node_modules() -> None:
    """ui/node_modules from ui/package-lock.json (`npm ci`, once: it is git-ignored), as the
    amqplib tests install theirs; skip where node, npm or the registry is missing."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("needs node and npm on PATH (the UI build check rebuilds ui/ with esbuild)")
    ui = REPO / "ui"
    with open(ui / ".install-lock", "w") as lock:  # another test session may share this tree
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (ui / "node_modules" / ".bin" / "esbuild").exists():
            return
        try:
            r = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=ui,
                               capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pytest.skip("`npm ci` in ui/ did not finish in 180 s (npm registry reachable?)")
        if r.returncode != 0:
            pytest.skip(f"`npm ci` in ui/ failed (npm registry reachable?): {r.stderr.strip()[-500:]}")


def test_committed_build_matches_the_sources(tmp_path):
    """The files under warren/management/ui/static are what `npm run build` makes of ui/ now."""
    _ui_node_modules()
    node = shutil.which("node")
    out = tmp_path / "static"
    subprocess.run([node, str(REPO / "ui" / "build.mjs"), "--outdir", str(out)], check=True, timeout=120,
                   capture_output=True, cwd=REPO / "ui")
    fresh = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    committed = {p.relative_to(STATIC_DIR).as_posix(): p.read_bytes() for p in STATIC_DIR.rglob("*") if p.is_file()}
    assert sorted(fresh) == sorted(committed)
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert not stale, f"rebuild the UI (cd ui && npm run build): {stale} differ from the sources"
