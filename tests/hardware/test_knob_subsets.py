"""Knob subsets come from the capability table (Effect.inputs, Effect.llm_refused), not from hand-kept lists:
a knob added to the table with its effect's inputs reaches every refusal and cache key that reads them, and a
new hand-kept tuple of knob names fails here."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

from hardware import capabilities as cap
from msbench.settings import DEFAULTS, KNOB_META, RULES, Settings
from workloads.base import PLAN_KNOBS

ROOT = Path(__file__).resolve().parents[2]

# Literal tuples of knob names that are not knob semantics: settings' combination rules (the knobs a rule names),
# the report's claim definitions and display columns, the published cases' required fields, and the workloads
# layer's plan refusal (workloads sits below hardware; checked against the table below).
NOT_SUBSETS = {
    ("msbench/settings.py", "RULES"),
    ("msbench/report/accuracy_widths.py", "NUMERICS_SHOWN"),
    ("msbench/report/claims.py", "accumulation_triples"),
    ("msbench/report/claims.py", "CLAIMS"),
    ("msbench/report/claims_llm.py", "plain_and_sharded_175b"),
    ("msbench/report/claims_tips.py", "cap_sweeps"),
    ("hardware/validation/cases.py", "STATED_KNOBS"),
    ("hardware/model/dataflow.py", "op_phase"),             # phase names that are also knob names
    ("workloads/base.py", "PLAN_KNOBS"),
    # the graph knobs a batch-rule template takes from the recipe: a claim about MindSpore's kernel graphs
    # that tests/hardware/test_batch_template.py checks against compiles, not an effect of the table
    ("hardware/model/graph.py", "TEMPLATE_KNOBS"),
    # config importers: a file format's fields mapped to knobs by name, and the knobs a stated value of
    # which is never dropped (the cell's identity: layout, batch, precision, mode, sink); a policy, not semantics
    ("msbench/importers/mindcv.py", "step_knobs"),
    ("msbench/importers/mindformers.py", "step_knobs"),
    ("msbench/importers/settle.py", "FIXED"),
}


def knob_tuples(path: Path) -> list[str]:
    """Names of the top-level statements (assignment target or def) holding a literal of >= 2 knob names."""
    found = []
    for stmt in ast.parse(path.read_text()).body:
        for node in ast.walk(stmt):
            if not isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                continue
            names = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in DEFAULTS]
            if len(names) >= 2 and len(names) >= len(node.elts) - 1:
                if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
                    found.append(stmt.name)
                elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                    target = stmt.targets[0] if isinstance(stmt, ast.Assign) else stmt.target
                    found.append(getattr(target, "id", ast.dump(target)))
                else:
                    found.append(f"line {stmt.lineno}")
                break
    return found


def test_no_hand_kept_knob_subsets():
    kept = {(str(p.relative_to(ROOT)), name)
            for package in ("msbench", "hardware", "workloads") for p in sorted((ROOT / package).rglob("*.py"))
            for name in knob_tuples(p)}
    assert kept - NOT_SUBSETS == set(), "derive these from hardware/capabilities.py (Effect.inputs)"


def test_every_model_input_is_declared():
    for knob, kinds in cap.EFFECTS.items():
        for kind in cap.MODEL_KINDS:
            assert kinds[kind].inputs <= set(cap.MODEL_INPUTS), (knob, kind)
            if cap.LAYOUT in kinds[kind].inputs:
                assert cap.LLM_PLAN in kinds[kind].inputs, f"{knob}: a layout knob is read by the LLM composition"


def non_default(knob: str):
    allowed = KNOB_META[knob]["allowed"]
    return next(v for v in allowed if v != DEFAULTS[knob] and v is not None)


@pytest.mark.parametrize("knob", cap.LLM_PLAN_KNOBS)
def test_llm_plan_knobs_are_refused_off_the_composition(knob):
    s = Settings(**{"mode": "graph", "amp_level": "O2", "devices": 8, "parallel_mode": "semi_auto", "tensor_parallel": 2,
                    "pipeline_stages": 2, "micro_batches": 2} | {knob: non_default(knob)}
                 if knob != "flash_attention" else {"amp_level": "O2", "flash_attention": True})
    reason = cap.refusal(s, "model:npu", cap.Facts(llm_composition=False))
    assert reason is not None and reason.startswith("LLM parallelism (") and knob in reason


def test_llm_refused_knobs_are_refused_on_the_composition():
    for knob, why in cap.llm_refused_knobs():
        assert cap.EFFECTS[knob]["model:npu"].llm_refused == why
    refused = dict(cap.llm_refused_knobs())
    s = Settings(mode="graph", sink=True, workers=4)
    assert cap.refusal(s, "model:npu", cap.Facts(llm_composition=True)) == f"workers=4: {refused['workers']}"
    assert cap.refusal(Settings(mode="graph", sink=True), "model:npu", cap.Facts(llm_composition=True)) is None


@pytest.mark.parametrize("knob", cap.knobs_changing(cap.LAYOUT))
def test_layout_knobs_are_refused_on_the_cpu_backend(knob):
    refused = [r for r in cap.REFUSALS if r.knob == knob and r.kinds == ("mindspore:cpu",)]
    assert refused, f"{knob} splits the step over cards; the CPU backend runs data parallel only"


def test_workloads_plan_refusal_covers_the_table():
    """Each LLM_PLAN knob either is refused by workloads.base (at its default) or cannot leave its default
    unless one of those does (a settings rule ties it to one)."""
    plan = dict(PLAN_KNOBS)
    assert all(DEFAULTS[k] == plain for k, plain in plan.items())
    for knob in cap.LLM_PLAN_KNOBS:
        if knob in plan:
            continue
        alone = types.SimpleNamespace(**{**DEFAULTS, knob: non_default(knob)})
        tied = [r for r in RULES if r.knobs[0] == knob and len(r.knobs) == 2 and r.knobs[1] in plan
                and r.violated(alone)]
        assert tied, f"{knob}: add it to workloads.base.PLAN_KNOBS (the LLM composition reads it)"
