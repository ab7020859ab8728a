"""The adapter contract: what an adapter must define and return, checked before any export; its exceptions blamed on its own lines."""
from __future__ import annotations

import contextlib
import traceback
from pathlib import Path

from stackwars_ir.common.errors import StackwarsError

DOCS = "docs/adapters.md"
NOTES = ("nearest PyTorch names", "no PyTorch name is near")  # what stackwars-ir adds to an adapter's exception


class AdapterError(StackwarsError):
    """An adapter file breaks the contract, or its code raised: one line naming its file and line."""


def _where(entry) -> str:
    return entry.path or f"models/{entry.name}.py"


def adapter_path(entry) -> str:
    """The adapter file of a catalogue entry (a built-in model's under models/)."""
    return _where(entry)


def adapter_frames(entry, error: BaseException) -> list:
    """The traceback frames of `error` in the entry's adapter file, outermost first ([] if none)."""
    return _adapter_frames(error, _where(entry))


def require(entry, module, *names: str, why: str = "") -> None:
    """Each function `names` is defined by the adapter module, or one line saying which and how."""
    signatures = {"torch_model": "torch_model(size)", "inputs": "inputs(size, batch, seq, rng)",
                  "jax_model": "jax_model(size, weights)"}
    for name in names:
        if not callable(getattr(module, name, None)):
            fix = {"jax_model": "define jax_model(size, weights), the Flax NNX twin, or capture the PyTorch routes "
                                "alone with --framework torch"}.get(name, f"define {signatures.get(name, name)}")
            raise AdapterError(f"{_where(entry)}: the adapter defines no {signatures.get(name, name)}{why}",
                               fix=f"{fix} ({DOCS})")


def check_torch_model(entry, model) -> None:
    """torch_model(size) returned an nn.Module."""
    import torch

    if not isinstance(model, torch.nn.Module):
        raise AdapterError(f"{_where(entry)}: torch_model({{size}}) returned a {type(model).__name__}, "
                           "not a torch.nn.Module", fix=f"return the model itself, in eval mode ({DOCS})")


def _line(function) -> str:
    """`:N` for the line `function` is defined at, '' where that is not known."""
    import inspect

    try:
        return f":{inspect.getsourcelines(function)[1]}"
    except (OSError, TypeError):
        return ""


def check_inputs(entry, inputs, function=None) -> None:
    """inputs(...) returned a dict of numpy arrays by name, each of a kind the model can take (float32
    where floating: the weights are; integers or booleans; no empty array), named at inputs' line."""
    import numpy as np

    where = f"{_where(entry)}{_line(function) if function is not None else ''}"
    if not isinstance(inputs, dict) or not inputs or \
            not all(isinstance(k, str) and isinstance(v, np.ndarray) for k, v in inputs.items()):
        got = type(inputs).__name__ if not isinstance(inputs, dict) else \
            "a dict whose values are not all numpy arrays by name" if inputs else "an empty dict"
        raise AdapterError(f"{where}: inputs(size, batch, seq, rng) returned {got}",
                           fix=f"return {{name: numpy array}}, one entry per positional argument of forward ({DOCS})")
    for name, v in inputs.items():
        if v.dtype.kind == "f" and v.dtype != np.float32:
            fix = f"return it as float32 (`.astype(np.float32)`): the model's weights are float32 ({DOCS})"
        elif v.dtype.kind not in "fiub":
            fix = f"return floats as float32, ids as int64 or int32, masks as bool ({DOCS})"
        elif v.size == 0:
            fix = f"return at least one element per array (a --seq or --batch of 0?) ({DOCS})"
        else:
            continue
        raise AdapterError(f"{where}: inputs(size, batch, seq, rng) returned {name!r} as {v.dtype} "
                           f"{list(v.shape)}", fix=fix)


def refusal(entry, error: ValueError) -> AdapterError:
    """The adapter's own ValueError from inputs() (a size it does not take): its words, at its line;
    the fix points at what inputs() reads (--size, --batch, --seq), not at the adapter."""
    frame = _adapter_frame(error, _where(entry))
    at = f"{frame.filename}:{frame.lineno}: in {frame.name}()" if frame is not None else _where(entry)
    return AdapterError(f"{at}: {' '.join(str(error).split())[:300]}",
                        fix="give a --size, --batch or --seq this model takes (`stackwars-ir models` lists its sizes)")


def check_output(entry, output) -> None:
    """The model's forward returned one tensor: the exporters and the parity check compare one output."""
    import torch

    if isinstance(output, torch.Tensor):
        return
    what = type(output).__name__
    if hasattr(output, "last_hidden_state"):
        fix = ("return one tensor from forward: build the model with stackwars_ir.models._torch.positional(cls, "
               "config, lambda out: out.last_hidden_state), or wrap it in a module whose forward returns "
               "out.last_hidden_state")
    else:
        fix = "return one tensor from forward (wrap the model in a module that picks the output to compare)"
    raise AdapterError(f"{_where(entry)}: the model from torch_model(size) returns a {what} from forward, "
                       "not a tensor", fix=f"{fix} ({DOCS})")


def check_loss(entry, module, model, loss: str) -> None:
    """What the training loss reads exists: for "lm", the tied token embedding on both sides."""
    if loss != "lm":
        return
    head = getattr(module, "LM_HEAD", None)
    names = dict(model.named_parameters())
    if head is None or head not in names:
        said = f"LM_HEAD = {head!r} is no parameter of the model" if head is not None else "no LM_HEAD"
        raise AdapterError(f"{_where(entry)}: the 'lm' training loss needs the tied token embedding; the adapter "
                           f"has {said}", fix="set LM_HEAD to the embedding weight's name in the state dict "
                                              f"(e.g. 'wte.weight'), or set loss='mse' in ENTRY ({DOCS})")
    embeddings = getattr(model, "get_input_embeddings", None)
    weight = getattr(embeddings(), "weight", None) if callable(embeddings) else None
    if weight is None or weight is not names[head]:
        raise AdapterError(f"{_where(entry)}: the 'lm' training loss reads the head as model.get_input_embeddings()"
                           f".weight, which this model {'lacks' if weight is None else 'does not tie to ' + head}",
                           fix="build the model as a subclass of the transformers model (models._torch.positional) "
                               "so get_input_embeddings() is there, or define it; or set loss='mse' in ENTRY "
                               f"({DOCS})")


@contextlib.contextmanager
def blame(entry, what: str | None = None):
    """Any exception raised while the adapter's code runs becomes one line naming the adapter file
    and line (its deepest frame there). With `what` ("the model's forward"), an exception raised with
    no frame in the file is still the adapter's, named by the deepest frame it has; without, it passes."""
    try:
        yield
    except StackwarsError:
        raise
    except Exception as e:
        error = explain(entry, e, what)
        if error is e:
            raise
        raise error from e


def explain(entry, error: Exception, what: str | None = None) -> Exception:
    """The one-line AdapterError for an exception the adapter's code raised, or the exception itself."""
    if isinstance(error, StackwarsError):
        return error
    notes = "; ".join(n for n in getattr(error, "__notes__", ()) or () if n.startswith(NOTES))  # ours, not JAX's
    message = f"{type(error).__name__}: {' '.join(str(error).split())[:300]}" + (f"; {notes}" if notes else "")
    fix = f"correct the adapter ({DOCS} states what each function must define and return)"
    frames = _adapter_frames(error, _where(entry))
    if frames:
        frame = frames[-1]
        # The lines that called it in the same file, nearest first: where a bad argument (a prefix
        # misspelled where a helper is called) was written, when the helper's line is only where it failed.
        callers = [f"line {f.lineno} in {f.name}()" for f in reversed(frames[:-1])][:3]
        via = f" (called from {', from '.join(callers)})" if callers else ""
        return AdapterError(f"{frame.filename}:{frame.lineno}: in {frame.name}(): {message}{via}", fix=fix)
    if what is None:
        return error
    frames = traceback.extract_tb(error.__traceback__)
    at = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return AdapterError(f"{_where(entry)}: {what} raised {message}{at}", fix=fix)


def _adapter_frame(error: BaseException, path: str):
    """The deepest traceback frame in `path`, through the chain of causes; None if there is none."""
    frames = _adapter_frames(error, path)
    return frames[-1] if frames else None


def _adapter_frames(error: BaseException, path: str) -> list:
    """The traceback frames in `path`, outermost first, of the first error in the chain of causes
    that has any; [] if none has."""
    target = str(Path(path).resolve()) if path else None
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        frames = [f for f in traceback.extract_tb(error.__traceback__)
                  if target and str(Path(f.filename).resolve()) == target]
        if frames:
            return frames
        error = error.__cause__ or error.__context__
    return []


def nearest(name: str, known) -> list[str]:
    """The names of `known` nearest `name`: the same module's first, then the closest spellings."""
    import difflib

    known = sorted(known)
    module = name.rsplit(".", 1)[0] if "." in name else ""
    same = [k for k in known if module and k.rsplit(".", 1)[0] == module]
    return list(dict.fromkeys(same + difflib.get_close_matches(name, known, n=3, cutoff=0.6)))[:4]


def unknown_parameter(adapter, name: str, known) -> AdapterError:
    """A twin parameter with no PyTorch tensor of its name: the adapter file, the name, and the
    PyTorch names nearest it (the same module's first, then the closest spellings)."""
    known = sorted(known)
    near = nearest(name, known)
    where = getattr(adapter, "__file__", None) or "the adapter"
    said = f"; nearest: {', '.join(near)}" if near else f"; no PyTorch tensor is near it (first: {', '.join(known[:3])})"
    return AdapterError(f"{where}: the Flax twin's parameter {name!r} has no PyTorch tensor of that name{said}",
                        fix=f"name the NNX attribute after the PyTorch one (its module path and leaf) ({DOCS})")
