#!/usr/bin/env python3
"""Signs in to the preview page in headless Chromium as a person would, and reports what the browser saw (JSON).

    python3 scripts/preview-browser.py CHROMIUM BASE_URL DEVICE_ID API_KEY

Drives Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe: no port, no extra package):
opens BASE_URL/preview?device_id=DEVICE_ID, records whether the sign-in form is shown, types the key into it and
presses the button, waits for the page it lands on, and reports that page's notification body, what a script on
the page could read of the cookies (document.cookie), the cookie the browser keeps (with its HttpOnly and
SameSite attributes), the URLs it visited, and every console or log entry (a Content-Security-Policy violation is
one). The key is typed into the form, never put in a URL. Used by Tests/EnrichmentServiceTests/PreviewTests.swift.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

chromium, base, device, key = sys.argv[1:5]

profile = tempfile.mkdtemp(prefix="preview-browser-")
to_browser_read, to_browser_write = os.pipe()
from_browser_read, from_browser_write = os.pipe()


def setup_fds():
    # Chromium reads commands on fd 3 and writes answers on fd 4.
    os.dup2(to_browser_read, 3)
    os.dup2(from_browser_write, 4)


browser = subprocess.Popen(
    [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
     "--user-data-dir=" + profile, "--no-first-run", "about:blank"],
    # 3 and 4 are kept too: the child's fds are closed after setup_fds runs, all but these.
    pass_fds=(to_browser_read, from_browser_write, 3, 4), preexec_fn=setup_fds,
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
os.close(to_browser_read)
os.close(from_browser_write)
writer = os.fdopen(to_browser_write, "wb", buffering=0)
reader = os.fdopen(from_browser_read, "rb", buffering=0)

next_id = 0
pending = b""
events = []
deadline = time.time() + 60


def read_message():
    global pending
    while b"\0" not in pending:
        if time.time() > deadline:
            raise TimeoutError("no answer from Chromium")
        chunk = reader.read(65536)
        if not chunk:
            raise EOFError("Chromium closed the pipe")
        pending += chunk
    message, pending = pending.split(b"\0", 1)
    return json.loads(message)


def send(method, params=None, session=None):
    global next_id
    next_id += 1
    message = {"id": next_id, "method": method, "params": params or {}}
    if session:
        message["sessionId"] = session
    writer.write(json.dumps(message).encode() + b"\0")
    while True:
        answer = read_message()
        if answer.get("id") == next_id:
            if "error" in answer:
                raise RuntimeError(f"{method}: {answer['error']}")
            return answer.get("result", {})
        events.append(answer)


def wait_for(method, session, after):
    """The first event `method` of `session` received after index `after` of the event list."""
    while True:
        for event in events[after:]:
            if event.get("method") == method and event.get("sessionId") == session:
                return event
        events.append(read_message())


def evaluate(expression, session):
    result = send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
    return result.get("result", {}).get("value")


report = {}
try:
    target = send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        send(domain + ".enable", {}, session)
    visited = []
    mark = len(events)
    url = f"{base}/preview?device_id={device}"
    send("Page.navigate", {"url": url}, session)
    wait_for("Page.loadEventFired", session, mark)
    visited.append(evaluate("location.href", session))
    report["sign_in_form"] = evaluate("document.querySelector('form#sign-in') !== null", session)
    report["first_title"] = evaluate("document.title", session)
    # Type the key and press the button, as a person would.
    mark = len(events)
    evaluate("document.querySelector('input[name=key]').value = %s;"
             "document.querySelector('form#sign-in button').click(); true" % json.dumps(key), session)
    wait_for("Page.loadEventFired", session, mark)
    visited.append(evaluate("location.href", session))
    # The form lands on /preview; open the device's preview as a bookmark would.
    mark = len(events)
    send("Page.navigate", {"url": url}, session)
    wait_for("Page.loadEventFired", session, mark)
    visited.append(evaluate("location.href", session))
    report["visited"] = visited
    report["title"] = evaluate("document.title", session)
    report["body"] = evaluate("(document.getElementById('body') || {}).textContent || null", session)
    report["has_map"] = evaluate("document.getElementById('map') !== null", session)
    report["document_cookie"] = evaluate("document.cookie", session)
    cookies = send("Network.getCookies", {"urls": [base + "/preview"]}, session)["cookies"]
    report["cookies"] = [{"name": c["name"], "httpOnly": c.get("httpOnly"), "sameSite": c.get("sameSite"),
                          "path": c.get("path"), "value_contains_key": key in c.get("value", "")}
                         for c in cookies]
    # Every console or log entry but verbose advice and the sign-in page's own 401 (the form is served with that
    # status, which Chromium logs as a failed load).
    def expected(entry):
        if entry.get("level") == "verbose":
            return True
        return entry.get("source") == "network" and "status of 401" in entry.get("text", "")
    report["console"] = [e["params"] for e in events
                         if e.get("method") in ("Runtime.consoleAPICalled", "Runtime.exceptionThrown")
                         or (e.get("method") == "Log.entryAdded" and not expected(e["params"]["entry"]))]
finally:
    try:
        send("Browser.close")
    except Exception:
        pass
    try:
        browser.wait(timeout=10)
    except subprocess.TimeoutExpired:
        browser.kill()
    subprocess.run(["rm", "-rf", profile])
print(json.dumps(report))
