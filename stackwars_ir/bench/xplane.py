"""A user's own device profile (an XProf `*.xplane.pb`) read as a Profile of one program's kernels.

It is read step by step: each step's time per kernel.
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..common.errors import StackwarsError
from .kernels import Kernel
from .xla_profile import LOOP_OPCODES, Profile, executions_of, kernel_events, runs_profile, union_seconds

if TYPE_CHECKING:
    from jax.profiler import ProfileData

# An execution is the program's when every kernel it ran is one the program compiled to and it ran at
# least this share of them: kernel names are generic (BERT tiny's 74 and GPT-2 tiny's 69 share 67),
# so a share of names in common would take one model's profile for the other's.
OWN_KERNELS = 0.95
_RUN_EVENT_WORDS = "PjRt Execute"  # what an XLA:CPU execution's event is called, in a message
WRITE_ONE = ("take one with jax.profiler.trace(DIR) (or torch_xla.debug.profiler.trace) around the steps, "
             "and give DIR/plugins/profile/RUN/HOST.xplane.pb")


def read_xspace(path: Path) -> tuple[ProfileData, Path]:
    """(the profile at `path`, read with jax's XProf reader (jax.profiler.ProfileData), the file read):
    `path` a *.xplane.pb or a folder holding one (jax.profiler.trace's DIR); one line naming the file
    where it is not one."""
    import jax

    path = Path(path)
    if path.is_dir():
        found = sorted(path.glob("**/*.xplane.pb"))
        if len(found) != 1:
            raise StackwarsError(f"{path}: a folder with {len(found)} *.xplane.pb profiles"
                                 + (f" ({', '.join(str(p.relative_to(path)) for p in found[:3])}"
                                    f"{', ...' if len(found) > 3 else ''})" if found else ""),
                                 fix="give one *.xplane.pb file" if found else WRITE_ONE)
        path = found[0]
    try:
        data = path.read_bytes()
    except OSError as e:
        raise StackwarsError(f"{path}: cannot read the profile: {e.strerror}", fix=WRITE_ONE) from None
    try:
        return jax.profiler.ProfileData.from_serialized_xspace(data), path
    except (RuntimeError, ValueError) as e:
        raise StackwarsError(f"{path}: not an XProf profile (an XSpace protobuf): {e} ({len(data):,} bytes)",
                             fix=WRITE_ONE) from None


def profile_of(path: Path, program: str, kernels: Sequence[Kernel]) -> "Profile":
    """The steps in profile `path` (XLA:CPU's kernel events, as jax's and torch_xla's profilers write
    them) that ran `program`, whose kernels (bench.kernels.Kernel: XLA compiled it here to these) name
    the profile's events: each step's time per kernel, with every step kept, as bench --profile's
    Profile, so diff --bench-profile splits it by block with an interval across the steps. A step's
    time is the device clock's: from its execution's start to its last kernel's end (there are no
    unprofiled runs: steady_s is its median too). Executions of other programs are left out and
    counted in the note. StackwarsError (one line): not a profile, a TPU's or GPU's device planes
    (not read yet), no execution of this program."""

    data, path = read_xspace(path)
    devices = sorted({p.name for p in data.planes if p.name.startswith(("/device:TPU", "/device:GPU"))})
    if devices:
        raise StackwarsError(f"{path}: a profile of {devices[0].split(':')[1]} devices ({', '.join(devices[:4])}"
                             f"{', ...' if len(devices) > 4 else ''}), whose device planes are not read yet",
                             fix="profile the same steps on the CPU (JAX_PLATFORMS=cpu, PJRT_DEVICE=CPU), or "
                                 "split a TPU's by the compiler's estimates: bench A B --target v6e")
    loops = {k.name for k in kernels if k.opcode in LOOP_OPCODES}
    starts, events = kernel_events(data, loops)
    if not starts:
        raise StackwarsError(f"{path}: holds no XLA:CPU execution (no {_RUN_EVENT_WORDS} event)",
                             fix="trace the steps themselves: " + WRITE_ONE)
    inner = {k.inner for k in kernels if k.inner}
    executions, spans = executions_of(starts, events, [inner] * len(starts))
    names = {k.name for k in kernels}
    mine = [i for i, e in enumerate(executions) if _is_program(e, names)]
    if not mine:
        near = max(({n for n in e if not n.startswith("transfer: ")} for e in executions), key=lambda r: len(r & names))
        extra, never = sorted(near - names), sorted(names - near)
        raise StackwarsError(f"{path}: none of its {len(starts)} executions ran {program}'s {len(names)} kernels; "
                             f"the nearest ran {len(extra)} kernels the program has not ({_some(extra)}) and not "
                             f"{len(never)} of the program's ({_some(never)})",
                             fix=f"give the program the profile ran, as XLA here compiles it (its StableHLO: "
                                 f"jax.jit(f).lower(x).as_text(debug_info=True), or stackwars-ir capture), or profile {program}")
    walls = [(max(e for _, e in spans[i]) - starts[i]) / 1e9 for i in mine]
    covered = [union_seconds(spans[i]) for i in mine]
    others = len(starts) - len(mine)
    note = (f"read from {path}, a profile taken outside stackwars-ir: {len(mine)} steps of {program}"
            + (f" ({others} executions of other programs left out)" if others else "")
            + "; a step's time from its execution's start to its last kernel's end")
    return runs_profile([executions[i] for i in mine], walls, covered, statistics.median(walls), kernels, note)


def _some(names: list) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "") if names else "none"


def _is_program(execution: dict, names: set) -> bool:
    """Whether one execution's kernels (name -> [seconds, calls]) are the program's (OWN_KERNELS)."""
    ran = {n for n in execution if not n.startswith("transfer: ")}
    return bool(ran) and ran <= names and len(ran) >= OWN_KERNELS * len(names)
