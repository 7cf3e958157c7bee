"""Ops and tensor specs key the costed-kernel memo, so their hash is computed once per object; it must equal the
dataclass's own (the field tuple's) and never travel in a pickle, since a string's hash differs by process."""

from __future__ import annotations

import pickle
import subprocess
import sys

from hardware.model.opgraph import Op, TensorSpec

SPEC = TensorSpec("Float16", (32, 64))
OP = Op("MatMul", "Default/net/Dense", (SPEC, SPEC), (SPEC,), 131072, 12288, "cube", "forward")


def test_the_hash_is_the_field_tuples_and_equal_ops_hash_alike():
    assert hash(SPEC) == hash(("Float16", (32, 64)))
    twin = Op("MatMul", "Default/net/Dense", (SPEC, SPEC), (SPEC,), 131072, 12288, "cube", "forward")
    assert twin == OP and hash(twin) == hash(OP) and {OP: 1}[twin] == 1


def test_a_pickled_op_hashes_as_the_receiving_process_computes_it():
    hash(OP), hash(SPEC)                                  # cache both hashes in this process
    assert "_hash" not in pickle.loads(pickle.dumps(OP)).__dict__
    code = ("import pickle, sys; from hardware.model.opgraph import Op, TensorSpec; "
            "op = pickle.loads(sys.stdin.buffer.read()); "
            "fresh = Op(op.type, op.scope, op.inputs, op.outputs, op.flops, op.bytes, op.unit, op.phase); "
            "print(hash(op) == hash(fresh) and {fresh: 1}.get(op) == 1)")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(OP), capture_output=True, check=True,
                         env={"PYTHONHASHSEED": "12345", "PATH": ""}, cwd=None)
    assert out.stdout.strip() == b"True"
