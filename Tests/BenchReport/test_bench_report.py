#!/usr/bin/env python3
"""scripts/lib/bench-report.py against the fixture run beside this file (the readme stage runs it).

Prints one line per check and "bench-report tests: N passed, N failed" last; exit 1 on a failure.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TOOL = os.path.join(ROOT, "scripts/lib/bench-report.py")
FIXTURE = os.path.join(HERE, "bench.json")
PAGE = """# Performance

Prose about the method.

<!-- bench-report: begin -->
<!-- bench-report: end sha256=0000000000000000000000000000000000000000000000000000000000000000 -->

More prose.
"""
passed = failed = 0


def expect(what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {what}")
    else:
        failed += 1
        print(f"FAIL {what}: {detail}"[:600])


def tool(*args):
    p = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def table_row(text, name):
    """The goals table's row (figure, row, goal, baseline, ours, ratio, verdict) of a row name."""
    for l in text.split("\n"):
        cells = [c.strip() for c in l.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[1] == f"`{name}`":
            return cells
    return None


with tempfile.TemporaryDirectory() as d:
    page = os.path.join(d, "performance.md")
    open(page, "w").write(PAGE)
    rc, out = tool("--check", page)
    expect("a region whose hash is not the generator's fails the check", rc == 1 and "edited by hand" in out, out)

    rc, out = tool("--page", page)
    text = open(page).read()
    expect("without a run the page says it is not generated yet, with how to generate it",
           rc == 0 and "Not generated yet" in text and "scripts/bench --json" in text, out + text)
    rc, out = tool("--check", page)
    expect("the not-generated page passes the check", rc == 0, out)

    rc, out = tool("--json", FIXTURE, "--page", page)
    text = open(page).read()
    expect("the fixture run is written", rc == 0 and "Not generated yet" not in text, out)
    row = table_row(text, "udp-limit-unreliable")
    expect("a ratio over its >= goal is met, with baseline, ours and ratio as the run wrote them (0.60, not 0.6)",
           row is not None and row[3].startswith("200000") and row[4] == "120000 msg/s" and row[5] == "0.60"
           and row[6] == "met", row)
    # Each latency goal: judged on its median of rounds (over the goal here), its best of rounds
    # (under the goal for e2e) shown beside it, not judged.
    for best, median_ratio in (("session-oneway-p50", "1.56"), ("e2e-latency-p50", "3.2")):
        row = table_row(text, best + "-median")
        expect(f"{best}: the goal is judged on the median of rounds ({median_ratio}: not met)",
               row is not None and row[5] == median_ratio and "not met" in row[6], row)
        row = table_row(text, best)
        expect(f"{best}: the best-of-rounds row is shown beside the median, not judged",
               row is not None and row[2] == "(shown, not judged)" and row[6] == "—", row)
    row = table_row(text, "node-idle-wakeups-x86_64")
    expect("a value goal (= 0 wake-ups) is judged on the value", row is not None and row[6] == "met", row)
    row = table_row(text, "hub-ingest-store")
    expect("a goal whose row the run did not measure is named so, with the reason",
           row is not None and row[6].startswith("not measured") and "60-hub-ingest failed" in row[6], row)
    row = table_row(text, "coap-reliable-rate-64B")
    expect("a goal whose row is absent from the run is named not measured", row is not None and row[6] == "not measured", row)
    expect("the per-module rows stay in the JSON", "node-size-x86_64[libsodium]" not in text, "")
    expect("the prose around the region is kept", text.startswith("# Performance\n\nProse") and text.endswith("More prose.\n"), text[-80:])
    rc, out = tool("--check", page)
    expect("the generated page passes the check", rc == 0, out)

    open(page, "w").write(text.replace("| 120000 |", "| 130000 |"))
    rc, out = tool("--check", page)
    expect("a figure changed by hand inside the region fails the check", rc == 1 and "edited by hand" in out, out)

    open(page, "w").write(text.replace("More prose.", "| figure | ours |\n|---|---|\n| udp | 1.2 |"))
    rc, out = tool("--check", page)
    expect("a typed figure table outside the region fails the check", rc == 1 and "outside the generated region" in out, out)

    open(page, "w").write(text.replace("More prose.", "    session-oneway-p50   7.2 us   c-udp-oneway   4.9   1.47"))
    rc, out = tool("--check", page)
    expect("a pasted bench row outside the region fails the check", rc == 1 and "outside the generated region" in out, out)

    bad = os.path.join(d, "bad.json")
    open(bad, "w").write('{"machine": {}}')
    rc, out = tool("--json", bad, "--page", page)
    expect("a JSON without rows is refused with one line", rc == 65 and out.count("\n") == 1, out)

print(f"bench-report tests: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
