"""``python -m treegrpo.cli …``: the ``treegrpo`` command."""

from treegrpo.cli import main

main()
