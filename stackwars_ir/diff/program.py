"""The whole program's fingerprints through calls, and what changed at its arguments and results."""
from __future__ import annotations

from collections import Counter

from ..ir.model import Module, callees
from .describe import same_source, source_words
from .side import Side
from .signature import COMMUTATIVE, TERMINATORS, op_signature

_CALLERS = frozenset({"func.call"})
_CALLING = (".composite", ".custom_call")  # ops that may run functions in their place (ir.model.callees)


class Program:
    """What a whole entry function computes, as fingerprints: each op hashed with its signature and the
    fingerprints of what it reads, down to entry arguments and constants, every call evaluated at its
    call site (a helper called twice is two computations). Equal for two programs that differ only in
    spelling: locations, SSA and helper names, the order of independent ops, commutative operands,
    generic or pretty form, MHLO; whatever their blocks."""

    def __init__(self, module: Module, args: dict) -> None:
        self.module = module
        self.args = args
        self.memo: dict = {}
        self.results, self.print, _ = self._run(module.entry.name, None, ())

    def _run(self, name: str, bound, stack: tuple) -> tuple:
        """(fingerprints of what function `name` returns, Counter of its ops' fingerprints, a hash of
        that Counter), its arguments bound to `bound` (None: the entry function's own arguments). A
        call counts as one fingerprint that holds its callee's whole print (a helper called a
        thousand times is evaluated once per distinct set of inputs)."""
        module = self.module
        f = module.func_by_name.get(name)
        if f is None or name in stack:  # a declaration, or recursion: its results stand for themselves
            rets = tuple(("extern", k, str(t)) for k, t in enumerate(f.results if f else ()))
            return rets, Counter(), hash(rets)
        key = (name, bound)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        ops, nested, values = module.ops, module.nested, module.values
        env: dict = {}
        for i, v in enumerate(f.args):
            env[v] = ("arg", self.args.get(v, i)) if bound is None else \
                (bound[i] if i < len(bound) else ("unbound", i, str(values[v].type)))
        count: Counter = Counter()
        inner_stack = stack + (name,)
        for op_id in f.ops:
            op = ops[op_id]
            if op.parent is not None or op.name in TERMINATORS:
                continue
            sig, captured = op_signature(module, op_id)
            ins = [env.get(v) or ("outside", str(values[v].type)) for v in op.operands + captured]
            if op.name in COMMUTATIVE:
                ins.sort(key=repr)
            called = ()  # what the helpers called inside its regions compute
            if op_id in nested:
                called = tuple(self._called(c, "region value", inner_stack) for c in nested[op_id]
                               if ops[c].name in _CALLERS or ops[c].name.endswith(_CALLING) and callees(ops[c]))
            fp = hash((sig, tuple(ins), called))
            targets = callees(op) if op.name in _CALLERS or op.name.endswith(_CALLING) else ()
            if targets and (op.name == "func.call" or op.name.endswith(".composite")):
                # a call is its callee's ops at this call site (the call itself is how it is written:
                # the same helper inlined by hand is the same program)
                rets, sub, _ = self._run(targets[0], tuple(ins[:len(op.operands)]), inner_stack)
                count.update(sub)  # update, not +=: += rebuilds the whole Counter each call
                if op.name != "func.call":  # a composite's name and attributes are its own
                    count[fp] += 1
                for k, r in enumerate(op.results):
                    env[r] = rets[k] if k < len(rets) else (fp, k)
                continue
            count[fp] += 1
            for k, r in enumerate(op.results):
                env[r] = (fp, k)
            if targets:  # a custom call's called computations
                count[hash(("called", self._called(op_id, "called", inner_stack)))] += 1
        out = (tuple(env.get(v) or ("outside", str(values[v].type)) for v in f.returns), count,
               hash(frozenset(count.items())))
        self.memo[key] = out
        return out

    def _called(self, op_id: int, word: str, stack: tuple) -> int:
        """A hash of what the functions an op calls compute, their arguments free (a call inside a
        region, a custom call's called computations)."""
        module = self.module
        out = []
        for callee in callees(module.ops[op_id]):
            cf = module.func_by_name.get(callee)
            free = tuple((word, i, str(module.values[v].type)) for i, v in enumerate(cf.args)) if cf else ()
            rets, _, sub = self._run(callee, free, stack)
            out.append(hash((rets, sub)))
        return hash(tuple(out))

    def _value(self, env: dict, v: int):
        hit = env.get(v)
        return hit if hit is not None else ("outside", str(self.module.values[v].type))


def interface_changes(program_a: Program, program_b: Program, args_a: dict, args_b: dict, paired_a: dict,
                      paired_b: dict, lines_a: dict | None = None, lines_b: dict | None = None) -> tuple:
    """What differs in the two entry functions' interfaces, in words: an argument one side alone
    takes or takes with another type (args_a/args_b: value id -> identity), and a result that is
    another value ('result 0 is sine (line 3) in A, cosine (line 4) in B'): one computed alike
    (the whole program's fingerprints), or the result of ops the blocks paired (match_blocks'
    paired_a/paired_b), is the same value."""
    module_a, module_b = program_a.module, program_b.module
    out = []
    ta = {args_a.get(v, i): module_a.values[v].type for i, v in enumerate(module_a.entry.args)}
    tb = {args_b.get(v, i): module_b.values[v].type for i, v in enumerate(module_b.entry.args)}
    for ident in list(ta) + [i for i in tb if i not in ta]:
        word = f"argument {ident!r}" if isinstance(ident, str) else f"argument {ident}"
        if ident not in tb:
            out.append(f"{word} ({ta[ident]}) only in A")
        elif ident not in ta:
            out.append(f"{word} ({tb[ident]}) only in B")
        elif ta[ident] != tb[ident]:
            out.append(f"{word}: {ta[ident]} in A, {tb[ident]} in B")
    ra, rb = module_a.entry.returns, module_b.entry.returns
    if len(ra) != len(rb):
        out.append(f"{len(ra)} results in A, {len(rb)} in B")
    sa, sb = Side(module_a, (), args_a), Side(module_b, (), args_b)
    for k, (va, vb) in enumerate(zip(ra, rb)):
        t_a, t_b = module_a.values[va].type, module_b.values[vb].type
        if t_a != t_b:
            out.append(f"result {k}: {t_a} in A, {t_b} in B")
            continue
        if program_a.results[k] == program_b.results[k]:
            continue  # computed alike
        src_a, src_b = sa.source(va, paired_a), sb.source(vb, paired_b)
        (ka, pa), (kb, pb) = src_a, src_b
        if not same_source(src_a, src_b):
            out.append(f"result {k} is {source_words(sa, ka[0], pa, lines_a or {})} in A, "
                       f"{source_words(sb, kb[0], pb, lines_b or {})} in B")
    return tuple(out)
