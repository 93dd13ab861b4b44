"""``table StablehloCaseOptions { branch_subgraph_indices: [int]; }`` (LiteRT's schema.fbs), in
the layout ``flatc --python`` gives the ``tflite`` package's tables."""

import flatbuffers
from flatbuffers.compat import import_numpy

np = import_numpy()


class StablehloCaseOptions(object):
    __slots__ = ["_tab"]

    @classmethod
    def GetRootAs(cls, buf, offset=0):
        n = flatbuffers.encode.Get(flatbuffers.packer.uoffset, buf, offset)
        x = StablehloCaseOptions()
        x.Init(buf, n + offset)
        return x

    def Init(self, buf, pos):
        self._tab = flatbuffers.table.Table(buf, pos)

    def BranchSubgraphIndices(self, j):
        o = flatbuffers.number_types.UOffsetTFlags.py_type(self._tab.Offset(4))
        if o != 0:
            a = self._tab.Vector(o)
            return self._tab.Get(flatbuffers.number_types.Int32Flags, a + flatbuffers.number_types.UOffsetTFlags.py_type(j * 4))
        return 0

    def BranchSubgraphIndicesAsNumpy(self):
        o = flatbuffers.number_types.UOffsetTFlags.py_type(self._tab.Offset(4))
        if o != 0:
            return self._tab.GetVectorAsNumpy(flatbuffers.number_types.Int32Flags, o)
        return 0

    def BranchSubgraphIndicesLength(self):
        o = flatbuffers.number_types.UOffsetTFlags.py_type(self._tab.Offset(4))
        if o != 0:
            return self._tab.VectorLen(o)
        return 0

    def BranchSubgraphIndicesIsNone(self):
        o = flatbuffers.number_types.UOffsetTFlags.py_type(self._tab.Offset(4))
        return o == 0


def StablehloCaseOptionsStart(builder):
    builder.StartObject(1)


def StablehloCaseOptionsAddBranchSubgraphIndices(builder, branchSubgraphIndices):
    builder.PrependUOffsetTRelativeSlot(0, flatbuffers.number_types.UOffsetTFlags.py_type(branchSubgraphIndices), 0)


def StablehloCaseOptionsStartBranchSubgraphIndicesVector(builder, numElems):
    return builder.StartVector(4, numElems, 4)


def StablehloCaseOptionsEnd(builder):
    return builder.EndObject()
