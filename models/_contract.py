"""The adapter contract: what an adapter must define and return, checked before any export; its exceptions blamed on its own lines."""
from __future__ import annotations

import contextlib
import traceback
from pathlib import Path

from stackwars_ir.errors import StackwarsError

DOCS = "docs/adapters.md"


class AdapterError(StackwarsError):
    """An adapter file breaks the contract, or its code raised: one line naming its file and line."""


def _where(entry) -> str:
    return entry.path or f"models/{entry.name}.py"


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


def check_inputs(entry, inputs) -> None:
    """inputs(...) returned a dict of numpy arrays by name."""
    import numpy as np

    if not isinstance(inputs, dict) or not inputs or \
            not all(isinstance(k, str) and isinstance(v, np.ndarray) for k, v in inputs.items()):
        got = type(inputs).__name__ if not isinstance(inputs, dict) else \
            "a dict whose values are not all numpy arrays by name" if inputs else "an empty dict"
        raise AdapterError(f"{_where(entry)}: inputs(size, batch, seq, rng) returned {got}",
                           fix=f"return {{name: numpy array}}, one entry per positional argument of forward ({DOCS})")


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
    message = f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
    fix = f"correct the adapter ({DOCS} states what each function must define and return)"
    frame = _adapter_frame(error, _where(entry))
    if frame is not None:
        return AdapterError(f"{frame.filename}:{frame.lineno}: in {frame.name}(): {message}", fix=fix)
    if what is None:
        return error
    frames = traceback.extract_tb(error.__traceback__)
    at = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return AdapterError(f"{_where(entry)}: {what} raised {message}{at}", fix=fix)


def _adapter_frame(error: BaseException, path: str):
    """The deepest traceback frame in `path`, through the chain of causes; None if there is none."""
    target = str(Path(path).resolve()) if path else None
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        frames = [f for f in traceback.extract_tb(error.__traceback__)
                  if target and str(Path(f.filename).resolve()) == target]
        if frames:
            return frames[-1]
        error = error.__cause__ or error.__context__
    return None
