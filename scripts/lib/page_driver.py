#!/usr/bin/env python3
"""Drives a page in headless Chromium for the stages: opens URL, waits until --ready is true,
runs --run once, then waits until --until is true (each a JavaScript expression), and prints the
last value of --until's companion --show. Exit 0 when --until became true, 1 on a timeout,
2 when Chromium cannot be driven.

Talks the DevTools protocol over --remote-debugging-pipe (fd 3 in, fd 4 out, messages ended by
a NUL byte): no websocket client needed, only the standard library."""
import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time


class Browser:
    def __init__(self, binary, profile, log):
        self.log = log
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def fds():
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}",
             "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log,
            preexec_fn=fds, close_fds=False)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buffer = b""
        self.next_id = 0

    def call(self, method, params=None, session=None, timeout=10):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{method}: no answer in {timeout} s")
            ready, _, _ = select.select([self.from_chrome], [], [], left)
            if ready:
                chunk = os.read(self.from_chrome, 65536)
                if not chunk:
                    raise RuntimeError("chromium closed its pipe")
                self.buffer += chunk

    def close(self):
        self.proc.kill()
        self.proc.wait()


def evaluate(browser, session, expression):
    r = browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}, session)
    return r.get("result", {}).get("value")


def wait(browser, session, expression, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if evaluate(browser, session, expression):
                return True
        except RuntimeError:
            pass   # the page is still navigating (the token's redirect)
        time.sleep(0.1)
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--ready", required=True, help="expression true once the page can be used")
    ap.add_argument("--run", default="true", help="expression run once, after --ready")
    ap.add_argument("--until", default="true", help="expression waited for after --run")
    ap.add_argument("--show", default="document.title", help="expression printed at the end")
    ap.add_argument("--timeout", type=float, default=15)
    ap.add_argument("--chromium", default="chromium")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as profile:
        try:
            b = Browser(a.chromium, profile, open(os.path.join(profile, "chromium.log"), "wb"))
        except OSError as e:
            print(f"page_driver: cannot start {a.chromium}: {e}", file=sys.stderr)
            return 2
        try:
            target = b.call("Target.createTarget", {"url": a.url}, timeout=30)["targetId"]
            session = b.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            if not wait(b, session, a.ready, a.timeout):
                print(f"page_driver: the page never became ready ({a.ready})", file=sys.stderr)
                return 1
            evaluate(b, session, a.run)
            done = wait(b, session, a.until, a.timeout)
            print(evaluate(b, session, a.show))
            return 0 if done else 1
        except (RuntimeError, TimeoutError, KeyError, OSError) as e:
            tail = open(os.path.join(profile, "chromium.log"), errors="replace").read()[-600:]
            print(f"page_driver: {e}; chromium said: {tail}", file=sys.stderr)
            return 2
        finally:
            b.close()


if __name__ == "__main__":
    sys.exit(main())
