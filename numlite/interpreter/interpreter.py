"""``numlite.Interpreter``: the ``tf.lite.Interpreter`` API over NumPy kernels.

A script written for ``tf.lite.Interpreter`` (or ``ai_edge_litert.interpreter.Interpreter``)
runs unchanged with ``numlite.Interpreter``: same methods, same detail dictionaries, errors that
derive from the same built-in exception types.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Mapping

import numpy as np

from numlite.errors import CancelledError, InvalidInputError, ResizeError, StateError, UnsupportedOperatorError
from numlite.interpreter.denormals import FlushDenormals
from numlite.interpreter.details import InterpreterDetails, compress_zero_points
from numlite.interpreter.planner import SharedArena
from numlite.interpreter.profiler import Profiler
from numlite.interpreter.runtime import SubgraphRuntime
from numlite.interpreter.threads import BlasThreads
from numlite.jit import mode_from
from numlite.jit.engine import JitManager
from numlite.kernels import KERNELS, Kernel
from numlite.kernels.custom import CustomOp, resolve_custom_ops
from numlite.kernels.variables import VariableStore
from numlite.model import Model, read_model, read_model_file
from numlite.model.verifier import subgraph_calls, verify_model


class Interpreter(InterpreterDetails):
    """Runs a ``.tflite`` model with NumPy.

    Args:
      model_path: path of a ``.tflite`` file (memory-mapped, weights are not copied).
      model_content: the model's bytes, or a :class:`numlite.model.Model`.
      num_threads: the number of threads NumPy's BLAS (which runs the convolutions, fully
        connected layers and matrix products) may use during ``invoke()``; None or -1 leave the
        BLAS default (its size). Applied through ``threadpoolctl`` (see :mod:`numlite.interpreter.threads`).
        The compiled engine's parallel kernels run on as many. An invoke uses fewer, as few as
        one, while other processes keep the cores busy
        (:func:`numlite.kernels.parallel.threads_now`); the compiled engine gives the same bits.
      experimental_preserve_all_tensors: keep every intermediate tensor readable after invoke
        (each gets its own memory instead of a shared arena slot).
      custom_ops: Python implementations of ops, by custom code (or builtin name, to override
        numlite's kernel): ``{"my_fused_swish": fn, "MyOp": MyKernel}``. A function gets the
        input arrays positionally and the op's options (a custom op's decoded flexbuffer map) as
        keyword arguments and returns an array or a tuple of arrays; a
        :class:`numlite.kernels.Kernel` subclass prepares and fills preallocated outputs itself.
        See :mod:`numlite.kernels.custom`.
      custom_kernels: the older name of ``custom_ops``, accepted alike.
      check_cancelled: called between operators during invoke; returning True stops the invoke
        with ``CancelledError`` (as ``cancel()`` from another thread does).
      profile: record an event per operator run and per invoke in ``interpreter.profiler``
        (see :mod:`numlite.interpreter.profiler`); off by default, at no cost.
      flush_denormals: treat denormal floats as zero during invoke, as LiteRT's default kernels
        do (and for the same reason: they are very slow); False computes with them exactly,
        as LiteRT's builtin kernels do. See :mod:`numlite.interpreter.denormals`.
      experimental_compress_quantization_zero_points: report per-channel zero points that are
        all equal as one in tensor details, as LiteRT does with this option.
      jit: the compiled engine (Numba, see :mod:`numlite.jit`): False runs on NumPy; True
        compiles at ``allocate_tensors()`` and runs compiled; ``"auto"`` runs on NumPy and
        compiles hot models in the background. None (the default) reads ``NUMLITE_JIT``
        (unset: ``"auto"``). Models or ops it does not cover run on NumPy (``jit_report()``).
      Other tf.lite keyword arguments (delegates, op resolver type...) are accepted and ignored.
      LiteRT's underscored debugging methods (``_get_ops_details``...) come from
      :class:`numlite.interpreter.details.InterpreterDetails`.
    """

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        model_content: bytes | Model | None = None,
        experimental_delegates: Any = None,
        num_threads: int | None = None,
        experimental_op_resolver_type: Any = None,
        experimental_preserve_all_tensors: bool = False,
        custom_ops: Mapping[str, CustomOp] | None = None,
        custom_kernels: Mapping[str, CustomOp] | None = None,
        check_cancelled: Callable[[], bool] | None = None,
        profile: bool = False,
        flush_denormals: bool = True,
        jit: bool | str | None = None,
        **_ignored: Any,
    ) -> None:
        if (model_path is None) == (model_content is None):
            raise InvalidInputError("give exactly one of model_path and model_content")
        if num_threads is not None and num_threads < 1 and num_threads != -1:
            raise InvalidInputError(f"num_threads should be >= 1 (or -1), got {num_threads}")
        if isinstance(model_content, Model):
            verify_model(model_content)  # files are verified as they are read
            self.model = model_content
        elif model_content is not None:
            self.model = read_model(model_content)
        else:
            self.model = read_model_file(model_path)
        self.num_threads = num_threads
        self.preserve_all_tensors = bool(experimental_preserve_all_tensors)
        self._compress_zero_points = bool(_ignored.get("experimental_compress_quantization_zero_points", False))
        self.kernels = {**KERNELS, **_custom_table(custom_ops, custom_kernels)}
        self._subgraphs: dict[int, SubgraphRuntime] = {}
        self._signatures = {s.key: s for s in self.model.signature_defs}
        callees = {s: [c for _, _, c in calls] for s, calls in subgraph_calls(self.model).items()}
        self.arena = SharedArena(callees)
        self.variables = VariableStore()  # resource variables, shared by all subgraphs
        self.initialized: set[int] = set()  # init subgraphs that CALL_ONCE has run
        self.control_flow_counters = {"bytes_copied": 0, "arrays_allocated": 0}
        self.check_cancelled = check_cancelled
        self.profiler: Profiler | None = Profiler() if profile else None  # sees every operator run
        self._float_mode = FlushDenormals() if flush_denormals else contextlib.nullcontext()
        limit_threads = num_threads is not None and num_threads != -1
        self._threads = BlasThreads(num_threads if limit_threads else None)  # fewer while the cores are busy
        self._cancel_requested = False
        self.watching = check_cancelled is not None  # the invoke loop calls before_op/after_op
        jit_mode = mode_from(jit)
        self._jit = JitManager(self, jit_mode) if jit_mode else None

    # -- model-wide checks and subgraph access ---------------------------------------------------

    def _check_supported(self) -> None:
        missing, custom = [], False
        for s, n, op in self.model.iter_operators():
            name = self.model.op_name(op)
            if name not in self.kernels:
                code = self.model.operator_codes[op.opcode_index]
                custom = custom or code.builtin == "CUSTOM"
                kind = "custom op " if code.builtin == "CUSTOM" else ""
                missing.append(f"{kind}{name} (subgraph {s}, node {n})")
        if missing:
            hint = "; register custom ops with Interpreter(custom_ops={name: function or Kernel class})" if custom else ""
            raise UnsupportedOperatorError(
                f"numlite has no kernel for {len(missing)} operator(s) in this model: " + "; ".join(missing) + hint
            )

    def subgraph(self, index: int = 0) -> SubgraphRuntime:
        """The runtime of one subgraph (created on first use)."""
        found = self._subgraphs.get(index)  # every tensor access goes through here: the common case first
        if found is not None:
            return found
        if not 0 <= index < len(self.model.subgraphs):
            raise InvalidInputError(f"subgraph index {index} is out of range: the model has {len(self.model.subgraphs)}")
        if index not in self._subgraphs:
            self._subgraphs[index] = SubgraphRuntime(self, index, self.kernels)
        return self._subgraphs[index]

    @property
    def arena_bytes(self) -> int:
        """Bytes of the arena shared by all allocated subgraphs (intermediate tensors)."""
        return self.arena.total_bytes

    @property
    def separate_arena_bytes(self) -> int:
        """What the arenas would take if every subgraph had its own (for comparison)."""
        return sum(sg.arena_bytes for sg in self._subgraphs.values() if sg.allocated)

    # -- the tf.lite API ------------------------------------------------------------------------

    def allocate_tensors(self) -> None:
        """Prepare every node of the main subgraph and plan its memory.

        Raises UnsupportedOperatorError listing every operator of the model (in any subgraph)
        that has no kernel, and PrepareError naming the node whose inputs are invalid.
        """
        self._allocate(self.subgraph(0))

    def _allocate(self, sg: SubgraphRuntime) -> None:
        self._check_supported()
        sg.allocate()  # and, through control-flow ops, the subgraphs it calls
        for index, region in self.arena.layout().items():
            callee = self._subgraphs[index]
            callee.use_arena(region)
            callee.bind()
        if self._jit is not None:
            self._jit.allocated(sg)

    def invoke(self) -> None:
        """Run the main subgraph on the inputs set with ``set_tensor``.

        ``control_flow_counters`` then holds the bytes copied and arrays allocated by control-flow
        ops during this invoke.
        """
        jit = self._jit
        unwatched = self.check_cancelled is None and self.profiler is None
        if jit is not None and jit.lean is not None and unwatched and not self.watching:
            # The compiled model ran this way before and nothing has changed since (the closure
            # checks it: see CompiledModel.lean): an invoke of a tiny model costs about a
            # microsecond, each Python call on the way a tenth of one.
            self.control_flow_counters = {"bytes_copied": 0, "arrays_allocated": 0}
            if jit.lean():
                return
        sg = self.subgraph(0)
        compiled = jit.fast(sg) if jit is not None else None
        if compiled is not None and unwatched and sg.inputs_set.issuperset(sg.graph.inputs):
            # What _ready and _invoke do for a compiled model that is current, in one place.
            self.control_flow_counters = {"bytes_copied": 0, "arrays_allocated": 0}
            self._cancel_requested = False
            self.watching = False
            compiled.run()
            # Inputs stay set until the runtime is prepared again, which the closure notices.
            jit.lean = compiled.lean()
            return
        self._invoke(self._ready(sg))

    def _invoke(self, sg: SubgraphRuntime) -> None:
        self.control_flow_counters = {"bytes_copied": 0, "arrays_allocated": 0}
        self._cancel_requested = False  # a cancel() before this invoke does not stop it
        self.watching = self.check_cancelled is not None or self.profiler is not None  # _update_watching(), inlined
        compiled = self._jit.ready(sg) if self._jit is not None and not self.watching else None
        if compiled is not None:  # flush-to-zero applies to compiled code too; errstate and BLAS do not
            if compiled.sets_float_mode:  # the compiled function sets and restores it itself
                compiled.run()
            else:
                with self._float_mode:
                    compiled.run()
            if sg.index == 0:  # what invoke() runs: from now on through the closure (see invoke)
                self._jit.lean = compiled.lean()
            return
        # Floating-point exceptions are results here, not errors: exp overflowing to inf, 0/0
        # giving NaN, as in LiteRT. Ignored once for the whole invoke, so that small kernels
        # need no errstate of their own (about 0.7 us each, a loop body's LOGISTIC's cost).
        with self._float_mode, self._threads, np.errstate(all="ignore"):
            if self.profiler is None:
                if self._jit is not None and not self.watching:
                    self._jit.invoke(sg, sg.invoke)  # compiled when ready, else NumPy
                else:
                    sg.invoke()
                return
            self.profiler.begin_invoke(sg)
            try:
                sg.invoke()
            finally:
                self.profiler.end_invoke(sg)

    # -- cancellation and per-operator hooks -----------------------------------------------------

    def cancel(self) -> None:
        """Stop the running invoke (from another thread) before its next operator, also inside
        WHILE loops (a compiled loop looks before each cond and body, not each operator). The
        invoke raises ``CancelledError``; the next invoke runs normally."""
        self._cancel_requested = True
        self.watching = True
        if self._jit is not None:
            self._jit.cancel()  # the flag compiled loops poll

    def jit_report(self) -> dict[str, Any]:
        """What the compiled engine runs and why the rest runs on NumPy (see :mod:`numlite.jit`)."""
        if self._jit is None:
            return {"mode": False, "subgraphs": {}}
        return self._jit.report()

    def _update_watching(self) -> None:
        self.watching = self._cancel_requested or self.check_cancelled is not None or self.profiler is not None

    def before_op(self, runtime: SubgraphRuntime, step: Any) -> None:
        """Called by the invoke loop before each operator while ``watching`` is set."""
        if self._cancel_requested or (self.check_cancelled is not None and self.check_cancelled()):
            self._cancel_requested = False
            raise CancelledError(f"invoke cancelled before {runtime.where(step)}")
        if self.profiler is not None:
            self.profiler.before_op(runtime, step)

    def after_op(self, runtime: SubgraphRuntime, step: Any) -> None:
        """Called by the invoke loop after each operator while ``watching`` is set."""
        if self.profiler is not None:
            self.profiler.after_op(runtime, step)

    def _ready(self, sg: SubgraphRuntime) -> SubgraphRuntime:
        """Check that a subgraph can be invoked: allocated, consistent, every input given."""
        if sg.allocation_error is not None:
            raise StateError(
                f"subgraph {sg.index} is not ready: its last allocate_tensors() failed"
                f" ({sg.allocation_error}); fix the cause and allocate again"
            )
        if not sg.allocated:
            raise StateError(
                f"subgraph {sg.index} is not allocated: call allocate_tensors() first"
                " (and again after resize_tensor_input)"
            )
        if sg.inputs_set.issuperset(sg.graph.inputs):  # every input set (the list below costs ~0.4 us)
            return sg
        missing = [i for i in sg.graph.inputs if i not in sg.inputs_set and not sg.known[i]]
        if missing:
            raise StateError(
                f"input tensor(s) without data: {sg.describe(missing)}; give them values with set_tensor()"
            )
        return sg

    def get_input_details(self) -> list[dict[str, Any]]:
        return [self._tensor_details(i, 0) for i in self.model.subgraphs[0].inputs]

    def get_output_details(self) -> list[dict[str, Any]]:
        return [self._tensor_details(i, 0) for i in self.model.subgraphs[0].outputs]

    def get_tensor_details(self, subgraph_index: int = 0) -> list[dict[str, Any]]:
        sg = self.subgraph(subgraph_index)
        return [self._tensor_details(i, subgraph_index) for i in range(len(sg.graph.tensors))]

    def num_subgraphs(self) -> int:
        return len(self.model.subgraphs)

    def set_tensor(self, tensor_index: int, value: Any, subgraph_index: int = 0) -> None:
        """Copy ``value`` into a tensor; its dtype and shape must match the tensor's exactly."""
        sg = self.subgraph(subgraph_index)
        i = self._check_index(sg, tensor_index)
        value = np.asarray(value)
        target = sg.arrays[i]
        if value.dtype == sg.dtypes[i] and value.shape == sg.shapes[i] and target is not None and not sg.known[i]:
            target[...] = value  # the common case, checked at once (np.copyto's own checks cost ~0.15 us more)
            sg.inputs_set.add(i)
            return
        t = sg.graph.tensors[i]
        want = sg.dtypes[i]
        if value.dtype != want:
            raise InvalidInputError(
                f"Cannot set tensor {i} ({t.name!r}): got value of type {value.dtype.name.upper()}"
                f" but expected type {want.name.upper()}"
            )
        shape = sg.shapes[i]
        if shape is None or tuple(value.shape) != tuple(shape):
            raise InvalidInputError(
                f"Cannot set tensor {i} ({t.name!r}): dimension mismatch, got shape {tuple(value.shape)}"
                f" but the tensor has shape {shape}"
            )
        if target is None or sg.known[i]:
            raise StateError(f"Cannot set tensor {i} ({t.name!r}): it has no writable data; call allocate_tensors() first")
        np.copyto(target, value)
        sg.inputs_set.add(i)

    def get_tensor(self, tensor_index: int, subgraph_index: int = 0) -> np.ndarray:
        """A copy of a tensor's current value."""
        sg = self._subgraphs.get(subgraph_index)
        if sg is not None and type(tensor_index) is int and 0 <= tensor_index < len(sg.arrays):
            value = sg.arrays[tensor_index]  # the common case without _array's calls (~0.4 us)
            if value is not None:
                return value.copy()
        return self._array(tensor_index, subgraph_index).copy()

    def tensor(self, tensor_index: int) -> Callable[[], np.ndarray]:
        """A function returning a live view of a tensor's memory (no copy)."""
        self._array(tensor_index, 0)
        sg = self.subgraph(0)
        if int(tensor_index) in sg.graph.inputs:
            sg.inputs_set.add(int(tensor_index))  # the caller writes the input through the view
        return lambda: self._array(tensor_index, 0)

    def _array(self, tensor_index: int, subgraph_index: int) -> np.ndarray:
        sg = self.subgraph(subgraph_index)
        i = self._check_index(sg, tensor_index)
        value = sg.arrays[i]
        if value is None:
            name = sg.graph.tensors[i].name
            raise StateError(f"tensor {i} ({name!r}) of subgraph {subgraph_index} has no data yet")
        return value

    def resize_tensor_input(self, input_index: int, tensor_size: Any, strict: bool = False) -> None:
        """Change an input's shape; call ``allocate_tensors`` before the next invoke.

        With ``strict``, only dimensions that are -1 in the shape signature may change.
        """
        self._resize(self.subgraph(0), input_index, tensor_size, strict)

    def _resize(self, sg: SubgraphRuntime, input_index: int, tensor_size: Any, strict: bool) -> None:
        i = self._check_index(sg, input_index)
        if i not in sg.graph.inputs:
            raise InvalidInputError(f"tensor {i} is not an input of subgraph {sg.index}")
        shape = tuple(int(d) for d in np.asarray(tensor_size, dtype=np.int64).reshape(-1))
        if any(d < 0 for d in shape):
            raise ResizeError(f"cannot resize input {i} to {shape}: dimensions must be >= 0")
        t = sg.graph.tensors[i]
        if strict:
            signature = t.shape_signature if t.shape_signature is not None else t.shape
            if len(signature) != len(shape) or any(s != -1 and s != d for s, d in zip(signature, shape)):
                raise ResizeError(
                    f"ResizeInputTensorStrict only allows mutating unknown dimensions identified by -1:"
                    f" input {i} ({t.name!r}) has signature {tuple(signature)}, asked for {shape}"
                )
        if sg.shapes[i] != shape:
            sg.shapes[i] = shape
            sg.allocated = False

    def get_signature_list(self) -> dict[str, dict[str, list[str]]]:
        return {
            key: {"inputs": sorted(s.inputs), "outputs": sorted(s.outputs)} for key, s in self._signatures.items()
        }

    def get_signature_runner(self, signature_key: str | None = None) -> "SignatureRunner":
        if signature_key is None:
            if len(self._signatures) != 1:
                raise InvalidInputError(
                    f"SignatureDef signature_key is None and model has {len(self._signatures)} Signatures."
                    " None is only allowed when the model has 1 SignatureDef"
                )
            signature_key = next(iter(self._signatures))
        if signature_key not in self._signatures:
            raise InvalidInputError(f'Invalid signature_key provided: "{signature_key}".')
        return SignatureRunner(self, signature_key)

    def reset_all_variables(self) -> None:
        """Restore the state of a fresh interpreter: variable tensors to their initial values,
        resource variables to unassigned, so that CALL_ONCE initialisers run again on the next
        invoke. (LiteRT resets only the variable tensors and keeps resource variables.)"""
        for sg in self._subgraphs.values():
            sg.reset_variables()
        self.variables.clear()
        self.initialized.clear()

    # -- details dictionaries -------------------------------------------------------------------

    def _check_index(self, sg: SubgraphRuntime, tensor_index: Any) -> int:
        if type(tensor_index) is int and 0 <= tensor_index < len(sg.arrays):
            return tensor_index
        i = int(tensor_index)
        if not 0 <= i < len(sg.graph.tensors):
            raise InvalidInputError(
                f"tensor index {tensor_index} is out of range: subgraph {sg.index} has {len(sg.graph.tensors)} tensors"
            )
        return i

    def _tensor_details(self, tensor_index: int, subgraph_index: int) -> dict[str, Any]:
        sg = self.subgraph(subgraph_index)
        i = self._check_index(sg, tensor_index)
        t = sg.graph.tensors[i]
        shape = sg.shapes[i] if sg.shapes[i] is not None else t.shape
        signature = t.shape_signature if t.shape_signature is not None else shape
        q = t.quantization
        scales = np.asarray(q.scale if q is not None and q.scale is not None else [], np.float32)
        zero_points = np.asarray(q.zero_point if q is not None and q.zero_point is not None else [], np.int32)
        if self._compress_zero_points:
            zero_points = compress_zero_points(zero_points)
        per_tensor = (float(scales[0]), int(zero_points[0])) if len(scales) == 1 and len(zero_points) == 1 else (0.0, 0)
        return {
            "name": t.name,
            "index": i,
            "shape": np.array(shape, np.int32),
            "shape_signature": np.array(signature, np.int32),
            "dtype": sg.dtypes[i].type,
            "quantization": per_tensor,
            "quantization_parameters": {
                "scales": scales,
                "zero_points": zero_points,
                "quantized_dimension": q.quantized_dimension if q is not None else 0,
                "block_size": 0,
            },
            "sparsity_parameters": _sparsity_details(t.sparsity),
        }


def _custom_table(custom_ops: Mapping[str, CustomOp] | None, custom_kernels: Mapping[str, CustomOp] | None) -> dict[str, type[Kernel]]:
    """One table of kernels from ``custom_ops`` and its older name ``custom_kernels``."""
    clash = sorted(set(custom_ops or {}) & set(custom_kernels or {}))
    if clash:
        raise InvalidInputError(f"op(s) {clash} given in both custom_ops and custom_kernels; use custom_ops alone")
    return resolve_custom_ops({**(custom_kernels or {}), **(custom_ops or {})})


def _sparsity_details(sparsity: Any) -> dict[str, Any]:
    if sparsity is None:
        return {}
    dims = []
    for d in sparsity.dim_metadata:
        if d.format == "DENSE":
            dims.append({"format": 0, "dense_size": d.dense_size})
        else:
            dims.append({"format": 1, "array_segments": d.array_segments, "array_indices": d.array_indices})
    return {
        "traversal_order": np.array(sparsity.traversal_order, np.int32),
        "block_map": np.array(sparsity.block_map, np.int32),
        "dim_metadata": dims,
    }


class SignatureRunner:
    """Calls one SignatureDef with keyword inputs and returns a dict of outputs.

    Obtained from :meth:`Interpreter.get_signature_runner`.
    """

    def __init__(self, interpreter: Interpreter, signature_key: str) -> None:
        self._interpreter = interpreter
        self._signature = interpreter._signatures[signature_key]
        self._runtime = interpreter.subgraph(self._signature.subgraph_index)

    def __call__(self, **inputs: Any) -> dict[str, np.ndarray]:
        sig, sg = self._signature, self._runtime
        if len(inputs) != len(sig.inputs):
            raise InvalidInputError(
                "Invalid number of inputs provided for running a SignatureDef, "
                f"expected {len(sig.inputs)} vs provided {len(inputs)}"
            )
        for name, value in inputs.items():
            if name not in sig.inputs:
                raise InvalidInputError(f"Invalid Input name ({name}) for SignatureDef")
            self._interpreter._resize(sg, sig.inputs[name], np.shape(value), strict=False)
        if not sg.allocated:
            self._interpreter._allocate(sg)
        for name, value in inputs.items():
            self._interpreter.set_tensor(sig.inputs[name], value, sg.index)
        self._interpreter._invoke(sg)
        return {name: self._interpreter.get_tensor(i, sg.index) for name, i in sig.outputs.items()}

    def get_input_details(self) -> dict[str, dict[str, Any]]:
        return {n: self._interpreter._tensor_details(i, self._runtime.index) for n, i in self._signature.inputs.items()}

    def get_output_details(self) -> dict[str, dict[str, Any]]:
        return {n: self._interpreter._tensor_details(i, self._runtime.index) for n, i in self._signature.outputs.items()}
