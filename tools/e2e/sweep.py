"""Lower every zoo model to every target it applies to with `lowerkit lower --verify`, then inspect.

    ./pants run tools/e2e/sweep.py -- [--out DIR] [--json FILE] [--only tosa-int,zoo_model,...]

Prints one row per (model, target): exit code, seconds, .pte size, delegates, verification;
exits 1 if any lowering failed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lowerkit import zoo
from lowerkit.cli import targets


def _cases(only: set[str] | None) -> list[tuple[str, str]]:
    return [
        (model.name, target.name)
        for target in targets.TARGETS.values()
        for model in zoo.models()
        if target.backend in model.backends and (only is None or target.name in only or model.name in only)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="Keep the .pte files here (default: a temporary folder).")
    parser.add_argument("--json", type=Path, help="Also write the rows as JSON.")
    parser.add_argument("--only", help="Comma-separated target or zoo model names to keep (default: all).")
    args = parser.parse_args()
    folder = args.out or Path(tempfile.mkdtemp(prefix="lowerkit-sweep-"))
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    start = time.perf_counter()
    for model, target in _cases(set(args.only.split(",")) if args.only else None):
        out = folder / f"{model}.{target}.pte"
        began = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "lowerkit.cli", "lower", f"zoo:{model}", "-t", target, "-o", str(out), "--verify", "--json", "-q"],
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.perf_counter() - began
        row: dict[str, object] = {"model": model, "target": target, "exit": done.returncode, "seconds": round(seconds, 1)}
        try:
            summary = json.loads(done.stdout) if done.returncode == 0 else None
        except json.JSONDecodeError:
            summary, row["exit"], row["error"] = None, -1, "stdout was not the JSON --json promises"
        if summary is not None:
            inspected = subprocess.run(
                [sys.executable, "-m", "lowerkit.cli", "inspect", str(out), "--json"],
                capture_output=True, text=True, check=False,
            )
            delegates = [d["backend_id"] for m in json.loads(inspected.stdout)["methods"] for d in m["delegates"]] if inspected.returncode == 0 else ["INSPECT FAILED"]
            row.update(bytes=summary["pte_bytes"], delegates=delegates, verification=summary["verification"], cpu_ops=summary["cpu_ops"])
        elif "error" not in row:
            row["error"] = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no message"
        rows.append(row)
        print(json.dumps(row), flush=True)
    failed = [r for r in rows if r["exit"] != 0 or r.get("delegates") == ["INSPECT FAILED"]]
    print(f"{len(rows) - len(failed)} passed, {len(failed)} failed in {time.perf_counter() - start:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
