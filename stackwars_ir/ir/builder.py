"""The IR model built from MLIR's op tree: the walk over a parsed module, in a parse worker."""
from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from ..common.errors import ParseError
from .locations import loc_name, provenance

if TYPE_CHECKING:
    from iree.compiler import ir as iree_ir
    from jaxlib.mlir import ir as jax_ir


STABLEHLO_DIALECTS = frozenset({"stablehlo", "chlo", "mhlo", "vhlo"})

# Every attribute an op carries is kept (a diff compares them all): typed where the analyses read a
# Python value (dimensions, directions, names), as MLIR prints it otherwise; a long printed form keeps
# its head for the reader and a digest of the whole, so two attributes compare equal only when equal.
ATTR_TEXT_LIMIT = 200


class _Stop(Exception):
    """The walk reached the end of this part's share of the module."""


class _Builder:
    """Walks one MLIR module and records functions, ops and values.

    The walk is the parse worker's hot loop (100,000s of ops): binding calls are made once per
    op, types and provenance are cached (types are uniqued per context; names repeat), and it
    records plain tuples (the wire form of Module.from_wire): values name their type by index.

    A big module is walked by several workers at once, each recording the top-level ops
    ("units") numbered [lo, hi). The units before `lo` are skipped: only numbered, so that op and
    value ids are the same as in a whole walk (ids count ops and values in walk order). The
    walk stops at `hi`. A value belongs to the part whose unit range holds the moment it is made.
    """

    def __init__(self, ir, lo: int = 0, hi: float = float("inf")):
        self.ir = ir
        self.lo, self.hi = lo, hi
        self.unit = 0  # the number of the next (or current) top-level op
        self.ops: list = []
        self.values: list = []
        self.skipped_ops = 0  # ops and values made before this part's share
        self.skipped_values = 0
        self.skipped_names: set = set()
        self.ids: dict = {}
        self.types: dict = {}  # MLIR type -> index into self.tensors
        self.tensors: list = []  # (shape, dtype)
        self.places: dict = {None: ("", "", "")}
        self.attr_values: dict = {}
        self.splats: dict = {}
        self.loc_kinds = tuple(getattr(ir, k, None) for k in ("NameLoc", "CallSiteLoc", "FusedLoc"))
        self.label = ""  # the file's name, in the text of a constant whose values it lacks
        self.blobs = True  # False: a dense_resource constant raises Blob (bytecode: read again from its text)

    def owned(self) -> bool:
        """Whether what is made now belongs to this part; _Stop past its share."""
        if self.unit >= self.hi:
            raise _Stop
        return self.unit >= self.lo

    def tensor(self, t) -> int:
        """The index of a type's (shape, dtype) in self.tensors."""
        hit = self.types.get(t)
        if hit is None:
            key = str(t)
            ir = self.ir
            if _is(ir.RankedTensorType, t):
                rt = ir.RankedTensorType(t)
                dyn = ir.ShapedType.get_dynamic_size()
                shape = tuple(None if d == dyn else d for d in rt.shape)
                tensor = (shape, str(rt.element_type))
            elif _is(ir.ShapedType, t) and not ir.ShapedType(t).has_rank:
                tensor = ((None,), str(ir.ShapedType(t).element_type))  # unranked: one unknown dim
            else:
                tensor = ((), key)  # tokens, tuples, scalars of other dialects
            hit = self.types[t] = len(self.tensors)
            self.tensors.append(tensor)
        return hit

    def value(self, v, producer: int | None, arg_index: int | None = None, name: str = "") -> int:
        if self.owned():
            vid = self.skipped_values + len(self.values)
            self.values.append((vid, self.tensor(v.type), producer, arg_index, name))
        else:
            vid = self.skipped_values
            self.skipped_values += 1
        self.ids[v] = vid
        return vid

    def where(self, name: str | None) -> tuple[str, str, str]:
        """(module path, module class, phase) of a location name, read once per distinct name."""
        hit = self.places.get(name)
        if hit is None:
            hit = self.places[name] = provenance(name)
        return hit

    def func(self, fop) -> tuple:
        attrs = fop.attributes
        name = self.ir.StringAttr(attrs["sym_name"]).value
        visibility = self.ir.StringAttr(attrs["sym_visibility"]).value if "sym_visibility" in attrs else "public"
        ftype = self.ir.FunctionType(self.ir.TypeAttr(attrs["function_type"]).value)
        results = tuple(self.tensors[self.tensor(t)] for t in ftype.results)
        if not fop.regions or not fop.regions[0].blocks:  # a declaration
            return (name, visibility, (), results, (), (), (), ())
        entry = fop.regions[0].blocks[0]
        args = tuple(self.value(a, None, i, self.arg_name(a)) for i, a in enumerate(entry.arguments))
        first = self.skipped_ops + len(self.ops)
        returns = self.block(fop.regions[0], name, None)
        return (name, visibility, args, results, tuple(range(first, self.skipped_ops + len(self.ops))), returns,
                self.arg_shardings(attrs), self.donated(attrs))

    def donated(self, attrs) -> tuple:
        """(argument index, output index or -1) of each argument the function donates: `tf.aliasing_output
        = N` (its buffer becomes output N) or `jax.buffer_donor = true` (XLA may reuse it: -1)."""
        if "arg_attrs" not in attrs:
            return ()
        out = []
        for i, d in enumerate(self.ir.ArrayAttr(attrs["arg_attrs"])):
            d = self.ir.DictAttr(d)
            if "tf.aliasing_output" in d:
                out.append((i, self.ir.IntegerAttr(d["tf.aliasing_output"]).value))
            elif "jax.buffer_donor" in d and str(d["jax.buffer_donor"]) == "true":
                out.append((i, -1))
        return tuple(out)

    def arg_shardings(self, attrs) -> tuple:
        """Each argument's sharding as written (Shardy's sdy.sharding, GSPMD's mhlo.sharding), "" for none."""
        if "arg_attrs" not in attrs:
            return ()
        out = []
        for d in self.ir.ArrayAttr(attrs["arg_attrs"]):
            d = self.ir.DictAttr(d)
            if "sdy.sharding" in d:
                out.append(str(d["sdy.sharding"]))
            elif "mhlo.sharding" in d:
                out.append(self.ir.StringAttr(d["mhlo.sharding"]).value)
            else:
                out.append("")
        return tuple(out) if any(out) else ()

    def block(self, region, func: str, parent: int | None) -> tuple:
        """Record the ops of a region (nested regions included); return the operands of its
        top-level return."""
        returns = ()
        for block in region.blocks:
            for k, a in enumerate(block.arguments):
                if a not in self.ids:
                    self.value(a, parent, k)  # a region's argument: its position in the block
            returns = self.run(block.operations, func, parent) or returns
        return returns

    def run(self, operations, func: str, parent: int | None) -> tuple:
        """Record a sequence of ops; return the operands of a top-level return among them."""
        returns = ()
        top = parent is None
        ops, values, ids, types, places = self.ops, self.values, self.ids, self.types, self.places
        tensor, attrs, value = self.tensor, self.attrs, self.value
        name_loc, kinds = self.loc_kinds[0], self.loc_kinds
        op_base, value_base = self.skipped_ops, self.skipped_values
        for op in operations:
            op = op.operation
            if top and not self.owned():
                returns = self.skip(op) or returns
                self.unit += 1
                op_base, value_base = self.skipped_ops, self.skipped_values
                continue
            oid = op_base + len(ops)
            name = op.name
            operands = tuple([i if (i := ids.get(v)) is not None else value(v, None) for v in op.operands])
            results = []
            for r in op.results:
                vid = value_base + len(values)
                t = types.get(r.type)
                values.append((vid, tensor(r.type) if t is None else t, oid, None, ""))
                ids[r] = vid
                results.append(vid)
            loc = op.location
            # NameLoc, the common case, read inline; loc_name walks the other kinds
            lname = loc.name_str if type(loc) is name_loc else loc_name(loc, kinds)
            where = places.get(lname) or self.where(lname)
            attributes = op.attributes
            ops.append((oid, name, func, parent, operands, tuple(results),
                        attrs(attributes, name) if len(attributes) else (), *where))
            if len(op.regions):
                for inner in op.regions:
                    self.block(inner, func, oid)
            if top:
                self.unit += 1
                if name in _RETURNS:
                    returns = operands
        return returns

    def skip(self, op) -> tuple:
        """Number an op of another part's share, its values and its nested ops, as run() would;
        return its operands if it is a return."""
        ids = self.ids
        self.skipped_ops += 1
        name = op.name
        self.skipped_names.add(name)
        operands = []
        for v in op.operands:
            i = ids.get(v)
            if i is None:
                i = ids[v] = self.skipped_values
                self.skipped_values += 1
            operands.append(i)
        for r in op.results:
            ids[r] = self.skipped_values
            self.skipped_values += 1
        for region in op.regions:
            for block in region.blocks:
                for a in block.arguments:
                    if a not in ids:
                        ids[a] = self.skipped_values
                        self.skipped_values += 1
                for inner in block.operations:
                    self.skip(inner.operation)
        return tuple(operands) if name in _RETURNS else ()

    def attrs(self, attributes, op_name: str) -> tuple:
        kept = []
        constant = op_name.endswith(".constant")
        for key in attributes:  # names in this binding version (NamedAttribute in older ones)
            if not isinstance(key, str):
                key = key.name
            try:
                a = attributes[key]  # auto-downcast: fails for some element types (complex)
            except TypeError as e:  # the bindings' message carries the attribute as printed
                kept.append((key, _undowncast(e)))
                continue
            # Attributes are uniqued like types, and ops repeat them (broadcast dimensions,
            # comparison directions): read each distinct one once.
            if key == "dot_dimension_numbers":
                kept.extend(_dot_dims(a))
            elif key == "value" and constant:
                hit = self.splats.get(a)
                if hit is None:
                    hit = self.splats[a] = (_is_splat(self.ir, a), _scalar_int(self.ir, a), _printed(a))
                kept.append(("splat", hit[0]))
                if hit[1] is not None:  # a loop's bounds and steps (ir.loops)
                    kept.append(("int", hit[1]))
                value = hit[2]
                if value.startswith("dense_resource<") and not self.blobs:
                    raise Blob
                if value.startswith("dense_resource<"):
                    # a blob the file does not hold (ir.resources inlined the others): its values unknown,
                    # so equal to no other constant, not even one of the same key elsewhere
                    value = f"{value} (its values are not in {self.label}) #{self.unit}"
                kept.append(("value", value))  # the constant itself: a diff compares it
            else:
                hit = self.attr_values.get(a)
                if hit is None:
                    hit = self.attr_values[a] = _attr_value(self.ir, a)
                kept.append((key, hit))
        return tuple(kept)

    def arg_name(self, arg) -> str:
        try:
            loc = arg.location
        except Exception:  # older bindings: block arguments without locations
            return ""
        name = loc_name(loc, self.loc_kinds) or ""
        return name if len(name) < 200 else ""


_RETURNS = frozenset({"func.return", "stablehlo.return", "mhlo.return", "sdy.return"})


def _is(cls, x) -> bool:
    """isinstance for both binding generations (auto-downcast, or the static `isinstance`)."""
    if isinstance(x, cls):
        return True
    check = getattr(cls, "isinstance", None)
    return bool(check and check(x))


def _attr_value(ir, a):
    for cls, get in ((ir.DenseI64ArrayAttr, lambda x: tuple(x)), (ir.BoolAttr, lambda x: x.value),
                     (ir.IntegerAttr, lambda x: x.value), (ir.FloatAttr, lambda x: x.value),
                     (ir.StringAttr, lambda x: _bounded(x.value)), (ir.FlatSymbolRefAttr, lambda x: x.value)):
        if _is(cls, a):
            return get(cls(a))
    return _printed(a)


def _printed(a) -> str:
    """An attribute as MLIR prints it; past ATTR_TEXT_LIMIT characters, its head and a digest of
    the whole (a constant's payload: two different ones never print alike)."""
    try:
        text = str(a)
    except Exception:  # an element type the bindings cannot print
        return "<unprintable attribute>"
    return _bounded(text)


def _bounded(text: str) -> str:
    """`text` up to ATTR_TEXT_LIMIT characters; a longer one as its head and a digest of the whole."""
    if len(text) <= ATTR_TEXT_LIMIT:
        return text
    import hashlib

    return text[:ATTR_TEXT_LIMIT] + "... #" + hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def _undowncast(e: TypeError) -> str:
    """The printed form of an attribute the bindings cannot downcast (a complex constant): their
    error message quotes it as `Attribute(...)`. Reading it any other way aborts the process."""
    text = str(e)
    start = text.find("Attribute(")
    body = text[start + len("Attribute("):].rstrip()
    body = body[:-2] if body.endswith("))") else body
    if start < 0 or not body:
        return _bounded("<unprintable attribute: " + text + ">")
    return _bounded(body)


def _dot_dims(a) -> list:
    try:
        from jaxlib.mlir.dialects import stablehlo

        d = stablehlo.DotDimensionNumbers(a)
        return [("lhs_batching_dimensions", tuple(d.lhs_batching_dimensions)),
                ("rhs_batching_dimensions", tuple(d.rhs_batching_dimensions)),
                ("lhs_contracting_dimensions", tuple(d.lhs_contracting_dimensions)),
                ("rhs_contracting_dimensions", tuple(d.rhs_contracting_dimensions))]
    except Exception:  # IREE's bindings, or mhlo's attribute: keep the printed form
        return [("dot_dimension_numbers", str(a)[:200])]


def _scalar_int(ir, a) -> int | None:
    """The value of a rank-0 integer constant, else None."""
    try:
        if not _is(ir.DenseIntElementsAttr, a) or ir.ShapedType(a.type).rank != 0:
            return None
        return ir.IntegerAttr(ir.DenseElementsAttr(a).get_splat_value()).value
    except (TypeError, ValueError):
        return None


def _is_splat(ir, a) -> bool:
    try:
        return _is(ir.DenseElementsAttr, a) and ir.DenseElementsAttr(a).is_splat
    except TypeError:  # element types the bindings cannot cast (complex): report not-a-splat
        return False


class Blob(Exception):
    """A bytecode module holds a dense_resource constant (parse reads it again from its text)."""


def build(module: jax_ir.Module | iree_ir.Module, label: str, parser: str, ir: ModuleType | None = None,
          part: tuple = (0, 1), blobs: bool = True) -> tuple:
    """The wire form of a parsed module, or of part j of k of it: see Module.from_wire. `blobs` False:
    a dense_resource constant raises Blob."""
    if ir is None:
        from jaxlib.mlir import ir
    body = [op.operation for op in module.body.operations]  # an OpView's .name is its symbol
    j, k = part
    lo, hi = _share(j, k, _units(body)) if k > 1 else (0, float("inf"))
    b = _Builder(ir, lo, hi)
    b.label, b.blobs = label, blobs
    funcs = []
    try:
        for op in body:
            if op.name == "func.func":
                funcs.append(b.func(op))
            else:  # module-level ops other than functions (rare): keep them in a pseudo-function
                b.run([op], "<module>", None)
    except _Stop:  # a part before the last: its functions are partial, the last part has them all
        return (label, parser, [], b.ops, b.values, b.tensors)
    names = {o[1] for o in b.ops} | b.skipped_names
    dialects = {name.split(".", 1)[0] if "." in name else "" for name in names}
    if not funcs:
        raise ParseError(f"{label}: MLIR module without any func.func", fix="give a StableHLO module")
    foreign = sorted(dialects - STABLEHLO_DIALECTS - {"func", "check", ""})
    if foreign and not dialects & STABLEHLO_DIALECTS:
        # An identity function (func ops only) is valid StableHLO; arith/linalg/tosa code is not.
        raise ParseError(f"{label}: MLIR but not StableHLO (no stablehlo/chlo/mhlo op; dialects: "
                         f"{', '.join(foreign)})",
                         fix="give the StableHLO export of the model (jax.jit(...).lower(...).as_text(debug_info=True))")
    return (label, parser, funcs, b.ops, b.values, b.tensors)


# Skipping a unit (numbering its values) costs about this fraction of recording it.
SKIP_COST = 0.3


def _units(body: list) -> int:
    """The number of top-level ops: those of the functions' blocks, and module-level others."""
    n = 0
    for op in body:
        if op.name == "func.func":
            n += sum(len(block.operations) for region in op.regions for block in region.blocks)
        else:
            n += 1
    return n


def _share(j: int, k: int, units: int) -> tuple:
    """Units [lo, hi) of part j of k, sized so every part takes about as long: part j skips
    the units before lo (at SKIP_COST each) and records its own. The last part runs to the end."""
    bounds = [0.0]
    for _ in range(k):
        bounds.append(bounds[-1] * (1 - SKIP_COST) + 1)
    lo = round(units * bounds[j] / bounds[k])
    hi = round(units * bounds[j + 1] / bounds[k]) if j < k - 1 else float("inf")
    return lo, hi
