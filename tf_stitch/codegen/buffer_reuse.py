"""Buffer reuse: row buffers whose lifetimes do not overlap share one array.

A buffered value lives from the loop that stores it to the last loop that loads it. Loops run
one after another within a row, so a buffer whose last load is in loop L is dead once loop L
has finished: a buffer first stored in a later loop may take its storage (a value's buffer is
reused once its last user in the block has run). Reading and writing one array in the same
loop is never allowed: element i of the new value could overwrite element j > i of the old one
before it is read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tf_stitch.codegen.kernel_ir import (
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Expr,
    Kernel,
    Let,
    Stmt,
)


@dataclass
class _Slot:
    buffer: Buffer
    free_after: int  # the last loop that loads a value living in it


def reuse_buffers(kernel: Kernel) -> str:
    """Renames the kernel's buffers onto shared slots (in place); says what it saved."""
    if len(kernel.buffers) < 2:
        return ""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for loop, stmts in enumerate(kernel.loops):
        for s in stmts:
            if isinstance(s, BufferStore):
                first.setdefault(s.buffer, loop)
            for name in _loads(s):
                last[name] = loop
    slots: list[_Slot] = []
    assignment: dict[str, str] = {}
    by_name = {b.name: b for b in kernel.buffers}
    for name in sorted(by_name, key=lambda n: (first.get(n, 0), n)):
        buf = by_name[name]
        start, end = first.get(name, 0), last.get(name, first.get(name, 0))
        slot = next(
            (s for s in slots if s.free_after < start and s.buffer.dtype == buf.dtype), None
        )
        if slot is None:
            slot = _Slot(replace(buf, name=f"buf{len(slots)}"), end)
            slots.append(slot)
        else:
            elements = max(slot.buffer.elements, buf.elements)
            slot.buffer = replace(slot.buffer, elements=elements)
            slot.free_after = end
        assignment[name] = slot.buffer.name
    before = sum(_bytes(b) for b in kernel.buffers)
    kernel.buffers = [s.buffer for s in slots]
    kernel.loops = [[_rename(s, assignment) for s in stmts] for stmts in kernel.loops]
    after = sum(_bytes(b) for b in kernel.buffers)
    if after == before:
        return ""
    return f"{len(by_name)} buffered values in {len(slots)} arrays: {after} B ({before} B unshared)"


def _bytes(b: Buffer) -> int:
    return b.elements * (1 if b.dtype == "bool" else 4)


def _loads(s: Stmt) -> list[str]:
    return _expr_loads(s.expr) if isinstance(s, Let) else []


def _expr_loads(e: Expr) -> list[str]:
    if isinstance(e, BufferLoad):
        return [e.buffer]
    if isinstance(e, Call):
        return [n for a in e.args for n in _expr_loads(a)]
    return []


def _rename(s: Stmt, names: dict[str, str]) -> Stmt:
    if isinstance(s, BufferStore):
        return BufferStore(names[s.buffer], s.var)
    if isinstance(s, Let):
        return Let(s.var, s.dtype, _rename_expr(s.expr, names))
    return s


def _rename_expr(e: Expr, names: dict[str, str]) -> Expr:
    if isinstance(e, BufferLoad):
        return BufferLoad(names[e.buffer])
    if isinstance(e, Call):
        return Call(e.op, tuple(_rename_expr(a, names) for a in e.args), e.attrs)
    return e
