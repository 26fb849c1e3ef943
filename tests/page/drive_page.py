"""mtx serve's page (/) driven in headless Chromium as a person would use it, against a live `mtx serve`.

    drive_page.py --mtx BINARY --ckpt MODEL [--chromium chromium] [--screenshots DIR] [--only STEP,...]
                  [--page FILE]

The browser is Debian's chromium, spoken to over the DevTools protocol on a pipe (--remote-debugging-pipe), so
the driver needs Python's standard library and python-docx (the document step). The server runs with a small
--max-request-bytes, so that the limit is reachable by typing.

Steps (each reports PASS or FAIL; the driver goes on after a failure and exits 1 if any failed):
  paragraph   types a paragraph of three German sentences, word by word, into the box; reads back three
              translated sentences, the same text as the API's /translate of the paragraph; while typing, the
              page never has two /translate requests in flight (the browser's own network log says so)
  auto        switches the source to auto and sees "Detected: German"
  document    uploads a .docx made by python-docx in the file tab, downloads the translation through the page's
              link, and opens it with python-docx: every paragraph as the API translates it
  limit       pastes a text over the server's limit: the count turns red and the server's 413 message is shown
  extras      alternatives listed and chosen by a click; the swap button off for a direction the server does not
              serve the other way; every control labelled; no sideways scrolling at a phone's width (390 px); no
              Content-Security-Policy violation or script error in the console
With --screenshots DIR: desktop.png (1280 wide) and phone.png (390 wide, a phone's emulation) of the paragraph
translated from auto-detected German, and file.png of the file tab with its download.
"""
import argparse
import base64
import fcntl
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

PARAGRAPH = ("Ein Mann fährt mit dem Fahrrad die Straße entlang. Zwei Hunde spielen im Schnee. "
             "Eine Frau liest ein Buch im Park.")
LIMIT_BYTES = 3000
SHOTS = None  # --screenshots DIR


class Browser:
    """Headless Chromium with the DevTools protocol on fds 3 (its input) and 4 (its output), JSON + NUL."""

    def __init__(self, chromium, profile):
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def child():  # the pipe's ends as fds 3 and 4 (through fds above 10, whichever numbers they had)
            a = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD_CLOEXEC, 10)
            b = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--remote-debugging-pipe", "--user-data-dir=" + profile, "--hide-scrollbars", "about:blank"],
            preexec_fn=child, close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next = 0
        self._answers = {}
        self.events = []
        self._cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        self.session = None

    def _read(self):
        buf = b""
        while True:
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                with self._cv:
                    self._answers[None] = "chromium closed its pipe"
                    self._cv.notify_all()
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                with self._cv:
                    if "id" in msg:
                        self._answers[msg["id"]] = msg
                    else:
                        self.events.append(msg)
                    self._cv.notify_all()

    def call(self, method, session=True, timeout=60, **params):
        with self._cv:
            self._next += 1
            n = self._next
        msg = {"id": n, "method": method, "params": params}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        with self._cv:
            while n not in self._answers:
                if None in self._answers:
                    raise RuntimeError(self._answers[None])
                left = deadline - time.time()
                if left <= 0:
                    raise TimeoutError(method)
                self._cv.wait(left)
            answer = self._answers.pop(n)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer.get("result", {})

    def open(self, url, width, height, mobile=False):
        target = self.call("Target.createTarget", session=False, url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", session=False, targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(domain + ".enable")
        self.size(width, height, mobile)
        self.call("Page.navigate", url=url)

    def size(self, width, height, mobile=False):
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=mobile)

    def eval(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails'].get('exception', {}).get('description')}")
        return r["result"].get("value")

    def wait(self, expression, timeout=30, what=None):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.eval(expression):
                return
            time.sleep(0.05)
        raise AssertionError(f"waited {timeout} s for {what or expression}")

    def type(self, text, pause=0.0):
        for piece in re.findall(r"\S+\s*|\s+", text) if pause else [text]:
            self.call("Input.insertText", text=piece)
            time.sleep(pause)

    def key(self, key, ctrl=False):
        code = {"Enter": 13, "Tab": 9}[key]
        for kind in ("rawKeyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", type=kind, key=key, code=key, windowsVirtualKeyCode=code,
                      modifiers=2 if ctrl else 0)

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def event_list(self, method):
        with self._cv:
            return [e["params"] for e in self.events if e["method"] == method]

    def close(self):
        try:
            self.call("Browser.close", session=False, timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def translate(url, q):
    """The API's translation of q, asked as the page asks (/translate, format text, 3 alternatives)."""
    return post(url, "/translate", {"q": q, "source": "de", "target": "en", "format": "text",
                                    "alternatives": 3})["translatedText"]


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.load(r)


def max_in_flight(browser, path):
    """The most requests to `path` that the page had open at once, from the browser's own network log."""
    starts = {e["requestId"]: e["timestamp"] for e in browser.event_list("Network.requestWillBeSent")
              if e["request"]["url"].endswith(path) and e["request"]["method"] == "POST"}
    ends = {e["requestId"]: e["timestamp"] for m in ("Network.loadingFinished", "Network.loadingFailed")
            for e in browser.event_list(m) if e["requestId"] in starts}
    marks = sorted([(t, 1) for t in starts.values()] + [(t, -1) for i, t in ends.items()], key=lambda x: (x[0], x[1]))
    most = now = 0
    for _, d in marks:
        now += d
        most = max(most, now)
    return most, len(starts)


def select(browser, select_id, value):
    got = browser.eval(f"(() => {{ const s = document.getElementById('{select_id}'); s.value = {json.dumps(value)};"
                       f" s.dispatchEvent(new Event('change')); return s.value; }})()")
    assert got == value, f"#{select_id} has no option {value!r}"


def visible(browser, element_id):
    """Whether the element is laid out (not hidden by an attribute or a style)."""
    return browser.eval(f"(() => {{ const e = document.getElementById('{element_id}');"
                        f" return !!e && getComputedStyle(e).display !== 'none' && e.getClientRects().length > 0; }})()")


def clear_box(browser):
    """The source box emptied (as a user's select-all and delete) and focused, for typing."""
    browser.eval("(() => { const s = document.getElementById('src'); s.value = ''; s.dispatchEvent(new Event('input'));"
                 " s.focus(); })()")


def text_of(browser, element_id):
    return browser.eval(f"document.getElementById('{element_id}') ? document.getElementById('{element_id}')"
                        f".textContent : null")


def shoot(b, name, phone=False):
    """With --screenshots: the page as it stands, at a desktop's width or a phone's."""
    if not SHOTS:
        return
    if phone:
        b.size(390, 844, mobile=True)
        time.sleep(0.3)
    b.screenshot(os.path.join(SHOTS, name))
    if phone:
        b.size(1280, 800)


def step_paragraph(b, url, _):
    select(b, "source", "de")
    select(b, "target", "en")
    clear_box(b)
    # Typed word by word, with a pause longer than the page's wait (500 ms) after each sentence: a request per
    # pause at most, never two in flight.
    for sentence in re.split(r"(?<=\.) ", PARAGRAPH):
        b.type(sentence + " ", pause=0.12)
        time.sleep(0.7)
    expected = translate(url, PARAGRAPH + " ")
    b.wait(f"document.getElementById('out').textContent === {json.dumps(expected)}", what="the API's translation")
    alone = [translate(url, s) for s in re.split(r"(?<=\.) ", PARAGRAPH)]
    assert expected.strip() == " ".join(alone), f"the paragraph {expected!r} is not its sentences {alone!r}"
    sentences = re.findall(r"[^.!?]+[.!?]", text_of(b, "out"))
    assert len(sentences) == 3, f"{len(sentences)} sentences shown: {text_of(b, 'out')!r}"
    most, sent = max_in_flight(b, "/translate")
    words = len(PARAGRAPH.split())
    assert most <= 1, f"{most} /translate requests in flight at once"
    assert 3 <= sent < words, f"{sent} requests for {words} words typed in 3 bursts: not debounced"
    # Paragraphs stay paragraphs.
    b.type("\n\nZwei Kinder spielen. Ein Hund schläft.")
    both = PARAGRAPH + " \n\nZwei Kinder spielen. Ein Hund schläft."
    want = translate(url, both)
    assert "\n\n" in want, want
    b.wait(f"document.getElementById('out').textContent === {json.dumps(want)}", what="two paragraphs")
    # Ctrl+Enter translates at once. Pressed again, with more typed, while a long text is being translated: no
    # second request in flight; the newest text goes when the answer is in.
    long_text = " ".join([PARAGRAPH] * 20)
    clear_box(b)
    b.type(long_text)
    pressed_while_busy = 0
    for word in ("Er", "lacht.", "Sie", "lacht."):
        b.type(" " + word)
        pressed_while_busy += bool(b.eval("document.getElementById('out').classList.contains('busy')"))
        b.key("Enter", ctrl=True)
    final = long_text + " Er lacht. Sie lacht."
    want = translate(url, final)
    b.wait(f"document.getElementById('out').textContent === {json.dumps(want)}", what="the newest text's translation")
    most, _ = max_in_flight(b, "/translate")
    assert most <= 1, f"{most} /translate requests in flight at once"
    assert pressed_while_busy, "no Ctrl+Enter came while a translation was in flight: nothing was tested"
    clear_box(b)
    b.type(PARAGRAPH)
    expected = translate(url, PARAGRAPH)
    b.wait(f"document.getElementById('out').textContent === {json.dumps(expected)}", what="the paragraph again")
    return (f"{len(sentences)} sentences; {sent} requests for {words} words typed; two paragraphs; "
            f"{pressed_while_busy} Ctrl+Enter while busy; at most {most} in flight")


def step_auto(b, url, _):
    select(b, "source", "auto")
    b.wait("document.getElementById('detected') && "
           "document.getElementById('detected').textContent === 'Detected: German'", what="'Detected: German'")
    shoot(b, "desktop.png")
    shoot(b, "phone.png", phone=True)
    return text_of(b, "detected")


def step_document(b, url, work):
    import docx
    paragraphs = ["Ein kleines Mädchen klettert in ein Spielhaus.", "Zwei Männer stehen am Strand.",
                  "Ein Hund rennt durch das Gras."]
    d = docx.Document()
    for p in paragraphs:
        d.add_paragraph(p)
    source = os.path.join(work, "brief.docx")
    d.save(source)
    b.eval("document.getElementById('tab-file').click()")
    b.wait("!document.getElementById('file-panel').hidden", what="the file tab")
    select(b, "source", "de")
    root = b.call("DOM.getDocument")["root"]["nodeId"]
    node = b.call("DOM.querySelector", nodeId=root, selector="#file")["nodeId"]
    assert node, "no file input"
    b.call("DOM.setFileInputFiles", files=[source], nodeId=node)
    b.wait("!document.getElementById('translate-file').disabled", what="the translate button")
    assert not visible(b, "download"), "a download link before any file was translated"
    b.eval("document.getElementById('translate-file').click()")
    b.wait("!document.getElementById('download').hidden", what="the download link")
    assert visible(b, "download"), "the download link is not shown"
    downloads = os.path.join(work, "downloads")
    os.makedirs(downloads, exist_ok=True)
    b.call("Browser.setDownloadBehavior", session=False, behavior="allowAndName", downloadPath=downloads,
           eventsEnabled=True)
    b.eval("document.getElementById('download').click()")
    deadline = time.time() + 60
    done = None
    while time.time() < deadline and not done:
        done = [e for e in b.event_list("Browser.downloadProgress") if e["state"] == "completed"]
        time.sleep(0.1)
    assert done, "no download completed"
    begun = b.event_list("Browser.downloadWillBegin")
    name = begun[0]["suggestedFilename"] if begun else "?"
    got = docx.Document(os.path.join(downloads, done[0]["guid"]))
    texts = [p.text for p in got.paragraphs]
    want = [post(url, "/translate", {"q": p, "source": "de", "target": "en"})["translatedText"] for p in paragraphs]
    assert texts == want, f"the downloaded document says {texts!r}; the API translates {want!r}"
    assert name == "brief.docx", f"downloaded as {name!r}"
    shoot(b, "file.png")
    b.eval("document.getElementById('tab-text').click()")
    return f"{name}: {len(texts)} paragraphs translated, opened by python-docx"


def step_limit(b, url, _):
    b.eval("document.getElementById('tab-text').click()")
    select(b, "source", "de")
    clear_box(b)
    long_text = " ".join([PARAGRAPH] * (LIMIT_BYTES // len(PARAGRAPH) + 2))
    b.type(long_text)
    b.wait("document.getElementById('count') && document.getElementById('count').classList.contains('over')",
           what="the count marked over the limit")
    b.wait("document.getElementById('err').textContent.includes('bytes')", what="the server's 413 message")
    message = text_of(b, "err")
    try:
        translate(url, long_text)
        raise AssertionError("the server took the long text")
    except urllib.error.HTTPError as e:
        assert e.code == 413, e.code
        server = json.load(e)["error"]
    assert message == server, f"shown {message!r}, the server says {server!r}"
    clear_box(b)
    return f"count {text_of(b, 'count')!r} after clearing; shown: {message}"


def step_extras(b, url, _):
    select(b, "source", "de")
    clear_box(b)
    b.type("Ein Hund rennt durch das Gras.")
    b.wait("document.querySelectorAll('#alternatives button').length > 0", what="alternatives")
    first = b.eval("document.querySelector('#alternatives button').textContent")
    shown = text_of(b, "out")
    b.eval("document.querySelector('#alternatives button').click()")
    assert text_of(b, "out") == first, "a click on an alternative does not show it"
    assert b.eval("document.querySelector('#alternatives button').textContent") == shown
    assert b.eval("document.getElementById('swap').disabled"), "swap offered for a direction served one way"
    # Every control has a name a screen reader reads (a label, aria-label or its text), and the page fits a
    # phone's width without sideways scrolling.
    unnamed = b.eval("""[...document.querySelectorAll('select, textarea, input, button')].filter((e) =>
        !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.getAttribute('aria-labelledby') &&
        !(e.tagName === 'BUTTON' && e.textContent.trim())).map((e) => e.id || e.outerHTML)""")
    assert not unnamed, f"controls without a label: {unnamed}"
    b.size(390, 844, mobile=True)
    time.sleep(0.3)
    width = b.eval("document.documentElement.scrollWidth")
    b.size(1280, 800)
    assert width <= 390, f"the page is {width} px wide at a phone's 390"
    # The browser logs each 4xx answer as an error of source "network" (the limit step's 413 is one): those are
    # the steps' business. Any other error (a script's, a CSP violation's) is the page's fault.
    bad = [e for e in b.event_list("Log.entryAdded") if e["entry"]["level"] == "error"
           and e["entry"].get("source") != "network"]
    bad += b.event_list("Runtime.exceptionThrown")
    assert not bad, f"console errors: {bad}"
    return "alternatives chosen by a click; swap off; every control labelled; fits 390 px; no console error"


STEPS = {"paragraph": step_paragraph, "auto": step_auto, "document": step_document, "limit": step_limit,
         "extras": step_extras}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mtx", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--chromium", default="chromium")
    ap.add_argument("--screenshots")
    ap.add_argument("--only", default=",".join(STEPS))
    ap.add_argument("--page", help="serve this page instead of mtx's own (mtx serve --page): a mutant, to see a "
                                   "step fail")
    args = ap.parse_args()
    if not shutil.which(args.chromium):
        sys.exit(f"drive_page: no {args.chromium} (apt-get install chromium)")
    work = tempfile.mkdtemp(prefix="mtx-page-")
    server = subprocess.Popen([args.mtx, "serve", "--ckpt", args.ckpt, "--port", "0", "--host", "127.0.0.1",
                               "--max-request-bytes", str(LIMIT_BYTES)] + (["--page", args.page] if args.page else []),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    browser = None
    failed = []
    try:
        lines = queue.Queue()  # the server's log, read on a thread (and drained to the end)
        threading.Thread(target=lambda: [lines.put(line) for line in server.stdout] + [lines.put(None)],
                         daemon=True).start()
        url = None
        deadline = time.time() + 180
        while url is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                sys.exit("drive_page: mtx serve printed no address in 180 s")
            if line is None:
                sys.exit("drive_page: mtx serve exited")
            m = re.search(r"serving on (http://\S+)", line)
            url = m.group(1).rstrip("/") if m else None
        browser = Browser(args.chromium, os.path.join(work, "profile"))
        browser.call("Browser.getVersion", session=False)
        browser.open(url + "/", 1280, 800)
        try:  # the page has read /frontend/settings and /languages
            browser.wait("document.body && document.body.dataset.ready === 'yes'", 30, "the page to read the server")
        except AssertionError as e:
            failed.append("ready")
            print(f"FAIL ready: {e}", flush=True)
        if args.screenshots:
            os.makedirs(args.screenshots, exist_ok=True)
            global SHOTS
            SHOTS = args.screenshots
        for name in args.only.split(","):
            try:
                print(f"PASS {name}: {STEPS[name](browser, url, work)}", flush=True)
            except Exception as e:  # noqa: BLE001: every step's failure is reported, then the next step runs
                failed.append(name)
                print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
    finally:
        if browser:
            browser.close()
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)
    steps = len(args.only.split(",")) + ("ready" in failed)
    print(f"drive_page: {steps - len(failed)} passed, {len(failed)} failed", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
