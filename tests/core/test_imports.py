"""The core layer stays pure: importing any of its modules loads neither torch nor
transformers."""

import subprocess
import sys


def test_core_imports_no_torch_or_transformers() -> None:
    code = (
        "import sys, pkgutil, importlib, treegrpo.core\n"
        "for m in pkgutil.iter_modules(treegrpo.core.__path__):\n"
        "    importlib.import_module('treegrpo.core.' + m.name)\n"
        "heavy = sorted(m for m in ('torch', 'transformers', 'tyro', 'rich') if m in sys.modules)\n"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"treegrpo.core imported {out.stdout.strip()}"


def test_package_import_is_light() -> None:
    code = "import sys, treegrpo; print('torch' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
