#!/usr/bin/env python3
"""The workspace's layer order, and the check that every crate depends only on crates below it.

Cargo already refuses a circle between crates; this refuses an upward dependency: a crate that imports one declared
above it (normal, build or dev dependency alike), and a crate declared nowhere. `make lint` runs it on
`cargo metadata`; `check-layers.py FILE` reads the metadata from FILE instead (`-` for stdin).

LAYERS, bottom first, is the one place the order is declared (docs/design.md describes each crate). Crates of one
layer may not depend on each other either: a layer is a set of crates that stand side by side.
"""
import json
import subprocess
import sys

LAYERS = [
    ["llmbench-core"],  # kube-free types and pure logic shared by the operator and the launcher
    ["llmbench-model", "llmbench-text"],  # the record and its clocks; tokenizers, templates, Python random
    ["llmbench-data"],  # dataset files and synthetic text of exact token lengths
    ["llmbench-workload"],  # profiles and dialects into one workload model; prompts, bodies
    ["llmbench-sim"],  # the embedded vLLM-compatible simulator
    ["llmbench-engine"],  # requests on time, timed to the chunk; replay plans; the stack under test
    ["llmbench-metrics"],  # statistics, summary.json, capacity search, server metrics, MLPerf verdicts
    ["llmbench-report"],  # run.json, every tool's report, the pictures
    ["llmbench-api"],  # the CRD types (Kubernetes): only the binaries use them
    ["llmbench", "llmbench-operator"],  # the binaries: the launcher's runners and CLI, the operator
    ["llmbench-e2e"],  # the end-to-end tests
]


def metadata(source):
    if source is None:
        out = subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return json.loads(out)
    with (sys.stdin if source == "-" else open(source)) as f:
        return json.load(f)


def main():
    meta = metadata(sys.argv[1] if len(sys.argv) > 1 else None)
    layer = {name: i for i, names in enumerate(LAYERS) for name in names}
    order = " < ".join("/".join(names) for names in LAYERS)
    members = {p["name"] for p in meta["packages"]}
    problems = []
    for package in sorted(meta["packages"], key=lambda p: p["name"]):
        name = package["name"]
        if name not in layer:
            problems.append(
                f"crate {name} is in no layer\n  help: add it to LAYERS in tests/tools/check-layers.py and to the "
                "table in docs/design.md"
            )
            continue
        for dep in package["dependencies"]:
            target = dep["name"]
            if target not in members or target not in layer:
                continue
            if layer[target] >= layer[name]:
                kind = dep["kind"] or "normal"
                where = "beside" if layer[target] == layer[name] else "above"
                problems.append(
                    f"crate {name} depends on {target} ({kind}), which is {where} it\n"
                    f"  help: move what {name} needs from {target} down, or the code that needs it up; the "
                    f"layers, bottom first: {order}"
                )
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"layers: {len(members)} crates, each depends only on crates below it")


if __name__ == "__main__":
    main()
