"""The MLIR bindings' module as ablation edits it: walking ops, reading shapes, building ops at a site."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jaxlib.mlir import ir


def ops_of(module: ir.Module | ir.Operation, name: str | None = None) -> list:
    """Every operation of the module (or op: those in its regions, nested included), in order; those named
    `name` if given."""
    out = []

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    inner = inner.operation
                    if name is None or inner.name == name:
                        out.append(inner)
                    visit(inner)

    visit(module.operation)
    return out


def histogram(module: ir.Module | ir.Operation) -> dict:
    from collections import Counter

    return dict(Counter(op.name for op in ops_of(module)))


def head(op: ir.Operation) -> str:
    text = op.get_asm(large_elements_limit=4) if hasattr(op, "get_asm") else str(op)
    return text.strip().splitlines()[0][:160]


def producer(value: ir.Value) -> ir.Operation | None:
    """The operation producing `value`, or None for a block argument."""
    from jaxlib.mlir import ir

    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if hasattr(owner, "operation") else owner


class At:
    """Builds ops right before `anchor`, each with the anchor's location."""

    def __init__(self, anchor: ir.Operation) -> None:
        from jaxlib.mlir import ir

        self.ir = ir
        self.loc = anchor.location
        self.ip = ir.InsertionPoint(anchor)

    def tensor(self, shape: Iterable[int], element: ir.Type) -> ir.RankedTensorType:
        return self.ir.RankedTensorType.get(list(shape), element)

    def splat(self, shape: Iterable[int], element: ir.Type, number: float) -> ir.Value:
        ir = self.ir
        t = self.tensor(shape, element)
        scalar = ir.FloatAttr.get(element, float(number)) if is_float(element) else ir.IntegerAttr.get(element, int(number))
        return self.op("stablehlo.constant", [t], [], {"value": ir.DenseElementsAttr.get_splat(t, scalar)})

    def op(self, name: str, results: Sequence[ir.Type], operands: Sequence[ir.Value],
           attributes: dict[str, ir.Attribute] | None = None) -> ir.Value | ir.Operation:
        op = self.ir.Operation.create(name, results=results, operands=operands, attributes=attributes or {},
                                      loc=self.loc, ip=self.ip)
        return op.results[0] if len(op.results) == 1 else op

    def binary(self, name: str, a: ir.Value, b: ir.Value) -> ir.Value:
        return self.op(f"stablehlo.{name}", [a.type], [a, b])

    def broadcast(self, value: ir.Value, shape: Iterable[int], dims: Iterable[int]) -> ir.Value:
        ir = self.ir
        t = self.tensor(shape, ir.RankedTensorType(value.type).element_type)
        return self.op("stablehlo.broadcast_in_dim", [t], [value],
                       {"broadcast_dimensions": ir.DenseI64ArrayAttr.get(list(dims))})

    def reshape(self, value: ir.Value, shape: Iterable[int]) -> ir.Value:
        t = self.tensor(shape, self.ir.RankedTensorType(value.type).element_type)
        return self.op("stablehlo.reshape", [t], [value])

    def sum(self, value: ir.Value, dims: Sequence[int]) -> ir.Value:
        """reduce(add) of `value` over `dims`, as JAX writes it (an f32 zero, the add in the region)."""
        ir = self.ir
        t = ir.RankedTensorType(value.type)
        element = t.element_type
        kept = [d for i, d in enumerate(t.shape) if i not in dims]
        zero = self.splat([], element, 0)
        red = self.ir.Operation.create("stablehlo.reduce", results=[self.tensor(kept, element)], operands=[value, zero],
                                       attributes={"dimensions": ir.DenseI64ArrayAttr.get(sorted(dims))},
                                       regions=1, loc=self.loc, ip=self.ip)
        scalar = self.tensor([], element)
        body = red.regions[0].blocks.append(scalar, scalar)
        with ir.InsertionPoint(body):
            add = ir.Operation.create("stablehlo.add", results=[scalar], operands=list(body.arguments), loc=self.loc)
            ir.Operation.create("stablehlo.return", results=[], operands=[add.results[0]], loc=self.loc)
        return red.results[0]

    def compare(self, a: ir.Value, b: ir.Value, direction: str) -> ir.Value:
        ir = self.ir
        t = self.tensor(ir.RankedTensorType(a.type).shape, ir.IntegerType.get_signless(1))
        return self.op("stablehlo.compare", [t], [a, b],
                       {"comparison_direction": ir.Attribute.parse(f"#stablehlo<comparison_direction {direction}>")})


def is_float(element: ir.Type) -> bool:
    from jaxlib.mlir import ir

    return any(isinstance(element, k) for k in (ir.F32Type, ir.F64Type, ir.F16Type, ir.BF16Type)) or \
        str(element) in ("f32", "f64", "f16", "bf16")


def shape_of(value: ir.Value) -> list:
    from jaxlib.mlir import ir

    return list(ir.RankedTensorType(value.type).shape)


def replace(op: ir.Operation, values: Iterable[ir.Value]) -> None:
    for old, new in zip(op.results, values):
        old.replace_all_uses_with(new)
    op.erase()


def int_of(attr: ir.Attribute) -> int:
    from jaxlib.mlir import ir

    return ir.IntegerAttr(attr).value


def float_of(attr: ir.Attribute) -> float:
    from jaxlib.mlir import ir

    return ir.FloatAttr(attr).value
