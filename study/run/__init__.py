"""The study's drivers, one per page: each runs its grid or commands, then prints the page.

Run from the repository's root (as `make findings*` does): study/ sits beside the library, not
installed with it. Like the command line, they keep torch_xla on the CPU and libtpu quiet.
"""
from __future__ import annotations

import os

os.environ.setdefault("PJRT_DEVICE", "CPU")
from stackwars_ir.common.runtime import quiet_libtpu  # noqa: E402  (as the CLI: libtpu says nothing on a CPU machine)

quiet_libtpu()
