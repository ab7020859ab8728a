"""Segmentation: cut a module's ops into semantic blocks (embedding, norm, attention, MLP, conv, ...).

Two sources of evidence. Provenance: an op's module path (`h.3.attn.c_attn`) names its layer
(the numbers in it) and its role (the words in it). Structure, for files without locations:
anchor ops (gather from a weight table, batch_norm/rsqrt, exponential, tanh/erf/logistic,
convolution, reduce_window, dot_general) claim the ops nearest to them in the dataflow graph,
and layers are counted by attention (or, failing that, by the anchors in program order).
"""
from __future__ import annotations

import dataclasses
import functools
import re
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

from ..ir.model import Module, Op, callees
from ..ir.scopes import (AUTO_PROVENANCE, CALL_WORDS, LOOP_WORDS, REMAT, REMAT_WORDS,  # noqa: F401 (diff's API)
                         loop_scoped, names_a_module, path_coverage)
from ..ir.scopes import phases as find_phases

ROLES = ("embedding", "rotary", "shared", "norm", "attention", "mlp", "residual", "conv", "batchnorm", "pool",
         "head", "optimizer", "other")
# Roles whose blocks align layer by layer; the others align by their order in the program.
LAYERED = ("norm", "attention", "mlp", "residual")
# A training step's phases, read from JAX's transformation scopes (ir.locations.provenance):
# forward (under jvp), backward (under transpose: the gradient of the block it names), and the
# optimizer update (ops of the step outside both, with no module path).
PHASES = ("forward", "backward", "update")
PHASE_LABEL = {"backward": "(backward)", "update": "(update)"}


@dataclass(frozen=True)
class Block:
    """A run of ops that implement one component, e.g. layer 3's attention."""

    role: str
    layer: tuple  # layer numbers (GPT-2 h.3 -> (3,)); () at the top level
    ordinal: int  # k-th block of this role in this layer (ln_1 -> 0, ln_2 -> 1)
    name: str  # module path, or a made-up name in structural mode ("layer 3 attention")
    ops: tuple = field(repr=False)  # (Op, path) in program order
    phase: str = ""  # training step: "forward", "backward" (the gradient of that block), "update" (optimizer)
    loop: int = -1  # the counted loop (ir.loops, k-th in program order) whose body runs it; -1: none
    trips: int = 0  # that loop's trip count: the block runs once per trip (a scanned layer); 0: not in a loop

    @property
    def key(self) -> tuple:
        return (self.layer, self.role, self.ordinal) + ((self.phase,) if self.phase else ()) + \
            ((("loop", self.loop),) if self.loop >= 0 else ())

    @property
    def label(self) -> str:
        where = ".".join(map(str, self.layer))
        base = f"{self.role}[{where}]#{self.ordinal}" if where else f"{self.role}#{self.ordinal}"
        if self.trips:
            base += f" (scanned x{self.trips})"
        return f"{base} {PHASE_LABEL[self.phase]}" if self.phase in PHASE_LABEL else base

    def histogram(self) -> Counter:
        return Counter(op.name for op, _ in self.ops if not op.name.endswith("return"))


@dataclass(frozen=True)
class Segmentation:
    """A module cut into blocks; `mode` says which evidence was used."""

    module: Module = field(repr=False)
    mode: str  # "provenance" | "structure"
    blocks: tuple
    coverage: float  # share of ops whose location names a module path
    reason: str = ""  # why this mode: asked for, or auto's choice from the coverage


def segment(module: Module, mode: str = "auto", roles: tuple = ()) -> Segmentation:
    """Blocks of the entry function (calls inlined). mode: auto, provenance or structure. `roles`:
    the adapter's own (word, role) pairs for module-path words the generic table does not know."""
    items = [(op, path) for op, path in module.inlined if not op.name.endswith("return")]
    phases = find_phases(module)
    # A training step's optimizer and a loop's own plumbing (JAX's `while.body`: each trip's slice of
    # the stacked parameters) name no module by nature: they count neither way (ir/scopes.py).
    coverage = path_coverage(module)
    use = mode if mode != "auto" else ("provenance" if coverage >= AUTO_PROVENANCE else "structure")
    reason = (f"--mode {mode}" if mode != "auto" else
              f"auto: {coverage:.0%} of ops carry a module path ({'at least' if use == 'provenance' else 'under'} "
              f"{AUTO_PROVENANCE:.0%})")
    loops = _loops(module)
    if use == "provenance":
        blocks = _split_coarse(module, _split_shared(module, _by_provenance(items, phases, roles, loops)))
        if phases and loops:
            blocks = _backward_by_saved(module, blocks)
    else:
        blocks = _loops_by_structure(module, _by_structure(module, items, layered=_scans_layers(module, loops)), loops)
    blocks = _embeddings_by_size(module, blocks)
    return Segmentation(module, use, tuple(blocks), round(coverage, 4), reason)


def _loops(module: Module) -> dict:
    """id(op) -> (k, trips) of the counted loop whose body runs it (ir.loops.loop_context)."""
    if not any(loop.counted for loop in module.loops.values()):
        return {}
    from ..ir.loops import loop_context

    return {id(op): ctx for (op, _), ctx in zip(module.inlined, loop_context(module)) if ctx is not None}


def _embeddings_by_size(module: Module, blocks: list) -> list:
    """Number embedding blocks by table size, largest first (token, position, token type), so
    they pair up whatever order an exporter printed them in."""
    def table(b: Block) -> int:
        sizes = [module.values[op.operands[0]].type.numel or 0 for op, _ in b.ops
                 if op.name in ("stablehlo.gather", "func.call") and op.operands]
        return max(sizes, default=0)

    renumber = {}
    for phase in {b.phase for b in blocks}:  # a training step numbers each phase's embeddings alike
        emb = sorted((b for b in blocks if b.role == "embedding" and not b.layer and b.phase == phase),
                     key=lambda b: (-table(b), b.ordinal))
        renumber.update({id(b): i for i, b in enumerate(emb)})
    return [dataclasses.replace(b, ordinal=renumber[id(b)]) if id(b) in renumber else b for b in blocks]


# ---- provenance --------------------------------------------------------------------------

_NUMBER = re.compile(r"^(?:[A-Za-z_]*?_)?(\d+)$")  # "3", "h_3", "layers_12"


def _role_of(word: str) -> str | None:
    w = word.lower()
    if w in ("bn", "batchnorm", "batch_norm", "normalization") or w.startswith("batchnorm"):
        return "batchnorm"
    if "norm" in w or w in ("ln", "ln_1", "ln_2", "ln_f") or re.fullmatch(r"ln_?\w*", w):
        return "norm"
    if "rotary" in w or w in ("rope", "rotary_emb", "freqs_cis"):  # rotary position tables (LLaMA), before "embed"
        return "rotary"
    if ("embed" in w and w != "embedder") or w in ("wte", "wpe", "tok_embeddings"):
        return "embedding"
    if "attn" in w or "attention" in w or w in (
            "self", "query", "key", "value", "q_proj", "k_proj", "v_proj", "o_proj", "out_proj", "qkv"):
        return "attention"
    if w in ("mlp", "ffn", "feed_forward", "feedforward", "intermediate", "c_fc", "fc1", "fc2", "fc_in",
             "fc_out", "up_proj", "down_proj", "gate_proj", "wi", "wo", "act", "act_fn", "activation_fn"):
        return "mlp"
    if "conv" in w:
        return "conv"
    if "pool" in w:
        return "pool"
    if w in ("lm_head", "head", "classifier", "score"):
        return "head"
    return None


@functools.lru_cache(maxsize=65536)
def classify(path: str, roles: tuple = ()) -> tuple[tuple, str, str]:
    """(layer numbers, role, instance path) of a module path; `roles` (word, role) pairs are the
    adapter's words, consulted innermost first where no generic word names a role."""
    if not path:
        return (), "other", ""
    parts = path.split(".")
    numbers = [(i, int(m.group(1))) for i, p in enumerate(parts) if (m := _NUMBER.match(p))]
    role, at = None, -1
    for i in range(len(parts) - 1, -1, -1):  # the innermost word that names a role wins
        role = _role_of(parts[i])
        if role:
            at = i
            break
    if roles:
        # The adapter's own word wins where no generic word names a role, and over a generic attention
        # or MLP word inside it (`token_mix.fc1`: the user named the module; `fc1` only guesses its
        # block); not over one outside it (BERT's `attention.output` is the attention's, though
        # "output" alone is its MLP's), nor over a norm or embedding inside it (`output.LayerNorm`).
        own = dict(roles)
        mine = next((i for i in range(len(parts) - 1, -1, -1) if parts[i] in own), -1)
        if mine >= 0 and (role is None or (mine < at and role in ("attention", "mlp"))):
            role, at = own[parts[mine]], mine
    if role is None:
        if numbers:
            return tuple(n for _, n in numbers), "residual", ".".join(parts[:numbers[-1][0] + 1])
        else:
            return (), "other", path
    layer = tuple(n for i, n in numbers if i < at)
    if role in ("attention", "mlp"):  # one block per layer: widen to the outermost such word
        while at > 0 and (_role_of(parts[at - 1]) == role or parts[at - 1] in ("output",)):
            at -= 1
        # ... unless the layer names the sub-module that holds it: a word of the user's own between the
        # layer number and the role's word (a Mixer's `token_mix` and `channel_mix`, both of fc1, act,
        # fc2) makes a block of its own, named after it.
        last = max((i for i, _ in numbers if i < at), default=-1)
        named = [i for i in range(last + 1, at) if _role_of(parts[i]) is None and parts[i] not in SCAFFOLD
                 and parts[i] not in dict(roles)]
        if last >= 0 and named:
            return layer, role, ".".join(parts[:named[0] + 1])
    return layer, role, ".".join(parts[:at + 1])


# Words between a layer's number and its attention or MLP that name no sub-module of the user's.
SCAFFOLD = frozenset({"output", "closed_call", "eval_jaxpr", "checkpoint", "remat", "rematted_computation", "while",
                      "body"})


def named_module(layer: tuple, role: str, instance: str, roles: tuple = ()) -> bool:
    """Whether classify's instance for an attention or MLP is a sub-module the user named (its last
    word is no role word, generic or the adapter's), so that it is a block of its own, not the
    layer's one block of that role."""
    word = instance.rsplit(".", 1)[-1]
    return bool(layer) and role in ("attention", "mlp") and _role_of(word) is None and \
        word not in dict(roles) and word not in SCAFFOLD and not _NUMBER.match(word)


_CONTROL = frozenset({"stablehlo.while", "stablehlo.case", "stablehlo.if"})


def _fill_paths(items: list, roles: tuple = ()) -> list:
    """Ops without a path (constants, helper bodies) take the path of their users when those
    agree on the block; an op feeding several layers (a shared mask, say) stays unattributed. An op
    whose results only the function's return reads (the last layer's residual add, which torch_xla
    once left without a location) takes the path of the block its producers agree on, or
    of the layer that holds them all (the residual of the attention and MLP it adds up)."""
    users: dict = defaultdict(set)
    out = list(items)
    read = set()  # values some op other than a return reads
    unread = set()  # ops whose results only a return reads
    for i in range(len(out) - 1, -1, -1):
        op, path = out[i]
        if not path and op.name not in _CONTROL:  # a loop is no op of the block that reads its result
            found = {p for vid in op.results for p in users.get(vid, ())}
            blocks = {classify(p, roles)[:2] for p in found}
            if len(blocks) == 1:
                path = min(found)
            elif not any(vid in read for vid in op.results):
                unread.add(i)
            out[i] = (op, path)
        if not op.name.endswith("return"):
            read.update(op.operands)
        if path:
            for vid in op.operands:
                users[vid].add(path)
    made: dict = {}
    for i, (op, path) in enumerate(out):
        if i in unread and op.operands:
            found = sorted({made[vid] for vid in op.operands if vid in made})
            path = _shared_block(found, roles)
            out[i] = (op, path)
        if path:
            for vid in op.results:
                made[vid] = path
    return out


def _shared_block(paths: list, roles: tuple) -> str:
    """The path of the block all `paths` fall in: theirs where they are one block's, else the layer
    that holds them all (its residual), else "" (a value made from several layers stays unattributed)."""
    if not paths:
        return ""
    if len({classify(p, roles)[:2] for p in paths}) == 1:
        return paths[0]
    parts = [p.split(".") for p in paths]
    common = []
    for words in zip(*parts):
        if len(set(words)) > 1:
            break
        common.append(words[0])
    prefix = ".".join(common)
    return prefix if prefix and classify(prefix, roles)[0] else ""


_WEIGHT_VIEWS = frozenset({"stablehlo.transpose", "stablehlo.reshape", "stablehlo.convert"})


def _bias_add(op, out: list, producer: dict, moved: dict) -> tuple | None:
    """(the moved dot_general's value, the index in `out` of the bias) where `op` adds a bias (a
    broadcast function argument) to the result of a dot_general given another path (`moved`); else None."""
    if op.name != "stablehlo.add" or len(op.operands) != 2:
        return None
    dot = next((v for v in op.operands if v in moved), None)
    other = op.operands[1] if dot == op.operands[0] else op.operands[0]
    k = producer.get(other)
    bias = out[k][0] if k is not None else None
    if dot is None or bias is None or bias.name != "stablehlo.broadcast_in_dim" or not bias.operands \
            or bias.operands[0] in producer:
        return None
    return dot, k


def _pathless_linears(items: list) -> list:
    """A dot_general or convolution that carries no path, whose weight (an argument, seen through a
    transpose or reshape) does: the weight's module's (torch_xla leaves a model's last Linear, its
    `head`, with only the weight's transpose named), and so is the add of its bias (a broadcast
    argument) to it. Ops without a path are filled from their users next (_fill_paths)."""
    out, producer, moved = list(items), {}, {}
    for i, (op, path) in enumerate(out):
        if not path and op.name in ("stablehlo.dot_general", "stablehlo.convolution"):
            views = [out[producer[v]] for v in op.operands if v in producer]
            named = [p for view, p in views if p and view.name in _WEIGHT_VIEWS and view.operands
                     and view.operands[0] not in producer]
            if named:
                out[i] = (op, named[-1])
                moved[op.results[0]] = named[-1]
        elif not path and (found := _bias_add(op, out, producer, moved)) and not out[found[1]][1]:
            dot, k = found
            out[i], out[k] = (op, moved[dot]), (out[k][0], moved[dot])
            moved[op.results[0]] = moved[dot]
        for r in op.results:
            producer[r] = i
    return out


def _mlp_linears(items: list, roles: tuple = ()) -> list:
    """A Linear whose ops carry the path of the layer that calls it, not its own (torch_xla names
    OPT's fc2 `layers.0`, where its fc1 is `layers.0.fc1`) is the MLP's when an operand comes from the
    layer's MLP: the dot_general, then the add of its bias (a broadcast function argument) with it."""
    out, producer, moved = list(items), {}, {}
    for i, (op, path) in enumerate(out):
        layer, role, _ = classify(path, roles) if path else ((), "other", "")
        if role == "residual" and op.name == "stablehlo.dot_general":
            source = [out[producer[v]][1] for v in op.operands if v in producer]
            mlp = [p for p in source if p and classify(p, roles)[:2] == (layer, "mlp")]
            if mlp:  # the weight's path where it has one (the rhs, last): `layers.0.fc2`
                out[i] = (op, mlp[-1])
                moved[op.results[0]] = mlp[-1]
        elif role == "residual" and (found := _bias_add(op, out, producer, moved)):
            dot, k = found
            out[i], out[k] = (op, moved[dot]), (out[k][0], moved[dot])
        for r in op.results:
            producer[r] = i
    return out


def _by_provenance(items: list, phases: dict | None = None, roles: tuple = (), loops: dict | None = None) -> list[Block]:
    """Blocks keyed by (layer, role, instance); in a training step also by phase, so layer 3's
    attention forward, its backward and the optimizer's update stay three blocks; in a counted
    loop's body also by the loop (`loops`: id(op) -> (k, trips)), so a scanned layer's attention is
    a block that runs once per trip, and the layer's own ops outside its submodules (a path without
    a role, as `layers` of Flax's nn.scan) its residual, as an unrolled layer's are."""
    loops = loops or {}
    if phases is not None:
        parts = []
        for phase in PHASES:
            want = "" if phase == "update" else phase
            # "update": outside jvp and transpose, the optimizer (and the loss's glue)
            mine = [(op, path) for op, path in items if phases.get(id(op), "") == want]
            if phase == "backward":
                # Gradients run last layer first: number blocks from the end, so layer 3's second
                # norm backward is `norm[3]#1 (backward)`, the gradient of `norm[3]#1`.
                blocks = [dataclasses.replace(b, ops=tuple(reversed(b.ops)))
                          for b in reversed(_by_provenance(list(reversed(mine)), roles=roles, loops=loops))]
            else:
                blocks = _by_provenance(mine, roles=roles, loops=loops)
            parts += [dataclasses.replace(b, role=b.role if phase != "update" or b.layer or b.role != "other"
                                          else "optimizer", phase=phase) for b in blocks]
        return _numbered_as_forward(parts)
    items = _mlp_linears(_fill_paths(_pathless_linears([(op, _body_path(path)) for op, path in items]), roles), roles)
    groups: dict = {}
    order: list = []
    instances: dict = defaultdict(list)
    for op, path in items:
        layer, role, instance = classify(_unscoped(path), roles)
        loop = loops.get(id(op))
        if loop is not None and role == "other" and not op.path and op.name in _PLUMBING:
            instance = "(loop plumbing)"  # torch_xla's: each trip's slices and tuple, as JAX's `while.body`
        elif loop is not None and role == "other" and not LOOP_WORDS & set(path.split(".")):
            # the layer's own ops, or a body no location names (torch_xla's scan): split by structure below
            role, instance = "residual", instance or "(loop body)"
        if role in ("attention", "mlp", "residual") and not named_module(layer, role, instance, roles):
            instance = f"{layer}:{role}"
        seen = instances[(loop, layer, role)]
        if instance not in seen:
            seen.append(instance)
        key = (loop, layer, role, seen.index(instance))
        if key not in groups:
            groups[key] = (instance, [])
            order.append(key)
        groups[key][1].append((op, path))
    blocks = []
    for key in order:
        instance, ops = groups[key]
        loop, role = key[0] or (-1, 0), key[2]
        name = ops[0][1] if role in ("attention", "mlp", "residual") else instance
        if role in ("attention", "mlp", "residual") and ops:
            name = _common_prefix([_unscoped(p) for _, p in ops]) or name
        blocks.append(Block(role, key[1], key[3], name, tuple(ops), loop=loop[0], trips=loop[1]))
    return blocks


# A loop body's data movement: each trip's slice of the stacked parameters and activations, the
# tuple the body returns. Without a location in a located body, it is the loop's, not the layer's.
_PLUMBING = frozenset({"stablehlo.get_tuple_element", "stablehlo.tuple", "stablehlo.dynamic_slice",
                       "stablehlo.dynamic_update_slice", "stablehlo.reshape"})


def _numbered_as_forward(parts: list) -> list:
    """A backward block takes the ordinal of the forward block of the same module (layer 3's
    `post_attention_layernorm` backward is `norm[3]#1 (backward)` as its forward is `norm[3]#1`),
    where every backward block of its layer and role has one: numbering from the end (above) goes
    wrong where an exporter emits a weight's gradient late (torch_xla)."""
    forward = {(b.loop, b.layer, b.role, b.name): b.ordinal for b in parts if b.phase == "forward"}
    backward = defaultdict(list)
    for b in parts:
        if b.phase == "backward":
            backward[(b.loop, b.layer, b.role)].append(b)
    renumber = {}
    for (loop, layer, role), group in backward.items():
        got = [forward.get((loop, layer, role, b.name)) for b in group]
        if None not in got and len(set(got)) == len(got):
            renumber.update({id(b): k for b, k in zip(group, got)})
    return [dataclasses.replace(b, ordinal=renumber[id(b)]) if renumber.get(id(b), b.ordinal) != b.ordinal else b
            for b in parts]


@functools.lru_cache(maxsize=65536)
def _body_path(path: str) -> str:
    """A scanned body's op as its own function's path: jax 0.12 inlines the body it called before
    (`Decoder.while.body.eval_jaxpr.layers` -> `layers`, as jax 0.10's `@closed_call` callee named it)."""
    words = path.split(".")
    at = max((i for i, w in enumerate(words) if w in CALL_WORDS), default=-1)
    return ".".join(words[at + 1:]) if 0 <= at < len(words) - 1 else path


def _unscoped(path: str) -> str:
    """A path without the scopes rematerialization adds (`M.M.checkpoint.rematted_computation.h_1.ln_1`
    -> `M.h_1.ln_1`), so the forward ops a backward recomputes join the block of their module."""
    if not REMAT_WORDS & set(path.split(".")):
        return path
    parts = [p for p in path.split(".") if p not in REMAT_WORDS]
    return ".".join(p for i, p in enumerate(parts) if i == 0 or p != parts[i - 1])


def _split_shared(module: Module, blocks: list) -> list:
    """Structures built once and used by every layer (torch_xla's causal mask, made where layer 0's
    attention first needs it) become blocks of their own, role "shared", instead of swelling the
    layer that happened to build them (in the forward pass: a backward hands gradients on by
    nature). An op is shared when a block of the same role in another layer reads its result; the
    ops feeding only shared ops (and the ops inside their regions) go with it."""
    entry = module.entry.name
    where = [-1] * len(module.ops)  # op id -> its (first) block
    for i in range(len(blocks) - 1, -1, -1):
        for op, _ in blocks[i].ops:
            where[op.id] = i
    uses, out, count = module.uses, [], 0
    kind = [(b.role, b.layer, b.phase) for b in blocks]
    for i, b in enumerate(blocks):
        # the residual stream goes from layer to layer by nature, and so does its gradient, which a
        # backward block hands to the block before it (layer 1's first norm to layer 0's second)
        if not b.layer or b.role == "residual" or b.phase == "backward":
            out.append(b)
            continue
        shared = set()
        role, layer, phase = kind[i]
        for op, _ in b.ops:
            if op.func != entry:
                continue
            for vid in op.results:
                for u, _ in uses[vid]:
                    j = where[u]
                    if j != i and j >= 0 and kind[j][0] == role and kind[j][1] != layer and kind[j][2] == phase:
                        shared.add(op.id)
        if not shared:
            out.append(b)
            continue
        for op, _ in reversed(b.ops):  # users come after their producers: reversed order sees them first
            if op.func != entry or op.id in shared or op.parent is not None:
                continue
            readers = [u for vid in op.results for u, _ in uses[vid]]
            if readers and all(u in shared for u in readers):
                shared.add(op.id)
        moved = [(op, path) for op, path in b.ops if op.func == entry and top_of(module, op) in shared]
        kept = [(op, path) for op, path in b.ops if not (op.func == entry and top_of(module, op) in shared)]
        out.append(Block("shared", (), count, b.name, tuple(moved), b.phase))
        count += 1
        if kept:
            out.append(dataclasses.replace(b, ops=tuple(kept)))
    return out


def _split_coarse(module: Module, blocks: list) -> list:
    """A layer whose scopes stop at the layer (`decoder_3`: one residual block holding its norms,
    attention and MLP) is split by structure, as a module without locations would be: its ops
    clustered around their anchors (ir structure mode), each part keeping the layer's number and
    loop. A block is split when it holds a softmax (the attention) and anchors of another role (a
    norm, or an activation), and its layer has no norm, attention or MLP block of its own (a layer
    with submodules keeps its glue, softmax or not, as its residual)."""
    out = []
    parts_of = defaultdict(set)  # (layer, phase, loop) -> the roles its blocks have
    for b in blocks:
        parts_of[(b.layer, b.phase, b.loop)].add(b.role)
    for b in blocks:
        if b.role != "residual" or not (b.layer or b.loop >= 0) or not _several_roles(module, b) or \
                parts_of[(b.layer, b.phase, b.loop)] & {"norm", "attention", "mlp"}:
            out.append(b)
            continue
        parts = _by_structure(module, list(b.ops), within=True)
        if sum(1 for p in parts if p.role != "other") < 2:
            out.append(b)
            continue
        out += _merge_same_key([dataclasses.replace(b, role="residual" if p.role == "other" else p.role,
                                                    ordinal=0 if p.role == "other" else p.ordinal,
                                                    name=f"{b.name} ({p.role} #{p.ordinal}, by structure)",
                                                    ops=p.ops) for p in parts], b.ops)
    return out


def _backward_by_saved(module: Module, blocks: list) -> list:
    """A scanned layer's backward that no location splits (torch_xla's scan: every op of its body
    under `layers`; nothing for structure mode to anchor, since the forward saved its softmax and
    norm outputs) is split by what its ops read: an op reading an activation that a block of the
    forward loop's body computed (through the loops' stacking, tuples and calls: ir.origins) anchors
    the gradient of that block, and every other op goes to its nearest anchor, as in structure mode.
    What anchors nothing (the loop's slicing of what it saved) stays the layer's residual."""
    from ..ir.origins import Origins, moves_data

    forward = [b for b in blocks if b.phase == "forward" and b.loop >= 0 and b.role in ("norm", "attention", "mlp")]
    roles_of = defaultdict(set)
    for b in blocks:
        roles_of[(b.layer, b.phase, b.loop)].add(b.role)
    targets = {id(b) for b in blocks if b.phase == "backward" and b.loop >= 0 and b.role == "residual"
               and not roles_of[(b.layer, b.phase, b.loop)] & {"norm", "attention", "mlp"}}
    if not forward or not targets:
        return blocks
    origins = Origins(module)
    # what each forward block computed, and the parameters (entry arguments) only it reads: the
    # backward reads a weight again for the gradient of its input
    saved = {op.id: (b.role, b.ordinal) for b in forward for op, _ in b.ops}
    params = defaultdict(set)
    for b in forward:
        for op, _ in b.ops:
            if not moves_data(op):
                for vid in op.operands:
                    for o in origins.of(vid):
                        if o < 0:
                            params[o].add((b.role, b.ordinal))
    saved.update({o: got.pop() for o, got in params.items() if len(got) == 1})
    out = []
    for b in blocks:
        if id(b) not in targets:
            out.append(b)
            continue
        top, nested, index, parents, users = _graph(module, list(b.ops), within=True)
        anchors = {}
        for op in top:
            if moves_data(op):
                continue
            got = {saved[o] for vid in op.operands for o in origins.of(vid) if o in saved}
            if len(got) == 1:
                anchors[op.id] = got.pop()
        if len(set(anchors.values())) < 2:
            out.append(b)
            continue
        neighbours = _neighbours(top, parents, users)
        owner = _nearest(list(anchors), neighbours, index)
        groups: dict = defaultdict(list)
        for op in top:
            a = owner.get(op.id)
            groups[anchors[a] if a is not None else ("residual", 0)].append(op)
        parts = [dataclasses.replace(b, role=role, ordinal=ordinal, ops=_with_nested(groups[(role, ordinal)], nested, index),
                                     name=f"{b.name} ({role} #{ordinal}, by saved activations)")
                 for role, ordinal in sorted(groups, key=lambda k: min(index[o.id] for o in groups[k]))]
        out += _merge_same_key(parts, b.ops)
    return out


def _several_roles(module: Module, b: Block) -> bool:
    divisors = _divisors(module, [op for op, _ in b.ops])
    kinds = Counter(_anchor_kind(module, op, divisors) for op, _ in b.ops)
    return kinds["softmax"] > 0 and (kinds["norm"] > 0 or kinds["act"] > 0)


def _merge_same_key(blocks: list, items: tuple) -> list:
    """Parts of one split with the same key (two residual parts) become one, where the first stood,
    its ops in the order of `items` (the split block's: producers before their users)."""
    first: dict = {}
    out: list = []
    for b in blocks:
        k = (b.key, b.trips)
        if k in first:
            i = first[k]
            out[i] = dataclasses.replace(out[i], ops=out[i].ops + b.ops)
        else:
            first[k] = len(out)
            out.append(b)
    if len(out) == len(blocks):
        return out
    position = {id(op): i for i, (op, _) in enumerate(items)}
    return [dataclasses.replace(b, ops=tuple(sorted(b.ops, key=lambda item: position[id(item[0])]))) for b in out]


def top_of(module: Module, op: Op) -> int:
    """The id of the op whose region holds `op` at the top of its function (itself if it is there)."""
    while op.parent is not None:
        op = module.ops[op.parent]
    return op.id


def _common_prefix(paths: list) -> str:
    split = [p.split(".") for p in paths if p]
    if not split:
        return ""
    first = split[0]
    n = len(first)
    for s in split[1:]:
        n = min(n, len(s))
        for i in range(n):
            if s[i] != first[i]:
                n = i
                break
    return ".".join(first[:n])


# ---- structure ---------------------------------------------------------------------------

_ACTIVATIONS = {"stablehlo.tanh", "stablehlo.erf", "chlo.erf", "stablehlo.logistic"}
_NORMS = {"stablehlo.batch_norm_training", "stablehlo.batch_norm_inference", "stablehlo.rsqrt"}


_RESHAPES = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.convert", "stablehlo.broadcast"})


def _divisors(module: Module, ops) -> frozenset:
    """The values some divide among `ops` divides by, looked through broadcasts and reshapes."""
    out = set()
    for op in ops:
        if op.name == "stablehlo.divide" and len(op.operands) > 1:
            v = op.operands[1]
            while (p := module.values[v].producer) is not None and module.ops[p].name in _RESHAPES \
                    and module.ops[p].operands:
                out.add(v)
                v = module.ops[p].operands[0]
            out.add(v)
    return frozenset(out)


_THROUGH = _RESHAPES | {"stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide",
                        "stablehlo.sqrt", "stablehlo.rsqrt"}


def _over_last_axis(module: Module, op: Op) -> bool:
    """Whether a sqrt or rsqrt norm normalizes over the last axis (a layer or RMS norm: its variance
    a reduce of the last dimension, a few elementwise ops upstream), not over the batch."""
    return _variance_axes(module, op) == "last"


def _variance_axes(module: Module, op: Op, steps: int = 8) -> str | None:
    """"last" or "other": the axes of the reduce a few elementwise ops above `op` (a variance, for a
    norm's sqrt); None where there is none (a sqrt of a constant: the FFT's 1/sqrt(n))."""
    todo, seen = list(op.operands), set()
    for _ in range(steps):
        nxt = []
        for v in todo:
            p = module.values[v].producer
            if p is None or p in seen:
                continue
            seen.add(p)
            up = module.ops[p]
            if up.name == "stablehlo.reduce" and up.operands:
                src = module.values[up.operands[0]].producer
                if src is not None and module.ops[src].name == "stablehlo.constant":
                    return None  # a shape's product (the FFT's n), not a statistic of the data
                rank = module.values[up.operands[0]].type.rank
                return "last" if tuple(up.attr("dimensions", ()) or ()) == (rank - 1,) else "other"
            if up.name in _THROUGH:
                nxt += list(up.operands)
        todo = nxt
    return None


def _anchor_kind(module: Module, op: Op, divisors: frozenset = frozenset()) -> str | None:
    """The kind of anchor `op` is in structure mode, or None. A norm is batch norm, rsqrt, or a sqrt
    of a reduce that something divides by (LayerNorm written as `(x - mean) / sqrt(var + eps)`; not
    AdamW's sqrt(v), which is divided, or has eps added before it divides; not a constant's)."""
    n = op.name
    if n in _NORMS or (n == "stablehlo.sqrt" and op.results and op.results[0] in divisors
                       and _variance_axes(module, op) is not None):
        return "norm"
    if n == "stablehlo.exponential":
        return "softmax"
    if n in _ACTIVATIONS:
        return "act"
    if n == "stablehlo.convolution":
        return "conv"
    if n == "stablehlo.reduce_window" and op.operands and module.values[op.operands[0]].type.rank == 4:
        return "pool"
    if n == "stablehlo.dot_general":
        return "dot"
    if n in ("stablehlo.gather", "func.call") and op.operands and _is_table(module, op.operands[0]):
        if n == "stablehlo.gather" or _calls_gather(module, op.attr("callee")):
            return "embed"
    return None


def _is_table(module: Module, vid: int) -> bool:
    """A float matrix passed in as an argument: an embedding table (not an index buffer)."""
    v = module.values[vid]
    return v.producer is None and v.type.rank == 2 and v.type.dtype.startswith(("f", "bf"))


def _calls_gather(module: Module, callee: str) -> bool:
    f = module.func_by_name.get(callee)
    return bool(f) and any(module.ops[i].name == "stablehlo.gather" for i in f.ops)


def _by_structure(module: Module, items: list, within: bool = False, layered: bool = False) -> list[Block]:
    """Nearest-anchor clustering on the dataflow graph of the entry function's top-level ops; with
    `within` (the ops of one block: a layer, maybe a loop's body, maybe a callee's), of the ops of
    `items` whose region-holding op is not among them. `layered`: the program's layers run in a
    loop (its top level holds no attention, yet its norms are a transformer's, not batch norms)."""
    top, nested, index, parents, users = _graph(module, items, within)
    neighbours = _neighbours(top, parents, users)
    divisors = _divisors(module, top)
    kinds = {op.id: k for op in top if (k := _anchor_kind(module, op, divisors))}
    by_id = {op.id: op for op in top}
    for k in [k for k, kind in kinds.items() if kind == "softmax"]:
        if not _feeds_reduce(k, users, by_id):
            kinds[k] = "act"  # an exp no reduce sums is an activation's (SiLU as x / (1 + exp(-x))), not a softmax
    owner = _nearest(list(kinds), neighbours, index, _variance_chains(kinds, parents, by_id))
    layer_norms = frozenset(k for k, kind in kinds.items() if kind == "norm" and not by_id[k].name.startswith(
        "stablehlo.batch_norm") and _over_last_axis(module, by_id[k]))
    roles = _anchor_roles(top, kinds, parents, users, layered, layer_norms)
    groups: dict = defaultdict(list)
    for op in top:
        a = owner.get(op.id)
        groups[roles[a] if a is not None else ((), "other", 0)].append(op)
    blocks = []
    for key in sorted(groups, key=lambda k: min(index[o.id] for o in groups[k])):
        layer, role, ordinal = key
        where = f"layer {'.'.join(map(str, layer))} " if layer else ""
        blocks.append(Block(role, layer, ordinal, f"{where}{role} #{ordinal}".strip(),
                            _with_nested(groups[key], nested, index)))
    return blocks


def _graph(module: Module, items: list, within: bool) -> tuple:
    """(top, nested, index, parents, users) of the dataflow graph structure mode clusters: the
    entry function's top-level ops or, `within` a block, the ops of `items` whose region-holding op
    is not among them; `nested`: top op id -> the region and callee ops that travel with it."""
    entry = module.entry.name
    if within:
        mine = {op.id for op, _ in items}
        top = [op for op, _ in items if op.parent is None or op.parent not in mine]
        tops = {op.id for op in top}

        def owner_of(op):
            while op.id not in tops and op.parent is not None:
                op = module.ops[op.parent]
            return op.id
    else:
        top = [op for op, _ in items if op.func == entry and op.parent is None]
        tops = {op.id for op in top}

        def owner_of(op):
            return _owner(module, op, entry)
    nested: dict = defaultdict(list)
    for op, path in items:
        if op.id not in tops:
            nested[owner_of(op)].append((op, path))
    index = {op.id: i for i, op in enumerate(top)}
    parents, users = _edges(module, top, index)
    return top, nested, index, parents, users


def _neighbours(top, parents: dict, users: dict) -> dict:
    """Each op's producers and users, the paths nearest-anchor clustering walks. An op without
    operands (a constant, an iota) and a tuple are reached but lead nowhere: the scalar zero every
    reduce starts from, an epsilon two norms share, the tuple gathering what a loop's body returns
    (torch_xla) must not carry one block's claim into another's ops."""
    walks = {op.id for op in top if op.operands and not op.name.endswith(".tuple")}
    return {k: parents.get(k, []) + users.get(k, []) if k in walks else [] for k in set(parents) | set(users)}


def _with_nested(ops: list, nested: dict, index: dict) -> tuple:
    """(op, path) items of a cluster of top ops in program order, each followed by its nested ops."""
    full = []
    for o in sorted(ops, key=lambda o: index[o.id]):
        full.append((o, o.path))
        full.extend(nested.get(o.id, []))
    return tuple(full)


def _loops_by_structure(module: Module, blocks: list, loops: dict) -> list:
    """Structure mode inside counted loops: the ops of each loop's body (which the top-level
    clustering leaves in the block of the while) are clustered on their own, as one layer, each
    part keyed by the loop and running once per trip; what anchors nothing stays in the block."""
    if not loops:
        return blocks
    out = []
    for b in blocks:
        inside: dict = defaultdict(list)
        rest = []
        for op, path in b.ops:
            ctx = loops.get(id(op))
            (inside[ctx] if ctx is not None else rest).append((op, path))
        if not inside:
            out.append(b)
            continue
        if rest:
            out.append(dataclasses.replace(b, ops=tuple(rest)))
        for (k, trips), ops in inside.items():  # the body is one layer: parts of the same key merge
            out += _merge_same_key([dataclasses.replace(p, layer=(), name=f"loop {k} body {p.role} #{p.ordinal}",
                                                         loop=k, trips=trips)
                                    for p in _by_structure(module, ops, within=True)], tuple(ops))
    return out


def _scans_layers(module: Module, loops: dict) -> bool:
    """Whether a counted loop's body computes a softmax (an exponential): layers scanned in a loop."""
    return any(op.name == "stablehlo.exponential" and id(op) in loops for op, _ in module.inlined)


def _variance_chains(kinds: dict, parents: dict, by_id: dict, depth: int = 6) -> dict:
    """op -> its norm: the ops from each rsqrt back to the reduce that sums the squares it normalizes
    by (mean, epsilon, reshapes between), and the square feeding that reduce. They are the norm's
    however far from its rsqrt: nearest-anchor alone gives an RMSNorm's square and sum, five steps
    from its rsqrt, to the output projection two steps before them."""
    seeds = {}
    for a, kind in kinds.items():
        if kind != "norm" or by_id[a].name != "stablehlo.rsqrt":
            continue
        back = {a: None}
        frontier = [a]
        found = None
        for _ in range(depth):
            nxt = []
            for node in frontier:
                for p in parents.get(node, ()):
                    if p in back or p in kinds:
                        continue
                    back[p] = node
                    if by_id[p].name == "stablehlo.reduce":
                        found = found or p
                    nxt.append(p)
            if found is not None:
                break
            frontier = nxt
        if found is None:
            continue
        node = found
        while node != a:
            seeds.setdefault(node, a)
            node = back[node]
        square = [p for p in parents.get(found, ()) if p not in kinds and
                  (by_id[p].name == "stablehlo.power" or
                   by_id[p].name == "stablehlo.multiply" and len(set(by_id[p].operands)) == 1)]
        for p in square[:1]:
            seeds.setdefault(p, a)
    return seeds


def _feeds_reduce(op_id: int, users: dict, by_id: dict, depth: int = 3) -> bool:
    """Whether a reduce uses this op's result within `depth` steps (a softmax sums its exponentials)."""
    frontier, seen = [op_id], {op_id}
    for _ in range(depth):
        nxt = []
        for o in frontier:
            for u in users.get(o, ()):
                if u in seen:
                    continue
                if by_id[u].name == "stablehlo.reduce":
                    return True
                seen.add(u)
                nxt.append(u)
        frontier = nxt
    return False


def _owner(module: Module, op: Op, entry: str) -> int:
    """The top-level op of the entry function that holds `op` (through regions and calls)."""
    while op.parent is not None:
        op = module.ops[op.parent]
    if op.func == entry:
        return op.id
    for caller in module.ops:  # callee bodies belong to their (first) call site
        if (caller.name == "func.call" or caller.name.endswith(".composite")) and op.func in callees(caller):
            return _owner(module, caller, entry)
    return -1


def _nearest(anchors: list, neighbours: dict, index: dict, seeds: dict | None = None) -> dict:
    """Multi-source BFS: each op goes to the closest anchor (ties: the earlier anchor); `seeds`
    (op -> anchor) are ops an anchor owns from the start, as it owns itself."""
    owner = {a: a for a in anchors}
    owner.update(seeds or {})
    frontier = deque(sorted(owner, key=lambda a: index[a]))
    while frontier:
        node = frontier.popleft()
        for nxt in neighbours.get(node, ()):
            if nxt not in owner:
                owner[nxt] = owner[node]
                frontier.append(nxt)
    return owner


def _anchor_roles(top, kinds, parents: dict, users: dict, looped: bool = False,
                  layer_norms: frozenset = frozenset()) -> dict:
    """(layer, role, ordinal) of every anchor, from dataflow rather than print order.

    Layer of a softmax = the number of softmaxes upstream of it; the dot_generals next to it
    are its attention. An activation or other dot_general belongs to the MLP of the layer
    whose attention feeds it. A norm belongs to the layer of the first attention or MLP it
    feeds (pre-LN's ln_1 and ln_2 alike); one that feeds neither is the final norm. `looped`: the
    layers (their softmaxes) run in a loop, so the top level is a transformer's all the same.
    Outside a transformer a norm is a batch norm, but those in `layer_norms` (over the last axis).
    """
    order = [op for op in top if op.id in kinds]
    depth: dict = {}  # softmaxes upstream, including the op itself (ops come in SSA order)
    for op in top:
        d = max((depth.get(src, 0) for src in parents.get(op.id, ())), default=0)
        depth[op.id] = d + (1 if kinds.get(op.id) == "softmax" else 0)
    softmaxes = [op.id for op in order if kinds[op.id] == "softmax"]
    attention_of = {s: depth[s] - 1 for s in softmaxes}
    for s in softmaxes:
        for dot in _attention_dots(s, kinds, users, parents):
            attention_of.setdefault(dot, depth[s] - 1)
    periodic = {} if softmaxes or looped else repeated_layers(top, kinds, parents)
    layered = bool(softmaxes) or looped or bool(periodic)
    roles: dict = {}
    counts: Counter = Counter()
    norms = []
    for op in order:
        kind = kinds[op.id]
        if op.id in attention_of:
            roles[op.id] = ((attention_of[op.id],), "attention", 0)
        elif kind in ("act", "dot") and periodic:
            roles[op.id] = ((periodic[op.id],), "mlp", 0) if op.id in periodic else _numbered((), "mlp", counts)
        elif kind in ("act", "dot") and layered:
            roles[op.id] = ((max(depth[op.id] - 1, 0),), "mlp", 0)
        elif kind == "norm" and layered:
            norms.append(op)
        elif kind == "norm":
            roles[op.id] = _numbered((), "norm" if op.id in layer_norms else "batchnorm", counts)
        elif kind in ("act", "dot"):
            roles[op.id] = _numbered((), "mlp", counts)
        else:
            roles[op.id] = _numbered((), {"embed": "embedding"}.get(kind, kind), counts)
    for op in norms:
        fed = _first_fed(op.id, users, roles, kinds)
        roles[op.id] = _numbered(fed[0] if fed else (), "norm", counts)
    return roles


LAYER_KINDS = frozenset({"norm", "act", "dot"})  # what a layer without attention is made of (no conv: ResNet's blocks stay as they are)


def repeated_layers(top, kinds: dict, parents: dict) -> dict:
    """Layers without attention found by their repeating structure: anchor op id -> layer number.

    The anchors are ordered by their depth in the dataflow (anchors upstream), then program order;
    the longest run of at least two repeats of one pattern (norm, dot, act, ...) that holds a norm
    and covers at least half the anchors is the layers, one repeat each (torch_xla's unrolled MLP
    blocks without locations against their scan_layers loop). Nothing where any anchor is of another
    kind (a conv net's repeating blocks keep their batch norms) or no run is long enough."""
    if not kinds or set(kinds.values()) - LAYER_KINDS or "norm" not in kinds.values():
        return {}
    depth: dict = {}
    for op in top:
        d = max((depth.get(src, 0) for src in parents.get(op.id, ())), default=0)
        depth[op.id] = d + (1 if op.id in kinds else 0)
    position = {op.id: i for i, op in enumerate(top)}
    seq = sorted(kinds, key=lambda k: (depth[k], position[k]))
    s = [kinds[k] for k in seq]
    n, best = len(s), (0, 0, 0)  # (start, period, repeats)
    for p in range(2, n // 2 + 1):
        for o in range(0, min(n - 2 * p, 32) + 1):
            k = 1
            while o + (k + 1) * p <= n and s[o + k * p:o + (k + 1) * p] == s[o:o + p]:
                k += 1
            if k >= 2 and "norm" in s[o:o + p] and k * p > best[1] * best[2]:
                best = (o, p, k)
    o, p, k = best
    if not k or 2 * k * p < n:
        return {}
    return {seq[i]: (i - o) // p for i in range(o, o + k * p)}


def _first_fed(start: int, users: dict, roles: dict, kinds: dict):
    """The role of the first attention or MLP anchor downstream of `start` (breadth first)."""
    def hit(n):
        return bool(roles.get(n)) and roles[n][1] in ("attention", "mlp")

    found = next(_hits([start], users, hit, lambda n: True), None)
    return roles[found] if found is not None else None


def _numbered(layer: tuple, role: str, counts: Counter) -> tuple:
    key = (layer, role)
    n = counts[key]
    counts[key] += 1
    return (layer, role, n)


def _edges(module: Module, top, index: dict) -> tuple[dict, dict]:
    """(parents, users) of each of the `top` ops (ids in `index`), from the module's def-use index:
    the top ops producing its operands, the top ops reading its results."""
    parents: dict = defaultdict(list)
    users: dict = defaultdict(list)
    values, uses = module.values, module.uses
    for op in top:
        for vid in op.operands:
            src = values[vid].producer
            if src in index:
                parents[op.id].append(src)
        found = [u for vid in op.results for u, _ in uses[vid] if u in index]
        if found:  # program order, as the BFS ties expect (one result's uses are in it already)
            users[op.id] = found if len(op.results) == 1 else sorted(found, key=index.__getitem__)
    return parents, users


def _hits(starts, edges: dict, is_hit, passable):
    """Breadth-first from `starts` along `edges`: yield each node `is_hit` accepts, walking on only
    through nodes that are neither hits nor impassable. Lazy, so a caller may stop at the first."""
    seen, frontier = set(starts), deque(starts)
    while frontier:
        node = frontier.popleft()
        for nxt in edges.get(node, ()):
            if nxt in seen:
                continue
            seen.add(nxt)
            if is_hit(nxt):
                yield nxt
            elif passable(nxt):
                frontier.append(nxt)


def _first_dots(starts, edges: dict, kinds: dict) -> set:
    """The first dot_generals met walking `edges` (users or producers) from `starts`."""
    return set(_hits(starts, edges, lambda n: kinds.get(n) == "dot",
                     lambda n: kinds.get(n) not in ("softmax", "norm", "act", "embed")))


def _attention_dots(softmax: int, kinds: dict, users: dict, parents: dict) -> set:
    """Scores and context dot_generals around a softmax, the projections feeding them (q, k, v)
    and the one the context feeds (output projection). Directed walks only, so a mask shared
    by every layer does not pull one layer's dots into another's attention."""
    scores = _first_dots([softmax], parents, kinds)
    context = _first_dots([softmax], users, kinds)
    inputs = _first_dots(list(scores | context), parents, kinds) - scores
    output = _first_dots(list(context), users, kinds)
    return scores | context | inputs | output
