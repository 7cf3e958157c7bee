"""Phases and data flow of a parsed kernel graph: which op is forward, backward, recompute or
optimizer work, and which forward outputs backward keeps alive (the activation memory).

Everything is read from the IR itself (scopes, cnode attributes, `%N` arguments), so recompute,
AMP casts and gradient accumulation change the answer the way MindSpore compiled them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Iterable

from hardware.model.ir import STRUCTURAL, VIEWS, IrGraph, IrNode, IrParam, op_bytes, to_op
from hardware.model.opgraph import Op, TensorSpec

PHASE_RANK = {"forward": 0, "recompute": 1, "backward": 2, "optimizer": 3}


def scope_phase(node: IrNode) -> str | None:
    """The phase a scope names outright, or None when it must be inherited from the data flow.

    Autodiff puts backward kernels under `Gradients/`. `Cell.recompute()` puts the block's forward
    kernels under `recompute_Default/...` (cnode attr `recompute: Bool(1)`) and their re-executed
    copies in backward under the same scope with `duplicated: Bool(1)`; only the copies are extra
    work. Optimizers run `Apply*` kernels under `Default/optimizer-<Name>`.
    """
    scope = node.scope.removeprefix("recompute_")
    if scope.startswith("Gradients/"):
        return "backward"
    if "duplicated: Bool(1)" in node.attrs:
        return "recompute"
    if node.type.startswith("Apply") or any(part.split("-")[0] in ("optimizer", "_optimizer", "opt")
                                            for part in scope.split("/")):
        return "optimizer"
    if scope.startswith("Default/") and not scope.startswith("Default/optimizer"):
        return "forward"
    return None        # "Expand/_SumExt" (an expanded primitive loses its scope), bare "Default", ""


def op_phase(node: IrNode, producer_phases: Iterable[str]) -> str:
    """The scope's phase when it names backward, recompute or optimizer work; otherwise the data flow's.

    Work fed by gradients is never forward, whatever its scope says (MindSpore gives the gradient
    accumulation adds the scope of some forward block): an expanded op (`Expand/...`) fed by
    gradients is part of backward; any other op fed by gradients (accumulation, loss-scale unscale,
    finite checks) is update work: optimizer. An op without a telling scope takes the latest phase
    among its producers (an expanded op inside a recomputed block is recompute work).
    """
    named = scope_phase(node)
    if named in ("backward", "recompute", "optimizer"):
        return named
    latest = max(producer_phases, key=PHASE_RANK.__getitem__, default="forward")
    if latest in ("backward", "optimizer"):
        return "backward" if latest == "backward" and node.scope.startswith("Expand/") else "optimizer"
    return named or latest


def feeds_backward(kernels: dict[str, IrNode], phases: dict[str, str], consumers: dict[str, list[str]]) -> list[str]:
    """Kernels the data flow called update work that backward reads: they are backward work, relabelled
    in `phases`, consumers before producers (a chain of such adds all feeds backward).

    Update work (accumulation, unscale, finite checks) feeds only the optimizer. A gradient add whose
    scope names no phase and whose sum backward reads again is the sum over the consumers of an
    activation used twice (mindyolo's YOLOv8 has eight such `AddN`s under a bare `Default` scope: as
    update work, its optimizer phase grew with the batch, to 23x msbench's YOLOv8n's at batch 256)."""
    moved: list[str] = []
    for key in reversed(list(kernels)):
        if (phases[key] == "optimizer" and scope_phase(kernels[key]) is None
                and any(phases[c] == "backward" for c in consumers.get(key, ()))):
            phases[key] = "backward"
            moved.append(key)
    return moved


def peak_live(intervals: Iterable[tuple[int, int, int]]) -> int:
    """Largest total size of (start, end, size) intervals alive at once, in execution order.

    With gradient accumulation the step holds one micro-batch's activations at a time, so the
    peak (not the sum) is what backward keeps; without it the two agree.
    """
    events = sorted((p, kind, size) for start, end, size in intervals for p, kind in ((start, 0), (end, 1)))
    live = peak = 0
    for _, kind, size in events:      # at one position, births (0) before deaths (1)
        live += size if kind == 0 else -size
        peak = max(peak, live)
    return peak


def is_backend_cast(node: IrNode) -> bool:
    return node.type == "Cast" and "is_backend_cast: Bool(1)" in node.attrs


def tuple_index(text: str) -> int:
    """The index argument of a TupleGetItem as the dump writes it: `I64(1)` (the last integer; stripping
    the non-digits would read `I64(1)` as 641 and select every output)."""
    numbers = re.findall(r"\d+", text)
    return int(numbers[-1]) if numbers else 0


def phase_of_sources(phases: dict[str, str], srcs: Iterable[tuple[str, int]]) -> str:
    return max((phases.get(k, "forward") for k, _ in srcs), key=PHASE_RANK.__getitem__, default="forward")


@dataclass(frozen=True)
class Analysis:
    ops: tuple[Op, ...]
    activation_bytes: int          # peak bytes of forward op outputs alive until a backward/recompute reader
    weight_params: tuple[IrParam, ...]
    meta: dict[str, Any]


def analyse(graph: IrGraph) -> Analysis:
    """Cost every kernel, assign phases and find the forward outputs that backward keeps alive."""
    # Each value is a tuple of sources (real node key, output index); views and plumbing are seen through.
    values: dict[str, tuple[tuple[str, int], ...]] = {}
    phases: dict[str, str] = {}
    kernels: dict[str, IrNode] = {}
    ops: list[Op] = []
    position: dict[str, int] = {}
    last_use: dict[tuple[str, int], int] = {}     # forward output -> last backward/recompute reader
    readers: dict[tuple[str, int], set[str]] = {}  # forward output -> the types of its backward readers
    dropped: dict[str, int] = {}
    consumers: dict[str, list[str]] = {}           # kernel -> the kernels that read its outputs

    backend_specs: dict[str, tuple[TensorSpec, ...]] = {}   # backend cast -> the tensor it converts
    backend_casts: dict[str, list[int]] = {}

    def sources(ref: str | None) -> tuple[tuple[str, int], ...]:
        return values.get(ref, ()) if ref else ()

    for node in graph.nodes:
        t = node.type
        if is_backend_cast(node):
            # The CPU kernel selection wraps a kernel it has no fp16 version of in Casts
            # (`is_backend_cast: Bool(1)`). Not part of the network: seen through, so the ops keep
            # the dtypes the network asks for (what an Ascend device runs); tallied in meta.
            values[node.key] = sources(node.args[0]) if node.args else ()
            backend_specs[node.key] = backend_specs.get(node.args[0] or "", node.in_specs[0] if node.in_specs else ())
            tally = backend_casts.setdefault(phase_of_sources(phases, sources(node.args[0] if node.args else None)), [0, 0])
            tally[0] += 1
            tally[1] += op_bytes(node)
            continue
        if any(a in backend_specs for a in node.args):
            node = replace(node, in_specs=tuple(backend_specs.get(a or "", spec) for a, spec in zip(node.args, node.in_specs)))
        if t == "TupleGetItem" and node.args:
            idx = tuple_index(node.consts[1]) if len(node.consts) > 1 else 0
            src = sources(node.args[0])
            values[node.key] = (src[idx],) if idx < len(src) else src
            continue
        if t in ("MakeTuple", "RealMakeTuple", "MakeTupleV2"):
            values[node.key] = tuple(s for a in node.args for s in sources(a))
            continue
        if t in ("Depend", "Load") or t in VIEWS:
            values[node.key] = sources(node.args[0]) if node.args else ()
            if t in VIEWS:
                dropped[t] = dropped.get(t, 0) + 1
            continue
        if t in STRUCTURAL:
            continue
        producers = [s for a in node.args for s in sources(a)]
        phase = op_phase(node, [phases[k] for k, _ in producers])
        phases[node.key] = phase
        for src, _ in producers:
            consumers.setdefault(src, []).append(node.key)
        kernels[node.key] = node
        values[node.key] = tuple((node.key, i) for i in range(max(1, len(node.out_specs))))
        position[node.key] = len(ops)
        if phase in ("backward", "recompute"):
            for src in producers:
                if phases[src[0]] == "forward":
                    last_use[src] = len(ops)
                    readers.setdefault(src, set()).add(t)
        ops.append(to_op(node, phase))

    moved = feeds_backward(kernels, phases, consumers)
    for key in moved:
        ops[position[key]] = replace(ops[position[key]], phase="backward")

    def size(src: tuple[str, int]) -> int:
        specs = kernels[src[0]].out_specs
        return specs[src[1]].nbytes if src[1] < len(specs) else 0

    activation = peak_live([(position[src[0]], end, size(src)) for src, end in last_use.items()])
    weights = tuple(p for p in graph.params if p.is_weight and p.spec is not None)
    kept: dict[tuple[str, int, str], list[int]] = {}
    for src in last_use:
        spec = kernels[src[0]].out_specs[src[1]] if src[1] < len(kernels[src[0]].out_specs) else None
        entry = kept.setdefault((kernels[src[0]].type, src[1], "+".join(sorted(readers[src]))), [0, 0, 0])
        entry[0] += 1
        entry[1] += size(src)
        entry[2] += spec.elements if spec is not None else 0
    meta = {
        "ir_nodes": len(graph.nodes),
        "view_ops_dropped": dict(sorted(dropped.items())),
        "kept_tensors": len(last_use),
        # Who keeps what: [producer type, output index, backward reader types, tensors, bytes, elements]
        # (summed, before the peak), so a device whose kernels keep other tensors can adjust (memory.py).
        "kept_activations": [[p, i, r, *v] for (p, i, r), v in sorted(kept.items())],
        # The same tensors one by one: [producer op index, output index, last reader's op index, reader types],
        # so a graph derived at another batch from these ops (scaling.derive_batch) recounts both exactly.
        "kept_list": sorted([position[src[0]], src[1], end, "+".join(sorted(readers[src]))]
                            for src, end in last_use.items()),
        "backend_casts": {phase: {"count": n, "bytes": b} for phase, (n, b) in sorted(backend_casts.items())},
        "gradient_sums_moved_to_backward": len(moved),
    }
    return Analysis(tuple(ops), activation, weights, meta)
