"""Stage progress on a terminal (stderr), silence elsewhere, and the wall time of every stage."""
from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

# Stages of two threads (capture's parity runs beside the next export) share stderr: a stage's
# `[label] name ...` line stays open until it ends, unless another stage prints meanwhile; then it
# is closed, and its end gets a whole line of its own.
_LOCK = threading.Lock()
_OPEN: list = [None]  # the stage whose line is open


class Stages:
    """Times named stages; prints `[label] stage ... 1.2 s` lines only when stderr is a terminal."""

    def __init__(self, label: str = "", *, show: bool | None = None) -> None:
        self.label = label
        self.show = sys.stderr.isatty() if show is None else show
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, name: str, *, hold_ctrl_c: bool = False) -> Iterator[None]:
        """Time one stage; with hold_ctrl_c, a Ctrl-C stops the command at the stage's end, not inside it
        (errors.held_interrupts: torch's exporters call Python from C++)."""
        if hold_ctrl_c:
            from .errors import held_interrupts

            with held_interrupts(f"[{self.label}] {name}" if self.label else name), self.stage(name):
                yield
            return
        key = object()
        if self.show:
            self._print(f"[{self.label}] {name} ...", opens=key)
        start = time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - start
            self.seconds[name] = round(self.seconds.get(name, 0.0) + took, 3)
            if self.show:
                self._print(f" {took:.1f} s\n", closes=key, whole=f"[{self.label}] {name} ... {took:.1f} s\n")

    @staticmethod
    def _print(text: str, opens=None, closes=None, whole: str = "") -> None:
        with _LOCK:
            if closes is not None and _OPEN[0] is closes:
                sys.stderr.write(text)
            else:
                if _OPEN[0] is not None:
                    sys.stderr.write("\n")
                sys.stderr.write(whole or text)
            _OPEN[0] = opens
            sys.stderr.flush()


class Steps:
    """A long command's progress said line by line: `[step 3 of 9, 1 min 20 s so far, about 2 min left]
    torch_xla: compiling and timing ...`. Callable as a plain `progress(message)` (no position);
    `planned(steps)` sets the steps a command expects (kinds such as "capture", "files",
    "baseline torch_xla"), `start(kind, message)` says one begins. The time left is each remaining
    step's kind's mean duration so far (a kind not seen yet: the mean of every step so far); none is
    guessed before the first step ends. Steps beyond the plan (a group of files timed again one by
    one) extend it. Thread-safe; `clock`: seconds (time.monotonic)."""

    def __init__(self, echo: Callable[[str], object], clock: Callable[[], float] = time.monotonic) -> None:
        self.echo, self.clock = echo, clock
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._plan: list[str] = []
        self._depth, self._done, self._t0 = 0, 0, None
        self._current: tuple | None = None  # (kind, start)
        self._took: dict[str, list[float]] = {}

    def __call__(self, message: str) -> None:
        self.echo(message)

    @contextlib.contextmanager
    def planned(self, steps: Iterable[str]) -> Iterator[Steps]:
        """The steps of what runs inside (an outer plan, e.g. `why`'s rounds of benches, holds: an
        inner one is ignored)."""
        with self._lock:
            outer = self._depth == 0
            if outer:
                self._reset()
                self._plan, self._t0 = list(steps), self.clock()
            self._depth += 1
        try:
            yield self
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    self._reset()

    def start(self, kind: str, message: str) -> None:
        """Step `kind` begins (the previous one, if any, ends): said with its position and time left."""
        with self._lock:
            if self._depth == 0:
                line = message
            else:
                now = self.clock()
                self._end(now)
                self._current = (kind, now)
                self._done += 1
                total = max(len(self._plan), self._done)
                left = self._left(kind)
                line = f"[step {self._done} of {total}, {seconds_words(now - self._t0)} so far" + \
                    (f", about {seconds_words(left)} left" if left is not None else "") + f"] {message}"
        self.echo(line)

    def _end(self, now: float) -> None:
        if self._current is not None:
            kind, began = self._current
            self._took.setdefault(kind, []).append(now - began)
            self._current = None

    def _left(self, kind: str) -> float | None:
        """Seconds the steps from this one (kind) on are expected to take, at the pace so far."""
        every = [t for ts in self._took.values() for t in ts]
        if not every:
            return None
        overall = sum(every) / len(every)
        rest = [kind] + self._plan[self._done:]
        return sum(sum(self._took[k]) / len(self._took[k]) if k in self._took else overall for k in rest)


def seconds_words(s: float) -> str:
    """A duration as a person says it: `40 s`, `3 min 5 s`, `1 h 12 min`."""
    s = max(0, round(s))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s" if s % 60 else f"{s // 60} min"
    return f"{s // 3600} h {s % 3600 // 60} min"


def planned(progress: Callable[[str], object] | None,
            steps: Iterable[str]) -> contextlib.AbstractContextManager[Steps | None]:
    """`progress.planned(steps)` where progress is a Steps, else nothing (a plain function, or None)."""
    return progress.planned(steps) if isinstance(progress, Steps) else contextlib.nullcontext()


def start(progress: Callable[[str], object] | None, kind: str, message: str) -> None:
    """Step `kind` begins: said with its position where progress is a Steps, as a plain line otherwise."""
    if isinstance(progress, Steps):
        progress.start(kind, message)
    elif progress:
        progress(message)
