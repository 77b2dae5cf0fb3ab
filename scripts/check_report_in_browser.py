#!/usr/bin/env python3
"""Opens neardup's HTML reports in headless Chromium and checks them as a reader sees them.

  python3 scripts/check_report_in_browser.py --neardup target/debug/neardup --workdir DIR
  python3 scripts/check_report_in_browser.py [--screenshot OUT.png] PAGE.html:KIND ...

The first form makes the pages CI checks, in DIR, with the given binary: the bundled
example (examples/kjv.jsonl) at the default threshold, where nothing is removed, and at
0.5; the planted-copy fixture of the CLI tests; the peers' planted-copy set when
~/.cache/neardup-peers/data/dedup.jsonl exists; a corpus of texts full of markup written
here; and `eval --truth` on the fixture. The second checks pages made elsewhere.

KIND says what the page must show:
  dedup        a dedup report with clusters: both histograms drawn (bars of non-zero
               size), the summary tables, at least one kept/removed pair with marks
  dedup-empty  a dedup report of a run that removed nothing: the tables, no plots
  eval         an eval report: line charts drawn, the results table
  hostile      a dedup report of texts full of markup: as `dedup`, and the markup shown as
               text (the page's text holds "<script>", the DOM no corpus element)

Every page must load without a console message, an exception or a refused load (the
page's Content Security Policy would report a script or a network load), hold no
<script>, and lay its plots out at a visible size. The browser is driven over the
DevTools protocol on a pipe (--remote-debugging-pipe), with the standard library only.
With --screenshot, the first page is captured as a PNG (1280 pixels wide; from the element
--screenshot-top names, --screenshot-height pixels down).

Exit status 0 when every page passes; 1 with the failures listed otherwise.
"""
import argparse
import base64
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
]
TIMEOUT = 60.0


class Browser:
    """Chromium on a DevTools pipe: requests out on fd 3, replies and events in on fd 4."""

    def __init__(self, chromium, profile):
        to_child_r, self.to_child = os.pipe()
        self.from_child, from_child_w = os.pipe()
        # The child reads requests on fd 3 and writes messages on fd 4: dup2 makes those
        # two inheritable; every other descriptor of ours is closed on exec (PEP 446).
        # (Copies first: dup2 onto the same number would keep close-on-exec.)
        def fds():
            r, w = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(r, 3)
            os.dup2(w, 4)
        self.proc = subprocess.Popen(
            [chromium, *FLAGS, f"--user-data-dir={profile}", "--window-size=1280,900", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=fds,
            close_fds=False,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from Chromium")
            ready, _, _ = select.select([self.from_child], [], [], 0.5)
            if ready:
                chunk = os.read(self.from_child, 1 << 20)
                if not chunk:
                    raise RuntimeError("Chromium closed the DevTools pipe")
                self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, session=None):
        self.next_id += 1
        request = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            request["sessionId"] = session
        os.write(self.to_child, json.dumps(request).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_for(self, method, session, deadline):
        while True:
            for i, m in enumerate(self.events):
                if m.get("method") == method and m.get("sessionId") == session:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    def close(self):
        try:
            self.send("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# What the page looks like to a reader, measured in the page (DevTools evaluation is not
# bound by the page's script ban).
PROBE = r"""
(() => {
  const q = (s) => Array.from(document.querySelectorAll(s));
  const size = (e) => { const r = e.getBoundingClientRect(); return [r.width, r.height]; };
  return JSON.stringify({
    scripts: q('script').length,
    foreign: q('img, iframe, object, embed, link, b').length,
    handlers: q('*').filter(e => Array.from(e.attributes).some(a => a.name.startsWith('on'))).length,
    svgs: q('svg').map(size),
    bars: q('svg rect.bar').filter(r => r.getBBox().height > 0).length,
    lines: q('svg polyline').length,
    markers: q('svg line.marker').length,
    tables: q('table').map(t => t.id || t.className),
    pairs: q('.pair').length,
    marks: q('.pair del, .pair ins').length,
    noClusters: q('#no-clusters').length,
    text: document.body.innerText,
    height: document.documentElement.scrollHeight,
  });
})()
"""


def check(browser, path, kind, screenshot):
    failures = []
    target = browser.send("Target.createTarget", {"url": "about:blank"})
    session = browser.send(
        "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
    )["sessionId"]
    for domain in ["Page", "Runtime", "Log"]:
        browser.send(f"{domain}.enable", session=session)
    browser.send("Page.navigate", {"url": "file://" + os.path.abspath(path)}, session=session)
    browser.wait_for("Page.loadEventFired", session, time.monotonic() + TIMEOUT)
    # Late messages (a refused load reports after the load event) get a moment to arrive.
    browser.send("Runtime.evaluate", {"expression": "1"}, session=session)
    time.sleep(0.3)
    browser.send("Runtime.evaluate", {"expression": "1"}, session=session)
    for m in [e for e in browser.events if e.get("sessionId") == session]:
        method, params = m.get("method"), m.get("params", {})
        if method == "Log.entryAdded":
            entry = params.get("entry", {})
            failures.append(f"console {entry.get('level')}: {entry.get('text')}")
        elif method == "Runtime.consoleAPICalled":
            failures.append(f"console.{params.get('type')} called")
        elif method == "Runtime.exceptionThrown":
            failures.append(f"exception: {params.get('exceptionDetails', {}).get('text')}")
    result = browser.send(
        "Runtime.evaluate", {"expression": PROBE, "returnByValue": True}, session=session
    )
    page = json.loads(result["result"]["value"])
    if page["scripts"]:
        failures.append(f"{page['scripts']} <script> elements")
    if page["foreign"] or page["handlers"]:
        failures.append(f"elements from the corpus: {page['foreign']} tags, {page['handlers']} handlers")
    visible = [s for s in page["svgs"] if s[0] > 200 and s[1] > 80]
    if len(visible) != len(page["svgs"]):
        failures.append(f"plots too small to see: {page['svgs']}")
    if kind in ("dedup", "hostile", "dedup-empty"):
        missing = {"counts", "phases", "settings"} - set(page["tables"])
        if missing:
            failures.append(f"summary tables missing: {sorted(missing)}")
    if kind in ("dedup", "hostile"):
        if len(visible) < 2 or page["bars"] < 2:
            failures.append(f"histograms missing: {len(visible)} plots, {page['bars']} bars")
        if page["markers"] < 1:
            failures.append("the threshold is not marked")
        if page["pairs"] < 1 or page["marks"] < 1:
            failures.append(f"no kept/removed pair with marked words ({page['pairs']} pairs)")
    if kind == "dedup-empty":
        if page["svgs"] or not page["noClusters"]:
            failures.append("a run that removed nothing should say so, without plots")
    if kind == "eval":
        if len(visible) < 1 or page["lines"] < 2:
            failures.append(f"line charts missing: {len(visible)} plots, {page['lines']} lines")
        if "results" not in page["tables"]:
            failures.append(f"results table missing: {page['tables']}")
    if kind == "hostile":
        for needle in ["<script>alert(1)</script>", "onerror=alert(2)"]:
            if needle not in page["text"]:
                failures.append(f"{needle!r} is not shown as text")
    if screenshot:
        path, top, height = screenshot
        y = 0
        if top:
            found = browser.send("Runtime.evaluate", {"returnByValue": True, "expression":
                f"(() => {{ const e = document.querySelector({json.dumps(top)});"
                " return e ? e.getBoundingClientRect().top + window.scrollY - 12 : 0; })()"},
                session=session)
            y = max(0, found["result"]["value"])
        height = min(height or 6000, page["height"] - y)
        shot = browser.send(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True,
             "clip": {"x": 0, "y": y, "width": 1280, "height": height, "scale": 1}},
            session=session,
        )
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))
    browser.send("Target.closeTarget", {"targetId": target["targetId"]})
    return failures, page


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "crates", "neardup-cli", "tests", "fixtures")
PEERS = os.path.expanduser("~/.cache/neardup-peers/data/dedup.jsonl")


def hostile_corpus(path):
    """Documents whose texts and ids are markup, near-duplicates of each other."""
    body = " ".join(f"word{i}" for i in range(80))
    docs = [
        ("<b>kept</b>/1", f"<script>alert(1)</script> {body}"),
        ('"><script>alert(3)</script>/2', f'"><img src=x onerror=alert(2)> {body}'),
        ("evil/3", f"{body} </div></div><iframe src=\"https://example.org\"></iframe>"),
        ("evil/4", f"{body} <style>body{{display:none}}</style> {{{{ 7*7 }}}}"),
    ]
    with open(path, "w") as f:
        for i, t in docs:
            f.write(json.dumps({"id": i, "text": t}) + "\n")


def make_pages(neardup, workdir):
    """Runs neardup to make the pages CI checks; returns them as PAGE:KIND."""
    os.makedirs(workdir, exist_ok=True)
    kjv = os.path.join(ROOT, "examples", "kjv.jsonl")
    planted = os.path.join(FIXTURES, "planted.jsonl")
    hostile = os.path.join(workdir, "hostile.jsonl")
    hostile_corpus(hostile)
    runs = [
        ("kjv.html", "dedup-empty", ["dedup", kjv]),
        ("kjv-0.5.html", "dedup", ["dedup", kjv, "--threshold", "0.5"]),
        ("planted.html", "dedup", ["dedup", planted]),
        ("hostile.html", "hostile", ["dedup", hostile, "--threshold", "0.5"]),
        ("eval.html", "eval", ["eval", planted, "--truth", os.path.join(FIXTURES, "planted_truth.jsonl"),
                               "-o", os.devnull]),
    ]
    if os.path.exists(PEERS):
        runs.insert(3, ("peers.html", "dedup", ["dedup", PEERS]))
    else:
        print(f"skipped: the peers' planted-copy set ({PEERS} is not here)")
    pages = []
    for name, kind, args in runs:
        page = os.path.join(workdir, name)
        subprocess.run([neardup, *args, "--report", page], check=True,
                       stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL, timeout=600)
        pages.append(f"{page}:{kind}")
    return pages


def spoiled(page, workdir):
    """Copies of `page` that a working check must fail, as PAGE:KIND, with what it must say."""
    with open(page) as f:
        html = f.read()
    no_csp = html.replace('http-equiv="Content-Security-Policy"', 'name="no-policy"')
    cases = [
        ("script", html.replace("</body>", "<script>console.log(1)</script></body>"),
         "Content Security Policy"),
        ("network", html.replace("</body>", '<img src="https://example.org/x.png"></body>'),
         "Content Security Policy"),
        ("error", no_csp.replace("</body>", "<script>console.error('x'); nothing();</script></body>"),
         "exception"),
        ("tiny", html.replace("<svg ", '<svg style="width:9px" '), "too small"),
    ]
    out = []
    for name, text, expected in cases:
        path = os.path.join(workdir, f"spoiled-{name}.html")
        with open(path, "w") as f:
            f.write(text)
        out.append((f"{path}:dedup", expected))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="*", metavar="PAGE.html:KIND")
    ap.add_argument("--neardup", help="make the standard pages with this binary first")
    ap.add_argument("--workdir", default="target/report-check", help="where --neardup puts them")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--screenshot", help="write a PNG of the first page here")
    ap.add_argument("--screenshot-top", metavar="SELECTOR", help="from this element down")
    ap.add_argument("--screenshot-height", type=int, help="this many pixels (default: all)")
    ap.add_argument("--self-test", action="store_true",
                    help="first check that spoiled copies of the first page fail")
    args = ap.parse_args()
    if args.neardup:
        args.pages = make_pages(args.neardup, args.workdir) + args.pages
    if not args.pages:
        ap.error("no pages: give PAGE.html:KIND or --neardup")
    failed = spoiled_missed = 0
    with tempfile.TemporaryDirectory(prefix="neardup-chromium-") as profile:
        browser = Browser(args.chromium, profile)
        try:
            version = browser.send("Browser.getVersion")
            print(f"browser: {version.get('product')}")
            if args.self_test:
                base = next((p.rpartition(":")[0] for p in args.pages if p.endswith(":dedup")), None)
                if base is None:
                    ap.error("--self-test needs a page of kind dedup")
                workdir = os.path.dirname(os.path.abspath(base))
                for spec, expected in spoiled(base, workdir):
                    path, _, kind = spec.rpartition(":")
                    failures, _ = check(browser, path, kind, None)
                    caught = any(expected in f for f in failures)
                    print(f"{'ok' if caught else 'FAILED':6} self-test {os.path.basename(path)}: "
                          f"{'caught' if caught else 'not caught'} ({expected})")
                    spoiled_missed += not caught
            for i, spec in enumerate(args.pages):
                path, _, kind = spec.rpartition(":")
                shot = None
                if i == 0 and args.screenshot:
                    shot = (args.screenshot, args.screenshot_top, args.screenshot_height)
                failures, page = check(browser, path, kind, shot)
                status = "ok" if not failures else "FAILED"
                print(f"{status:6} {path} ({kind}): {len(page['svgs'])} plots, "
                      f"{page['bars']} bars, {page['lines']} lines, {page['pairs']} pairs, "
                      f"tables {page['tables']}")
                for f in failures:
                    print(f"       {f}")
                failed += bool(failures)
        finally:
            browser.close()
    if spoiled_missed:
        print(f"the check missed {spoiled_missed} spoiled pages: it cannot be trusted")
    print(f"{len(args.pages) - failed} passed, {failed + spoiled_missed} failed")
    sys.exit(1 if failed or spoiled_missed else 0)


if __name__ == "__main__":
    main()
