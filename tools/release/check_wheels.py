"""Install each wheel from dist/ alone in a fresh venv and import its public API.

    ./pants package :: && python3.11 tools/release/check_wheels.py [--dist dist] [--torch-wheel PATH]

A wheel gets only what it declares: its Requires-Dist (first-party wheels found in dist/,
third-party ones from PyPI) plus torch's CPU build, which PyPI does not carry. Prints one
line per wheel and exits 1 if any failed.
"""

from __future__ import annotations

import argparse
import glob
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

#: wheel distribution name -> the module whose __all__ must import.
PUBLIC_MODULES = {
    "lowerkit_pass_infra": "lowerkit.pass_infra",
    "lowerkit_arm_passes": "lowerkit.arm_passes",
    "lowerkit_coreml_quantizer": "lowerkit.coreml_quantizer",
    "lowerkit_coreml_compiler_ops": "lowerkit.coreml_compiler_ops",
    "lowerkit_coreml_preprocess": "lowerkit.coreml_preprocess",
    "lowerkit": "lowerkit.cli",
}

_IMPORT_ALL = "import importlib, sys; m = importlib.import_module(sys.argv[1]); [getattr(m, n) for n in m.__all__]; print(len(m.__all__))"


def requires(wheel: Path) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(name).decode()
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def check(wheel: Path, dist: Path, torch_wheel: str) -> tuple[bool, str]:
    """Install `wheel` into a fresh venv and import its public API; (ok, detail)."""
    name = wheel.name.split("-")[0]
    with tempfile.TemporaryDirectory(prefix=f"wheel-{name}-") as folder:
        venv = Path(folder) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        install = subprocess.run(
            [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--find-links", str(dist), torch_wheel, str(wheel)],
            capture_output=True, text=True, check=False,
        )
        if install.returncode != 0:
            return False, f"pip install failed: {install.stderr.strip().splitlines()[-1]}"
        imported = subprocess.run(
            [python, "-W", "ignore", "-c", _IMPORT_ALL, PUBLIC_MODULES[name]],
            capture_output=True, text=True, check=False,
        )
        if imported.returncode != 0:
            return False, f"import failed: {imported.stderr.strip().splitlines()[-1]}"
        listed = subprocess.run([python, "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True, check=True)
        first_party = sorted(line for line in listed.stdout.splitlines() if line.startswith("lowerkit"))
        return True, f"{imported.stdout.strip()} public names; first-party installed: {', '.join(first_party)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=Path("dist"))
    parser.add_argument("--torch-wheel", default=(glob.glob("/opt/wheels/torch-2.13.0+cpu-*.whl") or ["torch==2.13.0"])[0])
    args = parser.parse_args()
    wheels = sorted(args.dist.glob("lowerkit*.whl"))
    if not wheels:
        sys.exit(f"no lowerkit wheels in {args.dist}; run ./pants package :: first")
    failures = 0
    for wheel in wheels:
        ok, detail = check(wheel, args.dist.resolve(), args.torch_wheel)
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {wheel.name}: requires {requires(wheel)}; {detail}", flush=True)
    print(f"{len(wheels) - failures} passed, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
