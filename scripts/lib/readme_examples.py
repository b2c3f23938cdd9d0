#!/usr/bin/env python3
"""Runs README.md's examples as written (the `readme` stage; the VM stage for Bluetooth/GPIO ones),
and those of every docs/*.md page with --docs (each file's scenes end with that file).

Every code block in the README and the docs is preceded by a marker comment (invisible on GitHub):

    <!-- readme-test: KIND [key=value ...] [-- reason] -->

KIND
  run     shell commands, run verbatim, one step per command line (comment lines and blank
          lines are not commands; a line ending in `\\` continues). Keys:
            scene=NAME   blocks of one scene share namespaces and background processes; a scene
                         ends (everything it started is stopped) after its last block
            net=lo       (default) a fresh network namespace with only `lo` (up, MULTICAST on)
            net=pair     two namespaces, `board` and `hub`, each with a `wlan0` (veth, 10.79.0.2
                         and 10.79.0.1); side=board|hub says where this block runs
            tmpfs=DIR    a private tmpfs on DIR for this block's commands (e.g. /var/lib, so a
                         --db under /var/lib/piconet writes nothing on this machine)
            steps=S;S;…  per command line:
              fg            runs to the end, must exit 0 (60 s at most)
              fg~REGEX      …and its output must match REGEX
              bg            a long-running program (a listener): started in the background, must
                            still run when the scene ends; then stopped (SIGINT, then SIGTERM)
              bg~REGEX      …and its output must match REGEX by then (waited for, 300 s at most)
              bg=REGEX      …and the next line waits until its output matches REGEX (a server
                            that must be ready first; 300 s at most)
            A line `export NAME=VALUE` is run and kept for the block's later lines, as a shell
            in one terminal would.
              fails         must fail cleanly here: exit 1..127 (no trap), at most one line on
                            stderr (the reason must say why it fails here)
  vm      needs Bluetooth or GPIO: run by the VM stage (scripts/vm/guest.d/40-readme.sh runs this
          harness with --vm), with the same `steps=` as `run` (net=lo there)
  stage   covered by another stage: `stage NAME -- reason` (NAME must be a stage of scripts/test)
  skip    not run: `skip -- reason` (a reason is required)
  output / json / swift / text   not a shell example: sample output, a JSON file (must parse),
          Swift source, a file tree

An unmarked code block, an unknown kind, a missing reason or a step count that does not match
the command lines is a failure. Environment (not part of any command): PATH starts with the
built binaries, HOME is a fresh directory per scene and side, the working directory is the
checkout. Prints one line per example and "readme: N passed, N failed, N skipped" last.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

MARKER = re.compile(r"^<!--\s*readme-test:\s*(.*?)\s*-->\s*$")
KINDS = {"run", "vm", "stage", "skip", "output", "json", "swift", "text"}


class Block:
    def __init__(self, file, line, lines, marker):
        self.file = file          # the file as named in messages (README.md, docs/mqtt.md)
        self.line = line          # 1-based line of the block's first line
        self.lines = lines        # the block's text lines (indentation / fences removed)
        self.marker = marker      # the marker text or None
        self.kind = None
        self.keys = {}
        self.reason = ""
        self.error = None
        if marker is None:
            self.error = "unmarked code block (add <!-- readme-test: KIND … --> before it)"
            return
        text, _, self.reason = marker.partition(" -- ")
        self.reason = self.reason.strip()
        words = text.split(None, 1)
        self.kind = words[0] if words else ""
        rest = words[1] if len(words) > 1 else ""
        # key=value pairs; a value runs to the next " key=" (steps may contain spaces).
        for m in re.finditer(r"(\w+)=(.*?)(?=\s+\w+=|$)", rest):
            self.keys[m.group(1)] = m.group(2).strip()
        if self.kind not in KINDS:
            self.error = f"unknown kind '{self.kind}' (one of {', '.join(sorted(KINDS))})"
        elif self.kind in ("skip", "stage") and not self.reason:
            self.error = f"'{self.kind}' needs a reason after ' -- '"

    def commands(self):
        out, cur = [], ""
        for l in self.lines:
            s = l.rstrip()
            if not cur and (not s.strip() or s.lstrip().startswith("#")):
                continue
            if s.endswith("\\"):
                cur += s[:-1] + " "
                continue
            out.append(cur + s)
            cur = ""
        if cur:
            out.append(cur)
        return out

    def steps(self):
        raw = self.keys.get("steps", "")
        return [s.strip() for s in raw.split(";")] if raw else []

    @property
    def title(self):
        first = self.commands()[:1] or [l for l in self.lines if l.strip()][:1] or [""]
        return f"{self.file}:{self.line} {first[0].strip()[:70]}"


def parse(path, shown):
    text = open(path, encoding="utf-8").read().split("\n")
    blocks, i, prev = [], 0, ""
    while i < len(text):
        l = text[i]
        fence = re.match(r"^(```|~~~)", l)
        if fence:
            start, body = i, []
            i += 1
            while i < len(text) and not text[i].startswith(fence.group(1)):
                body.append(text[i])
                i += 1
            blocks.append(Block(shown, start + 1, body, marker_of(prev)))
            prev, i = "", i + 1
            continue
        if l.startswith("    ") and l.strip() and i > 0 and not text[i - 1].strip():
            start, body = i, []
            while i < len(text) and (text[i].startswith("    ") or not text[i].strip()):
                if not text[i].strip() and not (i + 1 < len(text) and text[i + 1].startswith("    ")):
                    break
                body.append(text[i][4:])
                i += 1
            blocks.append(Block(shown, start + 1, body, marker_of(prev)))
            prev = ""
            continue
        if l.strip():
            prev = l
        i += 1
    return blocks


def marker_of(line):
    m = MARKER.match(line.strip())
    return m.group(1) if m else None


class Scene:
    """Namespaces, a HOME per side, and the background processes of one scene."""

    def __init__(self, name, net, tag, env_base):
        self.name, self.net, self.tag = name, net, tag
        self.dir = tempfile.mkdtemp(prefix=f"readme-{name}-")
        self.procs = []   # (title, step, Popen, logpath)
        self.env_base = env_base
        self.namespaces = []
        if net == "pair":
            b, h = f"{tag}-{name}-board", f"{tag}-{name}-hub"
            for ns in (b, h):
                sh(["ip", "netns", "add", ns])
                self.namespaces.append(ns)
                sh(["ip", "-n", ns, "link", "set", "lo", "up"])
            sh(["ip", "-n", b, "link", "add", "wlan0", "type", "veth", "peer", "name", "wlan0", "netns", h])
            sh(["ip", "-n", b, "addr", "add", "10.79.0.2/24", "dev", "wlan0"])
            sh(["ip", "-n", h, "addr", "add", "10.79.0.1/24", "dev", "wlan0"])
            for ns in (b, h):
                sh(["ip", "-n", ns, "link", "set", "wlan0", "up"])
            self.sides = {"board": b, "hub": h}
        elif net == "lo":
            ns = f"{tag}-{name}"
            sh(["ip", "netns", "add", ns])
            self.namespaces.append(ns)
            sh(["ip", "-n", ns, "link", "set", "lo", "up"])
            sh(["ip", "-n", ns, "link", "set", "lo", "multicast", "on"])
            self.sides = {"": ns}
        else:  # "host": the VM guest, already its own machine
            self.sides = {"": None}
        time.sleep(0.5)

    def env(self, side):
        home = os.path.join(self.dir, side or "home")
        os.makedirs(home, exist_ok=True)
        e = dict(self.env_base)
        e["HOME"] = home
        # Temporary files (SwiftPM's lock files under the demo's build, say) go with the scene.
        e["TMPDIR"] = os.path.join(self.dir, "tmp")
        os.makedirs(e["TMPDIR"], exist_ok=True)
        e.pop("XDG_STATE_HOME", None)
        e.pop("PICONET_HOME", None)
        return e

    def argv(self, side, command, tmpfs):
        script = command
        if tmpfs:
            script = (f"mount -t tmpfs readme-tmpfs {tmpfs} && mkdir -p {tmpfs}/piconet && exec bash -c "
                      + shell_quote(command))
            argv = ["unshare", "--mount", "--propagation", "private", "bash", "-c", script]
        else:
            argv = ["bash", "-c", script]
        ns = self.sides.get(side)
        return (["ip", "netns", "exec", ns] + argv) if ns else argv

    def close(self):
        for _, _, p, _ in self.procs:
            stop(p)
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


def as_in_a_terminal():
    """In the child: Ctrl-C (SIGINT) acts as in a terminal, even when this harness was started
    in the background (which leaves SIGINT ignored, and children inherit that)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def shell_quote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def sh(argv):
    subprocess.run(argv, check=True)


def stop(p):
    if p.poll() is not None:
        return
    for sig, wait in ((signal.SIGINT, 5), (signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def tail(path, n=3):
    try:
        lines = open(path, errors="replace").read().strip().split("\n")
        return " | ".join(l.strip() for l in lines[-n:])[:400]
    except OSError:
        return ""


class Runner:
    def __init__(self, args):
        self.args = args
        self.passed = self.failed = self.skipped = 0
        self.tag = f"prm{os.getpid()}"
        env = dict(os.environ)
        env["PATH"] = args.bin + os.pathsep + env.get("PATH", "")
        self.env_base = env
        self.stages = set(args.stages.split(",")) if args.stages else set()

    def ok(self, what):
        self.passed += 1
        print(f"ok   {what}", flush=True)

    def fail(self, what, why):
        self.failed += 1
        print(f"FAIL {what}: {why}", flush=True)

    def skip(self, what, why):
        self.skipped += 1
        print(f"skip {what}: {why}", flush=True)

    def run(self, blocks):
        want = "vm" if self.args.vm else "run"
        # Scenes end after their last block.
        last = {}
        for i, b in enumerate(blocks):
            if b.kind == want:
                last[b.keys.get("scene", f"block{i}")] = i
        scenes = {}
        try:
            for i, b in enumerate(blocks):
                self.check(b, i, want, scenes)
                for name, j in list(last.items()):
                    if j == i and name in scenes:
                        self.end_scene(scenes.pop(name))
        finally:
            for s in scenes.values():
                s.close()

    def check(self, b, i, want, scenes):
        if b.error:
            return self.fail(b.title, b.error)
        if b.kind in ("output", "swift", "text"):
            return  # not an example; counted nowhere
        if b.kind == "json":
            if self.args.vm:
                return
            try:
                docs = [d for d in "\n".join(b.lines).split("\n\n") if d.strip()]
                for d in docs:
                    json.loads(d)
                return self.ok(f"{b.title}: {len(docs)} JSON document(s) parse")
            except ValueError as e:
                return self.fail(b.title, f"not valid JSON: {e}")
        if b.kind == "skip":
            return None if self.args.vm else self.skip(b.title, b.reason)
        if b.kind == "stage":
            if self.args.vm:
                return
            name = b.keys.get("name") or (b.marker.split()[1] if len(b.marker.split()) > 1 else "")
            if self.stages and name not in self.stages:
                return self.fail(b.title, f"covered by stage '{name}', which scripts/test does not have")
            return self.skip(b.title, f"run by the {name} stage: {b.reason}")
        if b.kind != want:
            if b.kind == "vm":
                guest = os.path.join(self.args.root, "scripts/vm/guest.d/40-readme.sh")
                if not os.path.exists(guest):
                    return self.fail(b.title, "marked vm but scripts/vm/guest.d/40-readme.sh does not exist")
                return self.skip(b.title, "needs Bluetooth/GPIO: run verbatim by the vm stage (guest.d/40-readme.sh)"
                                 + (f"; {b.reason}" if b.reason else ""))
            return
        cmds, steps = b.commands(), b.steps()
        if len(cmds) != len(steps):
            return self.fail(b.title, f"{len(cmds)} command line(s) but {len(steps)} step(s) in steps=")
        name = b.keys.get("scene", f"block{i}")
        net = "host" if self.args.vm else b.keys.get("net", "lo")
        if name not in scenes:
            scenes[name] = Scene(name, net, self.tag, self.env_base)
        scene = scenes[name]
        side = b.keys.get("side", "") if net == "pair" else ""
        if net == "pair" and side not in ("board", "hub"):
            return self.fail(b.title, "net=pair needs side=board or side=hub")
        exports = []
        for n, (cmd, step) in enumerate(zip(cmds, steps)):
            self.step(scene, side, b, n, cmd, step, exports)
            if cmd.strip().startswith("export "):
                exports.append(cmd.strip())

    def step(self, scene, side, b, n, original, step, exports):
        kind, sep, expect = re.match(r"^(\w+)([~=]?)(.*)$", step).groups()
        what = f"{b.file}:{b.line} `{original.strip()[:90]}`"
        cmd = "; ".join(exports + [original])
        log = os.path.join(scene.dir, f"step-{b.line}-{n}.log")   # a scene lives in one file
        err = os.path.join(scene.dir, f"step-{b.line}-{n}.err")
        argv = scene.argv(side, cmd, b.keys.get("tmpfs"))
        env = scene.env(side)
        if kind == "bg":
            out = open(log, "w")
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 cwd=self.args.root, env=env, start_new_session=True, preexec_fn=as_in_a_terminal)
            scene.procs.append((what, expect, p, log))
            if sep == "=":
                deadline = time.time() + 300
                while time.time() < deadline and p.poll() is None:
                    if re.search(expect, open(log, errors="replace").read()):
                        break
                    time.sleep(0.5)
                else:
                    return self.fail(what, f"never ready (/{expect}/ not seen; exit {p.poll()}): {tail(log)}")
            time.sleep(1.5)  # a listener gets to listening before the next line talks to it
            return
        if kind not in ("fg", "fails"):
            return self.fail(what, f"unknown step '{step}' (fg, fg~REGEX, bg, bg~REGEX, fails)")
        with open(log, "w") as out, open(err, "w") as errf:
            p = subprocess.Popen(argv, stdout=out, stderr=errf if kind == "fails" else subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, cwd=self.args.root, env=env, start_new_session=True, preexec_fn=as_in_a_terminal)
            try:
                rc = p.wait(60)
            except subprocess.TimeoutExpired:
                stop(p)
                return self.fail(what, f"still running after 60 s: {tail(log)}")
            except BaseException:
                stop(p)  # interrupted: the foreground example goes too
                raise
        if kind == "fails":
            lines = [l for l in open(err, errors="replace").read().split("\n") if l.strip()]
            if rc == 0:
                return self.fail(what, "expected to fail here, exited 0")
            if rc < 0 or rc >= 128:
                return self.fail(what, f"died (exit {rc}): {' | '.join(lines[-3:])}")
            if len(lines) > 1:
                return self.fail(what, f"{len(lines)} lines on stderr, not one: {' | '.join(lines[:3])}")
            return self.ok(f"{what} fails here with one line (exit {rc}): {' '.join(lines)[:120]} — {b.reason}")
        if rc != 0:
            return self.fail(what, f"exit {rc}: {tail(log)}")
        if expect and not re.search(expect, open(log, errors="replace").read()):
            return self.fail(what, f"output does not match /{expect}/: {tail(log)}")
        self.ok(what + (f" (output matches /{expect}/)" if expect else ""))

    def end_scene(self, scene):
        try:
            for what, expect, p, log in scene.procs:
                deadline = time.time() + 300
                seen = not expect
                while not seen and time.time() < deadline and p.poll() is None:
                    seen = re.search(expect, open(log, errors="replace").read()) is not None
                    if not seen:
                        time.sleep(0.5)
                if not seen and expect:
                    seen = re.search(expect, open(log, errors="replace").read()) is not None
                if p.poll() is not None:
                    self.fail(what, f"a long-running example exited early (exit {p.returncode}): {tail(log)}")
                elif not seen:
                    self.fail(what, f"output never matched /{expect}/: {tail(log)}")
                else:
                    self.ok(f"{what} runs" + (f" (output matches /{expect}/)" if expect else ""))
        finally:
            scene.close()


def main():
    # SIGTERM / SIGHUP unwind like Ctrl-C, so every scene's `finally` stops what it started
    # and deletes its namespaces.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda n, _: sys.exit(128 + n))
    ap = argparse.ArgumentParser(description="Runs the marked examples of README.md (and docs/*.md).")
    ap.add_argument("--readme", required=True)
    ap.add_argument("--docs", default="", help="a folder whose *.md pages are checked too, after the README")
    ap.add_argument("--root", required=True, help="the checkout (working directory of every example)")
    ap.add_argument("--bin", required=True, help="directory of the built piconet binaries (put first on PATH)")
    ap.add_argument("--stages", default="", help="comma-separated stage names of scripts/test")
    ap.add_argument("--vm", action="store_true", help="run the blocks marked vm (inside the test VM)")
    ap.add_argument("--list", action="store_true", help="print every block with its marker, run nothing")
    args = ap.parse_args()
    files = [(args.readme, os.path.basename(args.readme))]
    if args.docs:
        pages = sorted(f for f in os.listdir(args.docs) if f.endswith(".md"))
        if not pages:
            print(f"FAIL {args.docs}: no *.md pages (--docs names the folder of the docs)", flush=True)
            return 1
        base = os.path.basename(os.path.normpath(args.docs))
        files += [(os.path.join(args.docs, f), f"{base}/{f}") for f in pages]
    parsed = [parse(path, shown) for path, shown in files]
    if args.list:
        for blocks in parsed:
            for b in blocks:
                print(f"{b.title}  [{b.marker or 'UNMARKED'}]")
        return 0
    r = Runner(args)
    if not parsed[0]:
        r.fail(files[0][1], "no code blocks found")
    for blocks in parsed:
        r.run(blocks)
    print(f"readme{'-vm' if args.vm else ''}: {r.passed} passed, {r.failed} failed, {r.skipped} skipped", flush=True)
    return 0 if r.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
