"""Read the parts of an ExecuTorch .pte that `lowerkit inspect` shows, with the standard library.

A .pte is a flatbuffer (schema: `executorch/exir/_serialize/program.fbs`), optionally followed by
segments located by an extended header ("eh00"). ExecuTorch's own reader costs seconds to import
(torch and all of `executorch.exir`); this reads only the tables inspect needs. The tests check it
against ExecuTorch's reader (`_upstream.deserialize_pte`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

#: program.fbs field slots (declaration order) of the tables read here.
_PROGRAM_EXECUTION_PLAN, _PROGRAM_DELEGATE_DATA, _PROGRAM_SEGMENTS, _PROGRAM_NAMED_DATA = 1, 3, 4, 7
_NAMED_DATA_KEY, _NAMED_DATA_SEGMENT = 0, 1
_PLAN_NAME, _PLAN_INPUTS, _PLAN_OUTPUTS, _PLAN_OPERATORS, _PLAN_DELEGATES = 0, 3, 4, 6, 7
_OPERATOR_NAME, _OPERATOR_OVERLOAD = 0, 1
_DELEGATE_ID, _DELEGATE_PROCESSED, _DELEGATE_COMPILE_SPECS = 0, 1, 2
_REFERENCE_LOCATION, _REFERENCE_INDEX = 0, 1
_COMPILE_SPEC_KEY, _COMPILE_SPEC_VALUE = 0, 1
_INLINE_DATA = 0
_SEGMENT_OFFSET, _SEGMENT_SIZE = 0, 1
#: DataLocation values.
INLINE, SEGMENT = 0, 1
_EXTENDED_HEADER_MAGIC = b"eh00"


@dataclass(frozen=True)
class DelegateEntry:
    """One delegate of a method: backend id, compile specs and processed payload."""

    backend_id: str
    compile_specs: list[tuple[str, bytes]]
    payload: bytes


@dataclass(frozen=True)
class PlanEntry:
    """One method (execution plan)."""

    name: str
    inputs: int
    outputs: int
    #: (name, overload) of each operator the method calls on the CPU.
    operators: list[tuple[str, str]]
    delegates: list[DelegateEntry]


class _Table:
    """A flatbuffer table at `position` in `data`."""

    def __init__(self, data: bytes, position: int) -> None:
        self._data = data
        self._position = position
        self._vtable = position - _unpack("<i", data, position)
        self._vtable_size = _unpack("<H", data, self._vtable)

    def _field(self, slot: int) -> int | None:
        entry = 4 + 2 * slot
        if entry + 2 > self._vtable_size:
            return None
        offset = _unpack("<H", self._data, self._vtable + entry)
        return self._position + offset if offset else None

    def _target(self, slot: int) -> int | None:
        """Where the offset in field `slot` points to (a table, vector or string)."""
        at = self._field(slot)
        return None if at is None else at + _unpack("<I", self._data, at)

    def scalar(self, slot: int, fmt: str) -> int:
        at = self._field(slot)
        return 0 if at is None else _unpack(fmt, self._data, at)

    def blob(self, slot: int) -> bytes:
        """A string or a [ubyte] vector."""
        at = self._target(slot)
        if at is None:
            return b""
        length = _unpack("<I", self._data, at)
        if at + 4 + length > len(self._data):
            raise ValueError("vector past the end of the program")
        return self._data[at + 4 : at + 4 + length]

    def text(self, slot: int) -> str:
        return self.blob(slot).decode("utf-8")

    def length(self, slot: int) -> int:
        at = self._target(slot)
        return 0 if at is None else _unpack("<I", self._data, at)

    def table(self, slot: int) -> _Table | None:
        at = self._target(slot)
        return None if at is None else _Table(self._data, at)

    def tables(self, slot: int) -> list[_Table]:
        at = self._target(slot)
        if at is None:
            return []
        elements = [at + 4 + 4 * i for i in range(_unpack("<I", self._data, at))]
        return [_Table(self._data, e + _unpack("<I", self._data, e)) for e in elements]


def _unpack(fmt: str, data: bytes, at: int) -> int:
    value: int = struct.unpack_from(fmt, data, at)[0]
    return value


def _program(data: bytes) -> tuple[_Table, int]:
    """The Program table of the .pte `data`, and where its segments start (0: none)."""
    program_size, segment_base = len(data), 0
    if data[8:12] == _EXTENDED_HEADER_MAGIC:
        program_size, segment_base = struct.unpack_from("<QQ", data, 16)
    flatbuffer = data[:program_size]
    return _Table(flatbuffer, _unpack("<I", flatbuffer, 0)), segment_base


def _segment(data: bytes, segments: list[_Table], segment_base: int, index: int) -> bytes:
    start = segment_base + segments[index].scalar(_SEGMENT_OFFSET, "<Q")
    end = start + segments[index].scalar(_SEGMENT_SIZE, "<Q")
    if end > len(data):
        raise ValueError("a segment past the end of the file")
    return data[start:end]


def read_named_data(data: bytes) -> dict[str, bytes]:
    """The named data of the .pte `data` (e.g. a multifunction Core ML model), by key."""
    program, segment_base = _program(data)
    segments = program.tables(_PROGRAM_SEGMENTS)
    if not segment_base:
        return {}
    return {
        entry.text(_NAMED_DATA_KEY): _segment(data, segments, segment_base, entry.scalar(_NAMED_DATA_SEGMENT, "<I"))
        for entry in program.tables(_PROGRAM_NAMED_DATA)
    }


def read_plans(data: bytes) -> list[PlanEntry]:
    """The methods of the .pte `data`; ValueError / struct.error when it is damaged."""
    program, segment_base = _program(data)
    inline_data = program.tables(_PROGRAM_DELEGATE_DATA)
    segments = program.tables(_PROGRAM_SEGMENTS)

    def payload(reference: _Table | None) -> bytes:
        if reference is None:
            raise ValueError("a delegate without processed data")
        location = reference.scalar(_REFERENCE_LOCATION, "<b")
        index = reference.scalar(_REFERENCE_INDEX, "<I")
        if location == INLINE:
            return inline_data[index].blob(_INLINE_DATA)
        if location != SEGMENT or not segment_base:
            raise ValueError(f"delegate data at unknown location {location}")
        return _segment(data, segments, segment_base, index)

    plans = []
    for plan in program.tables(_PROGRAM_EXECUTION_PLAN):
        delegates = [
            DelegateEntry(
                backend_id=delegate.text(_DELEGATE_ID),
                compile_specs=[
                    (spec.text(_COMPILE_SPEC_KEY), spec.blob(_COMPILE_SPEC_VALUE))
                    for spec in delegate.tables(_DELEGATE_COMPILE_SPECS)
                ],
                payload=payload(delegate.table(_DELEGATE_PROCESSED)),
            )
            for delegate in plan.tables(_PLAN_DELEGATES)
        ]
        operators = [
            (op.text(_OPERATOR_NAME), op.text(_OPERATOR_OVERLOAD)) for op in plan.tables(_PLAN_OPERATORS)
        ]
        plans.append(
            PlanEntry(
                name=plan.text(_PLAN_NAME),
                inputs=plan.length(_PLAN_INPUTS),
                outputs=plan.length(_PLAN_OUTPUTS),
                operators=operators,
                delegates=delegates,
            )
        )
    return plans
