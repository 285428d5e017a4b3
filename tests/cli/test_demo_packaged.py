"""`emceepee demo` needs the example backends: they ship inside the package, once."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from emceepee_cli.cli import demo
from tests.support import EXAMPLES, ROOT


def test_the_demo_finds_its_backends_in_the_package_wherever_it_runs() -> None:
    assert demo.find_examples(None) == demo.PACKAGED
    assert (demo.PACKAGED / "echo.py").read_text() == (EXAMPLES / "echo.py").read_text()
    assert demo.PACKAGED.is_symlink()  # one copy: the package links to examples/servers


def test_a_built_wheel_carries_every_example_backend(tmp_path: Path) -> None:
    source = tmp_path / "source"  # a copy, so building leaves the checkout as it was
    junk = shutil.ignore_patterns(
        ".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache"
    )
    shutil.copytree(ROOT, source, symlinks=True, ignore=junk)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("emceepee-*.whl")
    shipped = {Path(name).name for name in zipfile.ZipFile(wheel).namelist() if "/_examples/" in name}
    assert shipped == {p.name for p in EXAMPLES.glob("*.py")}
