#!/usr/bin/env python3
"""The values table of charts/llmbench/README.md, made from values.yaml's `# --` comments (helm-docs' convention),
so the README cannot drift from the values it documents.

`chart-values-table.py` prints the table; `--write` replaces it in the README between the `values:start` and
`values:end` markers; `--check` (make chart-check) fails when the README's table is not what values.yaml makes.
Reads only the plain block YAML values.yaml is written in (no anchors, no multi-line strings), without PyYAML.
"""
import re
import sys
from pathlib import Path

CHART = Path(__file__).resolve().parents[2] / "charts" / "llmbench"
START, END = "<!-- values:start -->", "<!-- values:end -->"
KEY = re.compile(r"^(\s*)([A-Za-z0-9_.-]+):\s*(.*)$")


def flow(lines, start, parent_indent):
    """The block mapping under a key (from line `start`, deeper than `parent_indent`) in YAML flow style."""
    items, i = [], start
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.strip().startswith("#"):
            i += 1
            continue
        match = KEY.match(line)
        if not match or len(match.group(1)) <= parent_indent:
            break
        indent, key, value = len(match.group(1)), match.group(2), match.group(3)
        if value:
            items.append(f"{key}: {value}")
            i += 1
            continue
        items.append(f"{key}: {flow(lines, i + 1, indent)}")
        i += 1
        while i < len(lines):
            deeper = KEY.match(lines[i])
            if lines[i].strip() and not lines[i].strip().startswith("#") and (
                not deeper or len(deeper.group(1)) <= indent
            ):
                break
            i += 1
    return "{" + ", ".join(items) + "}"


def rows(text):
    lines = text.splitlines()
    path, description, out = [], None, []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("# --"):
            description = [stripped[4:].strip()]
            continue
        if stripped.startswith("#"):
            if description is not None and line.lstrip().startswith("#  "):
                description.append(stripped[1:].strip())
            else:
                description = None
            continue
        match = KEY.match(line)
        if not match:
            continue
        indent, key, value = len(match.group(1)), match.group(2), match.group(3)
        path = [(d, k) for d, k in path if d < indent] + [(indent, key)]
        if description is None:
            continue
        if not value:
            value = flow(lines, i + 1, indent)
        name = ".".join(k for _, k in path)
        out.append((name, value, " ".join(description)))
        description = None
    return out


def table(text):
    head = ["| Key | Default | Description |", "| --- | --- | --- |"]
    body = [f"| `{k}` | `{v}` | {d.replace('|', '&#124;')} |" for k, v, d in rows(text)]
    return "\n".join(head + body)


def main():
    made = table((CHART / "values.yaml").read_text())
    readme_path = CHART / "README.md"
    if len(sys.argv) == 1:
        print(made)
        return 0
    readme = readme_path.read_text()
    before, rest = readme.split(START, 1)
    _, after = rest.split(END, 1)
    wanted = f"{before}{START}\n{made}\n{END}{after}"
    if sys.argv[1] == "--write":
        readme_path.write_text(wanted)
        return 0
    if readme != wanted:
        print("charts/llmbench/README.md's values table is stale: run python3 tests/tools/chart-values-table.py --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
