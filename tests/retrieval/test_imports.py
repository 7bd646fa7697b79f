"""``import treegrpo.tools`` and its light modules load no heavy dependency; the CLI has `serve`."""

from __future__ import annotations

import subprocess
import sys


def test_tools_package_and_light_modules_import_nothing_heavy() -> None:
    code = (
        "import sys, treegrpo.tools, treegrpo.retrieval.base, treegrpo.retrieval.corpus, "
        "treegrpo.retrieval.protocol, treegrpo.files, treegrpo.retrieval.batcher\n"
        "heavy = ('torch', 'faiss', 'sentence_transformers', 'bm25s', 'fastapi', 'uvicorn', "
        "'httpx', 'numpy', 'scipy')\n"
        "print(','.join(sorted(m for m in heavy if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"treegrpo.tools imported {out.stdout.strip()}"


def test_bm25_and_server_modules_do_not_import_torch() -> None:
    code = (
        "import sys, treegrpo.retrieval.bm25, treegrpo.retrieval.server, "
        "treegrpo.retrieval.http_client, treegrpo.retrieval.dense\n"
        "heavy = ('torch', 'faiss', 'sentence_transformers')\n"
        "print(','.join(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_cli_has_serve_subcommand() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "treegrpo.cli", "serve", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    flags = ("--corpus", "--retriever", "--host", "--port", "--topk-max", "--model-path")
    limits = ("--max-queries", "--max-query-chars", "--max-body-bytes", "--max-response-bytes")
    for flag in (*flags, *limits):
        assert flag in out.stdout
    assert "127.0.0.1" in out.stdout and "8000" in out.stdout
