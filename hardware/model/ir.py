"""Parse MindSpore's final kernel-graph IR dump into nodes, and cost one node as an `Op` (FLOPs, bytes, unit).

The dump is what MindSpore writes with `MS_DEV_SAVE_GRAPHS=1`,
`MS_DEV_DUMP_IR_PASSES=hwopt_common_final_graph` (one `hwopt_common_final_graph_<id>_<n>.ir` per
kernel graph): the kernels that really run, in execution order, after AMP casts, autodiff,
recompute and the optimizer are in place. Each CNode is written as

    %5(name) = PrimFunc_ReLU(%4) primitive_attrs: {...} cnode_attrs: {...}
        : (<Tensor[Float32], (4, 8, 16, 16)>) -> (<Tensor[Float32], (4, 8, 16, 16)>)
        # Scope: (Default/network-WithLossCell/_backbone-Net/b-Blk/r-ReLU)

(see reference/mindspore-2.10-cpu.md §5). The parser keeps the data flow (`%N` and `%paraN_name`
arguments) for `dataflow.py`, which assigns phases and finds the activations kept for backward.
Pure text processing: no MindSpore import.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from hardware.model.opgraph import Op, TensorSpec

NODE = re.compile(r"^\s+%(\d+)\([^)]*\) = ([A-Za-z0-9_]+)\((.*)$")
PARAM = re.compile(r"^%(para\d+_\S+?): (<.*?>)\s.*IsWeight: (true|false)")
SCOPE = re.compile(r"^\s+# Scope: \((.*)\)\s*$")
SUBGRAPH = re.compile(r"^subgraph @(\S+)\(")
TENSOR = re.compile(r"^(?:Ref\[)?Tensor\[(\w+)\]\]?, \(([-\d, ]*)\)")
TUPLE_TYPES = re.compile(r"Tensor\[(\w+)\](?:\*(\d+))?")
SHAPE = re.compile(r"\(([-\d, ]*)\)")
REF = re.compile(r"^%(\d+|para\d+_\S+)$")
BOOL_ARG = re.compile(r"^Bool\(([01])\)$")

# Graph plumbing: no kernel runs for these.
STRUCTURAL = frozenset({"Load", "UpdateState", "Depend", "TupleGetItem", "MakeTuple", "Return",
                        "RealTupleGetItem", "RealMakeTuple", "MakeTupleV2"})
# "Nop nodes": MindSpore's backend turns these into aliases of their input (no kernel launch,
# no copy) — `opt::IsNopNode` in the kernel-graph runtime. Dropped from the op list, seen through
# in the data flow.
VIEWS = frozenset({"Reshape", "Flatten", "ExpandDims", "Squeeze", "FlattenGrad", "Unsqueeze"})
CUBE = frozenset({"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv3D",
                  "Conv3DBackpropInput", "Conv3DBackpropFilter", "MatMul", "BatchMatMul",
                  "MatMulExt", "BatchMatMulExt", "Dense", "DepthwiseConv2dNative"})


@dataclass(frozen=True)
class IrNode:
    """One CNode of the dump, before costing. `args[i]` is a `%N`/`%paraN_name` reference or None (a constant)."""

    key: str                                   # "<subgraph>/%N" (prefixed "<file no>:" by read_dumps)
    type: str                                  # PrimFunc_ prefix removed
    scope: str
    args: tuple[str | None, ...]
    consts: tuple[str, ...]                    # the argument texts (for Bool transpose flags, TupleGetItem index)
    in_specs: tuple[tuple[TensorSpec, ...], ...]   # per argument: its tensors (empty for scalars, monads)
    out_specs: tuple[TensorSpec, ...]
    attrs: str                                 # the rest of the node line (primitive_attrs etc.)


@dataclass(frozen=True)
class IrParam:
    name: str                                  # "para3_b.bn.gamma"
    spec: TensorSpec | None
    is_weight: bool

    @property
    def ref_key(self) -> str:
        return self.name.split("_", 1)[1] if "_" in self.name else self.name


@dataclass(frozen=True)
class IrGraph:
    params: tuple[IrParam, ...]
    nodes: tuple[IrNode, ...]


# ---------------------------------------------------------------- abstracts: "<Tensor[Float32], (4, 8)>"

def split_abstracts(line: str) -> tuple[list[str], list[str]]:
    """`: (<a>, <b>) -> (<c>)` -> (["a", "b"], ["c"]): top-level `<...>` items either side of `->`."""
    ins: list[str] = []
    outs: list[str] = []
    target, depth, start, i = ins, 0, 0, 0
    while i < len(line):
        if depth == 0 and line.startswith("->", i):
            target, i = outs, i + 2
            continue
        ch = line[i]
        if ch == "<":
            if depth == 0:
                start = i + 1
            depth += 1
        elif ch == ">":
            depth -= 1
            if depth == 0:
                target.append(line[start:i])
        i += 1
    return ins, outs


def parse_shape(text: str) -> tuple[int, ...]:
    return tuple(int(v) for v in text.split(",") if v.strip())


def parse_abstract(item: str) -> tuple[TensorSpec, ...]:
    """The tensors of one abstract: one for a tensor, several for a tuple of tensors, none for scalars/monads."""
    m = TENSOR.match(item)
    if m:
        return (TensorSpec(m.group(1), parse_shape(m.group(2))),)
    if item.startswith("Tuple[") and "TupleShape(" in item:
        head, _, tail = item.partition("TupleShape(")
        dtypes = [d for d, n in TUPLE_TYPES.findall(head) for _ in range(int(n or 1))]
        inner = tail[: matching_paren(tail, 0)]
        shapes = [parse_shape(s) for s in SHAPE.findall(inner)]
        if dtypes and len(dtypes) == len(shapes):
            return tuple(TensorSpec(d, s) for d, s in zip(dtypes, shapes))
    return ()


def matching_paren(text: str, start: int) -> int:
    """Index of the `)` closing the group that begins at `start` (text[start] is just inside it)."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def split_args(text: str) -> tuple[list[str], str]:
    """`%1, %para2_w, Bool(0)) primitive_attrs: {...}` -> (["%1", "%para2_w", "Bool(0)"], attrs text)."""
    end = matching_paren(text, 0)
    args, depth, start = [], 0, 0
    body = text[:end]
    for i, ch in enumerate(body):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(body[start:i].strip())
            start = i + 1
    if body[start:].strip():
        args.append(body[start:].strip())
    return args, text[end + 1:]


# ---------------------------------------------------------------- the dump

def parse_ir(text: str) -> IrGraph:
    """Parse one dump file's text into parameters and nodes (in execution order)."""
    lines = text.splitlines()
    params: list[IrParam] = []
    nodes: list[IrNode] = []
    graph = "g"
    i = 0
    while i < len(lines):
        line = lines[i]
        pm = PARAM.match(line)
        if pm:
            specs = parse_abstract(pm.group(2)[1:-1])
            params.append(IrParam(pm.group(1), specs[0] if specs else None, pm.group(3) == "true"))
            i += 1
            continue
        sg = SUBGRAPH.match(line)
        if sg:
            graph = sg.group(1)
        m = NODE.match(line)
        if not m:
            i += 1
            continue
        # The node's own text may span lines (constant tensor values); it ends at the abstract line.
        body = [m.group(3)]
        j = i + 1
        while j < len(lines) and not lines[j].lstrip().startswith(": (") and not NODE.match(lines[j]):
            body.append(lines[j])
            j += 1
        if j >= len(lines) or not lines[j].lstrip().startswith(": ("):
            i = j
            continue
        arg_texts, attrs = split_args("\n".join(body))
        ins, outs = split_abstracts(lines[j].split(":", 1)[1])
        scope = ""
        k = j + 1
        while k < len(lines) and not NODE.match(lines[k]) and lines[k].startswith("      "):
            sm = SCOPE.match(lines[k])
            if sm:
                scope = sm.group(1)
                break
            k += 1
        args = tuple(_ref(graph, a) for a in arg_texts)
        in_specs = tuple(parse_abstract(a) for a in ins)
        if len(in_specs) != len(args):   # keep positions aligned even for odd abstracts
            in_specs = (in_specs + ((),) * len(args))[: len(args)]
        out_specs = tuple(s for o in outs for s in parse_abstract(o))
        nodes.append(IrNode(f"{graph}/%{m.group(1)}", m.group(2).removeprefix("PrimFunc_"), scope,
                            args, tuple(arg_texts), in_specs, out_specs, attrs))
        i = j + 1
    return IrGraph(tuple(params), tuple(nodes))


def _ref(graph: str, arg: str) -> str | None:
    m = REF.match(arg)
    if not m:
        return None
    return m.group(1) if m.group(1).startswith("para") else f"{graph}/%{m.group(1)}"


def read_dumps(paths: Iterable[Path]) -> IrGraph:
    """Merge the final-graph dumps of one compile (one file per kernel graph), in graph-id order."""
    params: dict[str, IrParam] = {}
    nodes: list[IrNode] = []
    for n, path in enumerate(sorted(paths, key=dump_order)):
        g = parse_ir(Path(path).read_text())
        for p in g.params:               # the same Parameter appears in every graph that reads it
            params.setdefault(p.ref_key, p)
        nodes.extend(IrNode(f"{n}:{x.key}", x.type, x.scope,
                            tuple(a if a is None or a.startswith("para") else f"{n}:{a}" for a in x.args),
                            x.consts, x.in_specs, x.out_specs, x.attrs) for x in g.nodes)
    return IrGraph(tuple(params.values()), tuple(nodes))


def dump_order(path: Path) -> tuple[int, int]:
    """`hwopt_common_final_graph_<graph id>_<pass no>.ir` -> (graph id, pass no)."""
    parts = Path(path).stem.rsplit("_", 2)
    try:
        return int(parts[-2]), int(parts[-1])
    except (ValueError, IndexError):
        return (1 << 30, 0)


# ---------------------------------------------------------------- cost of one op

def unit_of(op_type: str) -> str:
    return "cube" if op_type in CUBE else "vector"


def transpose_flags(node: IrNode) -> tuple[bool, bool]:
    """MatMul/BatchMatMul transpose flags: positional Bool args (2.x PrimFunc) or old-style attributes."""
    flags = [BOOL_ARG.match(c) for c in node.consts[2:4]]
    if len(flags) == 2 and all(flags):
        return flags[0].group(1) == "1", flags[1].group(1) == "1"  # type: ignore[union-attr]
    ta = re.search(r"transpose_(?:a|x1): Bool\(1\)", node.attrs) is not None
    tb = re.search(r"transpose_(?:b|x2): Bool\(1\)", node.attrs) is not None
    return ta, tb


def first(specs: Sequence[tuple[TensorSpec, ...]], index: int) -> TensorSpec | None:
    return specs[index][0] if index < len(specs) and specs[index] else None


def op_flops(node: IrNode) -> int:
    """2 x MAC for matrix ops (conv weights are NCHW `(Cout, Cin/groups, kh, kw)`, so one output
    element costs prod(weight.shape[1:]) MACs); any other op ~1 per element of the largest tensor it
    touches (elementwise, norm, reduce, data movement)."""
    t, ins, outs = node.type, node.in_specs, node.out_specs
    out = outs[0] if outs else None
    if t in ("Conv2D", "Conv3D", "DepthwiseConv2dNative") and out and first(ins, 1):
        return 2 * out.elements * math.prod(first(ins, 1).shape[1:])  # type: ignore[union-attr]
    if t in ("Conv2DBackpropInput", "Conv3DBackpropInput") and first(ins, 0) and first(ins, 1):
        return 2 * first(ins, 0).elements * math.prod(first(ins, 1).shape[1:])  # type: ignore[union-attr]
    if t in ("Conv2DBackpropFilter", "Conv3DBackpropFilter") and first(ins, 0) and out:
        return 2 * first(ins, 0).elements * math.prod(out.shape[1:])  # type: ignore[union-attr]
    if t in ("MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt", "Dense") and first(ins, 0) and out:
        a = first(ins, 0).shape  # type: ignore[union-attr]
        transpose_a = transpose_flags(node)[0] if t in ("MatMul", "BatchMatMul") else False
        k = a[-2] if transpose_a and len(a) >= 2 else (a[-1] if a else 1)
        return 2 * out.elements * k
    tensors = [s for group in ins for s in group] + list(outs)
    return max((s.elements for s in tensors), default=0)


def op_bytes(node: IrNode) -> int:
    """Bytes read plus written if nothing stays on chip: every tensor input and output once."""
    return sum(s.nbytes for group in node.in_specs for s in group) + sum(s.nbytes for s in node.out_specs)


def to_op(node: IrNode, phase: str) -> Op:
    return Op(type=node.type, scope=node.scope,
              inputs=tuple(s for group in node.in_specs for s in group), outputs=node.out_specs,
              flops=op_flops(node), bytes=op_bytes(node), unit=unit_of(node.type), phase=phase)
