"""docs/ARCHITECTURE.md's crate table draws every workspace dependency there
is: the table between the crate-graph markers must equal what `cargo
metadata` reports (normal dependencies between workspace crates)."""

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def drawn() -> dict[str, set[str]]:
    text = (ROOT / "docs/ARCHITECTURE.md").read_text()
    table = text.split("<!-- crate-graph -->")[1].split("<!-- /crate-graph -->")[0]
    rows = {}
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = {d.strip() for d in cells[1].split(",") if d.strip()}
    return rows


def actual() -> dict[str, set[str]]:
    out = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    packages = json.loads(out)["packages"]
    names = {p["name"] for p in packages}
    return {
        p["name"]: {d["name"] for d in p["dependencies"] if d["name"] in names and d["kind"] is None and d["name"] != p["name"]}
        for p in packages
    }


def test_readme_layout_names_every_crate_folder():
    """README's layout table lists each workspace crate's folder (a newcomer
    finds a piece from it)."""
    out = subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    folders = {str(Path(p["manifest_path"]).parent.relative_to(ROOT)) for p in json.loads(out)["packages"]}
    layout = (ROOT / "README.md").read_text().split("## Layout")[1]
    listed = set(re.findall(r"^\| `([^`]+)`", layout, re.M)) | set(re.findall(r"^\| `[^`]+`, `([^`]+)`", layout, re.M))
    assert folders <= listed, sorted(folders - listed)


def test_architecture_draws_every_crate_arrow():
    assert drawn() == actual()


def test_no_crate_has_a_module_import_circle():
    """Inside each crate, modules import one way: no `use crate::a` / `super::b`
    circle (a module and its own submodules excepted)."""
    circles = []
    for src in sorted(ROOT.glob("crates/*/src")) + [ROOT / "kernels/src"]:
        mods = {}
        for p in src.rglob("*.rs"):
            parts = list(p.relative_to(src).with_suffix("").parts)
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            code = "\n".join(line for line in p.read_text().splitlines() if not line.lstrip().startswith("//"))
            mods["::".join(parts)] = code
        graph = {m: set() for m in mods}
        for m, code in mods.items():
            parent = m.rsplit("::", 1)[0] if "::" in m else ""
            for base, mid, group in re.findall(r"\b(crate|super)::((?:\w+::)*)(\{[^}]*\}|\w+)", code):
                prefix = [] if base == "crate" else [x for x in parent.split("::") if x]
                prefix += [x for x in mid.split("::") if x]
                names = [g.strip().split("::")[0] for g in group.strip("{}").split(",")]
                for name in names:
                    for k in range(len(prefix) + 1, 0, -1):
                        cand = "::".join((prefix + [name])[:k])
                        if cand in mods:
                            if cand != m and not m.startswith(cand + "::") and not cand.startswith(m + "::"):
                                graph[m].add(cand)
                            break
        # Any cycle: depth-first search with colours.
        colour = {}

        def visit(v, path):
            colour[v] = 1
            for w in graph[v]:
                if colour.get(w) == 1:
                    circles.append(f"{src.parent.name}: {' -> '.join(path[path.index(w):] + [w])}")
                elif w not in colour:
                    visit(w, path + [w])
            colour[v] = 2

        for v in graph:
            if v not in colour:
                visit(v, [v])
    assert not circles, circles
