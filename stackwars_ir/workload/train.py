"""The training step every route captures: the loss, AdamW, the state it starts from, JAX's step.

The captured step is the second one: every route starts from the state PyTorch eager reaches after
one step on the seeded weights and batch (parameters, AdamW's exp_avg and exp_avg_sq, step 1), so
the second step is the steady one on every side (torch_xla builds a different graph for the first
step, when AdamW creates its state) and its bias correction is not the trivial one. Parity against
PyTorch eager's second step: the loss, the gradients and the AdamW rule (see GRAD_RTOL below).
"""
from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from .. import models
from ..common.errors import CaptureError, MissingExtra, StackwarsError
from .values import as_float64, float64_copy, jax_inputs, leaf_name

if TYPE_CHECKING:
    import jax
    import optax
    import torch

    from .request import Request

# The same AdamW on every side: torch.optim.AdamW's defaults but the learning rate, optax.adamw's names.
ADAMW = {"lr": 1e-3, "b1": 0.9, "b2": 0.999, "eps": 1e-8, "weight_decay": 0.01}
# Parity of a step, in two parts that do not amplify rounding:
# - the gradients, read back from the new exp_avg (g = (m_new - b1 m_old) / (1 - b1), exact), against
#   eager's, norm-wise over all parameters: ||g - g_eager|| <= GRAD_RTOL * ||g_eager||;
# - the AdamW rule, element by element, on the capture's own moments: new p = p (1 - lr wd)
#   - lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps), within RULE_ATOL.
# Not new parameters against eager's element by element: Adam divides by sqrt(v), so where the true
# gradient is zero (tiny MHA's key bias: softmax ignores it) each framework's rounding noise becomes
# an update of up to lr, a different one in each (measured: 6.5e-6 = 0.65 lr, JAX, torch_xla and
# torchax alike against eager). That difference is reported, not held to a tolerance.
GRAD_RTOL = 1e-3
RULE_ATOL = 1e-3 * ADAMW["lr"]


def loss_of(model_name: str) -> str:
    """The adapter's training loss ("lm" or "mse"); a one-line error for one without parameters."""

    loss = models.entry(model_name).loss
    if loss is None:
        raise StackwarsError(f"{model_name} has no parameters to train, so it has no training step",
                             fix=f"use --step forward, or one of: {', '.join(models.TRAINABLE)}")
    return loss


@dataclass(frozen=True)
class TrainState:
    """The state every route starts its captured step from, and PyTorch eager's result of that step."""

    loss: str
    params: dict = field(repr=False)  # trainable tensors, after eager step 1
    buffers: dict = field(repr=False)  # everything else the model reads (held constant)
    exp_avg: dict = field(repr=False)
    exp_avg_sq: dict = field(repr=False)
    step: int
    inputs: dict = field(repr=False)  # the model's inputs, plus "target" for the mse loss
    ref_loss: float
    ref_params: dict = field(repr=False)  # after eager step 2
    ref_exp_avg: dict = field(repr=False)
    ref_exp_avg_sq: dict = field(repr=False)
    first_loss: float = float("nan")  # eager's step 1 from the seeded weights (native baselines start there)
    grads64: dict | None = field(default=None, repr=False)  # the float64 model's gradients at this state
    unmeasured: str = ""  # why there are none

    def values(self) -> dict[str, np.ndarray]:
        """Argument name -> array, for every argument kind a training capture has."""
        out = {**self.params, **self.buffers}
        out.update({f"exp_avg.{k}": v for k, v in self.exp_avg.items()})
        out.update({f"exp_avg_sq.{k}": v for k, v in self.exp_avg_sq.items()})
        out["step"] = np.asarray(self.step)
        return out


def torch_loss(model: torch.nn.Module, loss: str, tensors: list, target: torch.Tensor | None,
               forward: Callable[..., torch.Tensor] | None = None) -> torch.Tensor:
    """The loss on the PyTorch side: LM cross-entropy with the tied head, or mean squared error."""
    import torch

    out = (forward or model)(*tensors)
    if loss == "lm":
        ids = tensors[0]
        logits = out @ model.get_input_embeddings().weight.T
        return torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    return ((out - target) ** 2).mean()


def optimizer(params: Iterable[torch.nn.Parameter]) -> torch.optim.AdamW:
    """torch.optim.AdamW with ADAMW's hyper-parameters (the PyTorch side of every route)."""
    import torch

    a = ADAMW
    return torch.optim.AdamW(params, lr=a["lr"], betas=(a["b1"], a["b2"]), eps=a["eps"],
                             weight_decay=a["weight_decay"])


def register_torch_xla() -> None:
    """Import torch_xla before PyTorch's first backward in this process.

    PyTorch's autograd engine sizes its per-device queues once, at the first backward; a device
    whose runtime starts later (torch_xla's) fails every backward with an internal assert
    (measured here: importing torch_xla is not enough, its runtime must have started).
    """
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    try:
        import torch_xla
    except Exception as e:
        raise MissingExtra("torch_xla", e) from e
    torch_xla.device()  # the runtime starts, so the engine counts its device


def train_state(req: Request, model: torch.nn.Module, inputs: dict[str, np.ndarray],
                reference: np.ndarray) -> TrainState:
    """Two PyTorch eager steps on a copy of `model`: the state after the first, the result of the second."""
    import torch

    loss = loss_of(req.model)
    inputs = dict(inputs)
    if loss == "mse":
        rng = np.random.default_rng(req.seed + 2)
        inputs["target"] = rng.standard_normal(reference.shape).astype(np.float32)
    m = copy.deepcopy(model)
    trainable = dict(m.named_parameters())
    opt = optimizer(list(trainable.values()))
    args = [torch.from_numpy(v) for k, v in inputs.items() if k != "target"]
    target = torch.from_numpy(inputs["target"]) if "target" in inputs else None

    def step():
        opt.zero_grad(set_to_none=True)
        value = torch_loss(m, loss, args, target)
        value.backward()
        opt.step()
        return float(value.detach())

    first_loss = step()
    # A parameter the loss never reaches (a pooler under the last hidden state, a mask token) gets no
    # gradient: AdamW skips it, so it is held constant, a buffer of the step on every route.
    trainable = {k: p for k, p in trainable.items() if "exp_avg" in opt.state.get(p, {})}
    snap = {k: v.detach().numpy().copy() for k, v in trainable.items()}
    state = {k: opt.state[p] for k, p in trainable.items()}
    exp_avg = {k: s["exp_avg"].numpy().copy() for k, s in state.items()}
    exp_avg_sq = {k: s["exp_avg_sq"].numpy().copy() for k, s in state.items()}
    tensors = {**dict(m.named_parameters()), **dict(m.named_buffers())}
    buffers = {k: v.detach().numpy().copy() for k, v in sorted(tensors.items()) if k not in trainable}
    grads64, why = float64_gradients(m, loss, inputs, trainable)
    ref_loss = step()
    after = {k: v.detach().numpy().copy() for k, v in trainable.items()}
    ref_m = {k: s["exp_avg"].numpy().copy() for k, s in state.items()}
    ref_v = {k: s["exp_avg_sq"].numpy().copy() for k, s in state.items()}
    return TrainState(loss, dict(sorted(snap.items())), buffers, exp_avg, exp_avg_sq, 1, inputs, ref_loss, after,
                      ref_m, ref_v, first_loss, grads64, why)


def float64_gradients(model: torch.nn.Module, loss: str, inputs: dict, trainable: dict) -> tuple[dict | None, str]:
    """The gradients of the step's loss at `model`'s state, computed by its float64 copy (parity's
    measure of float32's own rounding in a step), or why there are none."""
    import torch

    m64, why = float64_copy(model)
    if m64 is None:
        return None, why
    try:
        args = as_float64({k: v for k, v in inputs.items() if k != "target"})
        target = torch.from_numpy(inputs["target"].astype(np.float64)) if "target" in inputs else None
        params = dict(m64.named_parameters())
        m64.zero_grad(set_to_none=True)  # the copy carries step 1's gradients
        torch_loss(m64, loss, args, target).backward()
        return {k: params[k].grad.detach().numpy().copy() for k in trainable}, ""
    except Exception as e:  # noqa: BLE001 - any failure only costs the float64 comparison
        first = (str(e).strip().splitlines() or [""])[0][:160]
        return None, f"the model does not run in float64: {type(e).__name__}: {first}"


# ---------------------------------------------------------------------------------------------------
# JAX and torchax: a loss function of (params, buffers, inputs), differentiated and updated by optax.


def adamw_step(loss_fn: Callable[[dict, dict, dict], jax.Array]
               ) -> tuple[optax.GradientTransformation, Callable[[dict, optax.OptState, dict, dict], tuple]]:
    """step(params, opt_state, buffers, inputs) -> (loss, new params, new opt_state), optax's AdamW."""
    import jax
    import optax

    a = ADAMW
    tx = optax.adamw(a["lr"], b1=a["b1"], b2=a["b2"], eps=a["eps"], weight_decay=a["weight_decay"])

    def step(params, opt_state, buffers, inputs):
        value, grads = jax.value_and_grad(loss_fn)(params, buffers, inputs)
        updates, opt_state = tx.update(grads, opt_state, params)
        return value, optax.apply_updates(params, updates), opt_state

    return tx, step


def adamw_state(tx: optax.GradientTransformation, state: TrainState) -> optax.OptState:
    """optax's AdamW state holding the eager state after step 1 (count 1, mu, nu)."""
    import jax
    import jax.numpy as jnp

    params = {k: jnp.asarray(v) for k, v in state.params.items()}
    init = tx.init(params)

    def fill(path, leaf):
        names = [getattr(k, "name", None) for k in path]
        key = path[-1].key if isinstance(path[-1], jax.tree_util.DictKey) else None
        if "mu" in names:
            return jnp.asarray(state.exp_avg[key])
        if "nu" in names:
            return jnp.asarray(state.exp_avg_sq[key])
        if "count" in names:
            return jnp.asarray(state.step, dtype=leaf.dtype)
        return leaf

    return jax.tree_util.tree_map_with_path(fill, init)


def _leaf_kind_name(top: str, path) -> tuple[str, str]:
    """(kind, name) of one leaf of the step's (params, opt_state, buffers, inputs) arguments or outputs."""
    import jax

    key = path[-1].key if path and isinstance(path[-1], jax.tree_util.DictKey) else None
    if top == "params":
        return "parameter", key
    if top == "buffers":
        return "buffer", key
    if top == "inputs":
        return "input", key
    names = [getattr(k, "name", None) for k in path]
    if "mu" in names:
        return "optimizer", f"exp_avg.{key}"
    if "nu" in names:
        return "optimizer", f"exp_avg_sq.{key}"
    if "count" in names:
        return "optimizer", "step"
    raise CaptureError(f"unexpected optax state leaf {jax.tree_util.keystr(path)}",
                       fix="report this: optax's AdamW state changed layout")


def named_leaves(tops: list[tuple[str, object]]) -> list[tuple[str, str, object]]:
    import jax

    out = []
    for top, tree in tops:
        if top == "loss":
            out.append(("loss", "loss", tree))
            continue
        for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
            kind, name = _leaf_kind_name(top, path)
            out.append((kind, name, leaf))
    return out


def jax_step(adapter: ModuleType, size: str, state: TrainState,
             weights: dict | None = None) -> tuple[Callable[[dict, optax.OptState, dict, dict], tuple], dict]:
    """The NNX twin's training step and its arguments: from `state` (the captured step 2), or from
    `weights` with a fresh optimizer state (a user's first step: the native jax.jit baseline)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    abstract = any(isinstance(v, jax.ShapeDtypeStruct) for v in state.params.values())
    if abstract:  # shapes only (capture/abstract.py): the twin is built under nnx.eval_shape
        model = nnx.eval_shape(lambda w: adapter.jax_model(size, w), {**state.params, **state.buffers})
    else:
        model = adapter.jax_model(size, {**state.params, **state.buffers})
    graphdef, nstate = nnx.split(model)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(nstate)
    names = [leaf_name(p) for p, _ in leaves]
    head = getattr(adapter, "LM_HEAD", None)

    def loss_fn(params, buffers, inputs):
        merged = jax.tree_util.tree_unflatten(treedef, [params[n] if n in params else buffers[n] for n in names])
        xs = [inputs[k] for k in state.inputs if k != "target"]  # jax.jit hands dicts back key-sorted
        out = nnx.merge(graphdef, merged)(*xs)
        if state.loss == "lm":
            logits = out @ params[head].T
            logp = jax.nn.log_softmax(logits[:, :-1], axis=-1)
            return -jnp.take_along_axis(logp, xs[0][:, 1:, None], axis=-1).mean()
        return jnp.mean((out - inputs["target"]) ** 2)

    tx, step = adamw_step(loss_fn)
    missing = [n for n in names if n not in state.params and n not in state.buffers]
    if missing:
        from ..models._contract import unknown_parameter

        raise unknown_parameter(adapter, missing[0], [*state.params, *state.buffers])
    if abstract:  # a fresh AdamW state's shapes: the step is the same whichever step it is
        params = dict(state.params)
        opt_state = jax.eval_shape(tx.init, params)
    elif weights is None:
        params = {k: jnp.asarray(v) for k, v in state.params.items()}
        opt_state = adamw_state(tx, state)
    else:
        params = {k: jnp.asarray(weights[k]) for k in state.params}
        opt_state = tx.init(params)
    args = {"params": params, "opt_state": opt_state,
            "buffers": {k: v if abstract else jnp.asarray(v) for k, v in state.buffers.items() if k in names},
            "inputs": {k: jnp.asarray(v) for k, v in jax_inputs(state.inputs).items()}}
    return step, args


class OpNames:
    """Names each op of the lazy training step after the module and phase it belongs to, in JAX's
    scope notation, which ir.locations reads: `jvp(h.0.attn)/aten__addmm` for the forward of
    h.0.attn, `transpose(jvp(h.0.attn))/aten__mm` for its backward; the loss is `jvp()`, and the
    optimizer's ops keep torch_xla's own names (no module, no phase: the update).

    The forward's module comes from module hooks (a stack of the modules running); the backward's
    from the autograd node running (torch._C._current_autograd_node), each node having been
    claimed, when its module's forward returned, by the innermost module that created it. The name
    goes on each op's output with torch_xla's _set_xla_custom_op_name_prefix (call-stack depth 1:
    depth 0 breaks torch_xla 2.9's lowering under XLA_HLO_DEBUG). Nothing the step computes changes;
    torch_xla drops the name where its own scope is set (`aten__mul.1`), leaving such ops unnamed.

    A module's forward that runs during the backward is a rematerialization (a checkpointed layer
    recomputing its activations): its ops are named `transpose(jvp(h.0.attn.rematted_computation))/`,
    the scope word JAX's checkpoint gives the ops it recomputes. With `phases=False` (a forward
    capture) the names are the module paths alone: `h.0.attn/aten__addmm`.
    """

    def __init__(self, model: torch.nn.Module, phases: bool = True) -> None:
        self.phases = phases
        self.paths = {mod: name for name, mod in model.named_modules()}
        self.stack = []  # (path, the autograd nodes of the call's inputs)
        self.node_path = {}  # autograd node -> module path
        self.hooks = []
        self.mode = None
        self.backward = False  # set by the loop when loss.backward() begins

    def __deepcopy__(self, memo):
        # A module copied while its hooks are ours (scan_layers copies the layer it traces) keeps
        # this namer: a copy would drag the autograd nodes it has claimed into the copy.
        return self

    def __enter__(self):
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        for mod in self.paths:  # each module's own hooks: the global pre-hook does not see kwargs
            self.hooks.append(mod.register_forward_pre_hook(self._pre, with_kwargs=True))
            self.hooks.append(mod.register_forward_hook(self._post))
        names = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                prefix = names.prefix()
                if prefix:
                    names.label(out, prefix)
                return out

        self.mode = Mode()
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        self.mode.__exit__(*exc)
        for h in self.hooks:
            h.remove()
        self.hooks.clear()
        self.node_path.clear()
        self.stack.clear()

    def _pre(self, mod, args, kwargs):
        import torch

        path = self.paths.get(mod)
        if path is None:
            return None
        path = getattr(mod, "scanned_as", None) or path  # a scanned list's loop runs in its first layer's call
        inputs = [t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)]
        self.stack.append((path, {t.grad_fn for t in inputs if t.grad_fn is not None}))
        return None

    def _post(self, mod, args, output):
        import torch

        if self.paths.get(mod) is None or not self.stack:
            return None
        path, boundary = self.stack.pop()
        outs = output if isinstance(output, (tuple, list)) else \
            (list(output.values()) if isinstance(output, dict) else [output])
        todo = [t.grad_fn for t in outs if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        while todo:  # this call's autograd nodes: back from its outputs to its inputs
            node = todo.pop()
            if node is None or node in self.node_path or node in boundary:
                continue
            self.node_path[node] = path
            todo.extend(fn for fn, _ in node.next_functions if fn is not None)
        return None

    def prefix(self) -> str:
        import torch

        if self.stack:
            path = self.stack[-1][0]
            if not self.phases:
                return f"{path}/"
            return f"transpose(jvp({path}.rematted_computation))/" if self.backward else f"jvp({path})/"
        if not self.phases:
            return ""
        node = torch._C._current_autograd_node()
        if node is not None:
            return f"transpose(jvp({self.node_path.get(node, '')}))/"
        # Outside every module and node: the loss after the model's forward (its head, log_softmax,
        # nll_loss), or the backward's seed. Left unnamed, the loss's ops were counted in the update,
        # and two took a backward name during loss.backward() (measured on GPT-2 tiny: the head's
        # aten__mm and aten__log_softmax, unnamed after the forward, `transpose(jvp())/` after it).
        return "transpose(jvp())/" if self.backward else "jvp()/"

    def label(self, out: object, prefix: str) -> None:
        import torch
        import torch_xla

        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(t, torch.Tensor) and t.device.type == "xla":
                # An op that returns its input as it is (detach, a copy) leaves the tensor on the
                # input's device data: that is a function argument, not an op of this module.
                ir = torch_xla._XLAC._get_xla_tensor_debug_info(t)
                if "] xla::device_data," in ir:
                    continue
                try:
                    torch_xla._XLAC._set_xla_custom_op_name_prefix(t, prefix, 1)
                except RuntimeError:  # a tensor of a trace, not a lazy one: scan_layers tracing its layer
                    continue
