"""Make capture text publishable: no absolute path of the capturing machine survives in locations."""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

# What the brief's pre-stop check flags: a quote, \22, "(" or "File " followed by /dir/name/.
ABSOLUTE_PATH = re.compile(r'("|\\22|\(|File )/[a-z]+/[A-Za-z0-9_.-]+/')


def _prefixes() -> list[str]:
    """Directories whose prefix is stripped, longest first: import roots, then the project root."""
    roots = {p for p in sys.path if p and os.path.isabs(p) and os.path.isdir(p)}
    project = Path(__file__).resolve().parents[2]
    roots.add(str(project))
    # The adapters' folder's parent: the project root here, but inside the package in a version
    # stack's copy of this code (stacks.code_dir) or an installed wheel: `models/_torch.py` in all.
    import importlib.util

    spec = importlib.util.find_spec("stackwars_ir.models")
    if spec is not None and spec.origin:
        roots.add(str(Path(spec.origin).resolve().parents[1]))
    roots.add(sys.prefix)
    roots.add(os.path.expanduser("~"))
    return sorted((r.rstrip("/") + "/" for r in roots if r not in ("/", "")), key=len, reverse=True)


# An absolute path: a "/" that starts a token (or follows MLIR's escaped quote \22).
_LEFTOVER = re.compile(r'(?:(?<=\\22)|(?<![A-Za-z0-9_.+/\\-]))/(?:[A-Za-z0-9_.+-]+/)+([A-Za-z0-9_.+-]+\.py)')


_EVAL_WITH_KEY = re.compile(r"<eval_with_key>\.\d+")


def relativize(text: str) -> str:
    """Replace absolute source paths by import-relative ones (`transformers/models/gpt2/...`).

    A source file outside every import root (a script in /tmp, say) keeps only its file name.
    """
    for prefix in _prefixes():
        text = text.replace(prefix, "")
    # torch.fx names generated code by a per-process counter (`<eval_with_key>.284`): the number
    # says how many graphs this process made before, not where the code is (seen in LLaMA's
    # no_grad rotary embedding, which torch.export wraps in a generated submodule).
    text = _EVAL_WITH_KEY.sub("<eval_with_key>", text)
    return _LEFTOVER.sub(r"\1", text)


def absolute_paths(text: str) -> list[str]:
    """Absolute machine paths still present (for tests and a last check before writing)."""
    return sorted({m.group(0) for m in ABSOLUTE_PATH.finditer(text)})
