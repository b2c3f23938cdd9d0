#!/usr/bin/env python3
"""Checks docs/architecture.md's layer diagram against Package.swift (the readme stage runs it).

The diagram's edges (`A --> B`, dotted `A -.-> B`) must be exactly the dependencies that
`swift package dump-package` reports for every target but the test targets, in the ordinary build
and in the two special ones (PICONET_FUZZ=1, PICONET_EMBEDDED=1), and every such target must be
in the picture. Prints what differs, one line each; exit 1 if anything does.

    python3 scripts/lib/architecture_check.py --page docs/architecture.md --package .
"""
import argparse
import json
import os
import re
import subprocess
import sys

EDGE = re.compile(r"^\s*([\w-]+)\s*(-->|-\.->)\s*([\w-]+)\s*$")
NODE = re.compile(r"^\s*([\w-]+)(\[.*\])?\s*$")


def package_edges(root):
    edges, targets = set(), set()
    for extra in ({}, {"PICONET_FUZZ": "1"}, {"PICONET_EMBEDDED": "1"}):
        env = dict(os.environ, **extra)
        env.pop("PICONET_TEST_TARGETS", None)
        out = subprocess.run(["swift", "package", "--package-path", root, "dump-package"], env=env,
                             check=True, capture_output=True, text=True).stdout
        for t in json.loads(out)["targets"]:
            if t["type"] == "test":
                continue
            targets.add(t["name"])
            for d in t["dependencies"]:
                (name, *_), = d.values()
                edges.add((t["name"], name))
    return targets, edges


def diagram(page):
    text = open(page, encoding="utf-8").read()
    m = re.search(r"```mermaid\n(.*?)```", text, re.S)
    if not m:
        return None, None
    edges, nodes = set(), set()
    for line in m.group(1).split("\n"):
        e = EDGE.match(line)
        if e:
            edges.add((e.group(1), e.group(3)))
            continue
        n = NODE.match(line)
        if n and n.group(1) not in ("end", "flowchart", "subgraph"):
            nodes.add(n.group(1))
    return nodes, edges


def main():
    ap = argparse.ArgumentParser(description="docs/architecture.md's diagram against Package.swift")
    ap.add_argument("--page", required=True)
    ap.add_argument("--package", required=True, help="the package's folder")
    a = ap.parse_args()
    nodes, drawn = diagram(a.page)
    if drawn is None:
        print(f"architecture: {a.page}: no ```mermaid diagram")
        return 1
    targets, declared = package_edges(a.package)
    problems = [f"drawn but not in Package.swift: {x} -> {y}" for x, y in sorted(drawn - declared)]
    problems += [f"in Package.swift but not drawn: {x} -> {y}" for x, y in sorted(declared - drawn)]
    problems += [f"a target not in the picture: {t}" for t in sorted(targets - nodes)]
    for p in problems:
        print(f"architecture: {a.page}: {p}")
    if not problems:
        print(f"architecture: {a.page}: {len(targets)} targets and {len(declared)} dependencies, as Package.swift declares them")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
