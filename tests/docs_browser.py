"""The docs site in a real browser: headless Chromium driven over its DevTools pipe (no extra
package), used by tests/test_docs_site.py and ``make docs``:

    python tests/docs_browser.py SITE_DIR OUT_DIR     # screenshots of the home, a porting and the API page

A page is served from SITE_DIR on 127.0.0.1 (nothing else is reached), loaded, and shot as PNG;
the search box is typed into and its results read back, so search is checked as a reader uses it."""
from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional

PAGES = {"home": "", "porting": "porting-project/", "api": "api-nn/#dualdl.nn.layers.Conv2d"}


def chromium() -> Optional[str]:
    """The Chromium binary, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium and one tab, spoken to over ``--remote-debugging-pipe``."""

    def __init__(self, binary: str, width: int = 1280, height: int = 900):
        r_in, self._w = os.pipe()       # we write commands, Chromium reads them on fd 3
        self._r, w_out = os.pipe()      # Chromium answers on fd 4

        def fds():        # in the child, before the fds other than pass_fds are closed
            os.dup2(r_in, 3)
            os.dup2(w_out, 4)
        self.profile = tempfile.mkdtemp(prefix="docs-chromium-")
        self.proc = subprocess.Popen([binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                      "--remote-debugging-pipe", "--user-data-dir=" + self.profile, "about:blank"],
                                     preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(r_in)
        os.close(w_out)
        self._buf, self._id = b"", 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _read(self) -> Dict[str, Any]:
        while b"\0" not in self._buf:
            chunk = os.read(self._r, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, session: bool = False, **params) -> Dict[str, Any]:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        while True:
            m = self._read()
            if m.get("id") == self._id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})

    def js(self, expression: str) -> Any:
        r = self.call("Runtime.evaluate", session=True, expression=expression, awaitPromise=True,
                      returnByValue=True)
        return r.get("result", {}).get("value")

    def open(self, url: str, timeout: float = 30) -> None:
        self.call("Page.navigate", session=True, url=url)
        t0 = time.time()
        while self.js("document.readyState") != "complete":
            if time.time() - t0 > timeout:
                raise TimeoutError(url)
            time.sleep(0.1)

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        t0 = time.time()
        while True:
            value = self.js(expression)
            if value or time.time() - t0 > timeout:
                return value
            time.sleep(0.2)

    def screenshot(self, path: str) -> int:
        data = base64.b64decode(self.call("Page.captureScreenshot", session=True, format="png")["data"])
        with open(path, "wb") as f:
            f.write(data)
        return len(data)

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)


def serve(site: str):
    """An HTTP server for ``site`` on a free 127.0.0.1 port (thread); returns (server, base URL)."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass
    handler = functools.partial(Quiet, directory=site)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


# what a rendered page shows: highlighted code (pygments spans), the search index answering a query
_HIGHLIGHTED = "document.querySelectorAll('.highlight span.k, .highlight span.kn, .highlight span.nb').length"
_SEARCH = """(async () => {
  const input = document.querySelector('input.md-search__input');
  input.focus(); input.value = %s; input.dispatchEvent(new Event('input', {bubbles: true}));
  input.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true}));
})()"""
_RESULTS = "document.querySelectorAll('.md-search-result__item').length"


def check(site: str, out: str, binary: Optional[str] = None, query: str = "translate") -> Dict[str, Any]:
    """Screenshots of PAGES into ``out`` and what each page showed; a search for ``query`` on the home page."""
    os.makedirs(out, exist_ok=True)
    server, base = serve(site)
    browser = Browser(binary or chromium())
    found: Dict[str, Any] = {}
    try:
        for name, path in PAGES.items():
            browser.open(base + path)
            found[name] = {"title": browser.js("document.title"), "highlighted": browser.js(_HIGHLIGHTED),
                           "bytes": browser.screenshot(os.path.join(out, f"{name}.png"))}
        browser.open(base)
        browser.js(_SEARCH % json.dumps(query))
        found["search"] = {"query": query, "results": browser.wait_for(_RESULTS),
                           "bytes": 0}
        found["search"]["bytes"] = browser.screenshot(os.path.join(out, "search.png"))
    finally:
        browser.close()
        server.shutdown()
    return found


def main(argv: List[str]) -> int:
    if len(argv) != 2:
        print("usage: python tests/docs_browser.py SITE_DIR OUT_DIR", file=sys.stderr)
        return 2
    if chromium() is None:
        print("docs screenshots skipped: no chromium on PATH (apt-get install chromium)")
        return 0
    found = check(argv[0], argv[1])
    for name, info in found.items():
        print(f"{name}: {info}")
    return 0 if found["search"]["results"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
