"""Copies taken out of an unoptimized HLO module before XLA:GPU compiles it deviceless.

TensorFlow's HLO of a function that returns or assigns values it also reads (a training step's
updated weights, a Keras LSTM's state) holds `copy` instructions at its `XLA_Retvals`, which the
HLO -> StableHLO conversion JAX's compiler takes refuses ("failed to legalize operation
'mhlo.copy' that was explicitly marked illegal"). A copy computes its operand: each use of one
reads its operand instead, and XLA inserts the copies it needs when it compiles (after this,
they are not counted twice either).
"""

from __future__ import annotations

from tensorflow.compiler.xla.service import hlo_pb2


def without_copies(proto: bytes) -> bytes:
    """The serialized HloModuleProto `proto` with its `copy` instructions bypassed."""
    module = hlo_pb2.HloModuleProto.FromString(proto)
    for computation in module.computations:
        source = {
            i.id: i.operand_ids[0]
            for i in computation.instructions
            if i.opcode == "copy" and len(i.operand_ids) == 1
        }
        if not source:
            continue

        kept = [i for i in computation.instructions if i.id not in source]
        for instruction in kept:
            instruction.operand_ids[:] = [_resolve(source, r) for r in instruction.operand_ids]
            preds = [_resolve(source, r) for r in instruction.control_predecessor_ids]
            instruction.control_predecessor_ids[:] = list(dict.fromkeys(preds))
        computation.root_id = _resolve(source, computation.root_id)
        del computation.instructions[:]
        computation.instructions.extend(kept)
    return module.SerializeToString(deterministic=True)


def _resolve(source: dict[int, int], ref: int) -> int:
    """What `ref` computes once copies are bypassed: the first operand that is not a copy."""
    while ref in source:
        ref = source[ref]
    return ref
