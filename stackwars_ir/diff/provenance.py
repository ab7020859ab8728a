"""Segmentation by provenance: an op's module path (`h.3.attn.c_attn`) names its layer and its role.

Its layer from the numbers in it, its role from the words in it.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from collections import Counter, defaultdict

from ..ir.model import Module
from ..ir.origins import Origins, moves_data
from ..ir.scopes import CALL_WORDS, LOOP_WORDS, REMAT_WORDS
from .block import PHASES, Block, common_prefix, merge_same_key, top_of
from .structure import (
    anchor_kind, by_structure, dataflow_graph, dataflow_neighbours, divided_by, nearest_anchor, with_nested,
)

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


def by_provenance(items: list, phases: dict | None = None, roles: tuple = (), loops: dict | None = None) -> list[Block]:
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
                          for b in reversed(by_provenance(list(reversed(mine)), roles=roles, loops=loops))]
            else:
                blocks = by_provenance(mine, roles=roles, loops=loops)
            parts += [dataclasses.replace(b, role=b.role if phase != "update" or b.layer or b.role != "other"
                                          else "optimizer", phase=phase) for b in blocks]
        return _numbered_as_forward(parts)
    items = _mlp_linears(_fill_paths(_pathless_linears([(op, _body_path(path)) for op, path in items]), roles), roles)
    groups: dict = {}
    order: list = []
    instances: dict = defaultdict(list)
    keyed: dict = {}  # path -> (layer, role, instance) outside a loop: 100,000s of ops share 1,000s of paths
    for op, path in items:
        loop = loops.get(id(op))
        if loop is None and path in keyed:
            layer, role, instance = keyed[path]
        else:
            layer, role, instance = classify(_unscoped(path), roles)
            if loop is not None and role == "other" and not op.path and op.name in _PLUMBING:
                instance = "(loop plumbing)"  # torch_xla's: each trip's slices and tuple, as JAX's `while.body`
            elif loop is not None and role == "other" and not LOOP_WORDS & set(path.split(".")):
                # the layer's own ops, or a body no location names (torch_xla's scan): split by structure below
                role, instance = "residual", instance or "(loop body)"
            if role in ("attention", "mlp", "residual") and not named_module(layer, role, instance, roles):
                instance = f"{layer}:{role}"
            if loop is None:
                keyed[path] = layer, role, instance
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
            name = common_prefix([_unscoped(p) for _, p in ops]) or name
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


def split_shared(module: Module, blocks: list) -> list:
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


def split_coarse(module: Module, blocks: list) -> list:
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
        parts = by_structure(module, list(b.ops), within=True)
        if sum(1 for p in parts if p.role != "other") < 2:
            out.append(b)
            continue
        out += merge_same_key([dataclasses.replace(b, role="residual" if p.role == "other" else p.role,
                                                    ordinal=0 if p.role == "other" else p.ordinal,
                                                    name=f"{b.name} ({p.role} #{p.ordinal}, by structure)",
                                                    ops=p.ops) for p in parts], b.ops)
    return out


def backward_by_saved(module: Module, blocks: list) -> list:
    """A scanned layer's backward that no location splits (torch_xla's scan: every op of its body
    under `layers`; nothing for structure mode to anchor, since the forward saved its softmax and
    norm outputs) is split by what its ops read: an op reading an activation that a block of the
    forward loop's body computed (through the loops' stacking, tuples and calls: ir.origins) anchors
    the gradient of that block, and every other op goes to its nearest anchor, as in structure mode.
    What anchors nothing (the loop's slicing of what it saved) stays the layer's residual."""

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
        top, nested, index, parents, users = dataflow_graph(module, list(b.ops), within=True)
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
        neighbours = dataflow_neighbours(top, parents, users)
        owner = nearest_anchor(list(anchors), neighbours, index)
        groups: dict = defaultdict(list)
        for op in top:
            a = owner.get(op.id)
            groups[anchors[a] if a is not None else ("residual", 0)].append(op)
        parts = [dataclasses.replace(b, role=role, ordinal=ordinal, ops=with_nested(groups[(role, ordinal)], nested, index),
                                     name=f"{b.name} ({role} #{ordinal}, by saved activations)")
                 for role, ordinal in sorted(groups, key=lambda k: min(index[o.id] for o in groups[k]))]
        out += merge_same_key(parts, b.ops)
    return out


def _several_roles(module: Module, b: Block) -> bool:
    divisors = divided_by(module, [op for op, _ in b.ops])
    kinds = Counter(anchor_kind(module, op, divisors) for op, _ in b.ops)
    return kinds["softmax"] > 0 and (kinds["norm"] > 0 or kinds["act"] > 0)
