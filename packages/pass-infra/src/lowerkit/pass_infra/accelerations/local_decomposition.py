"""run_decompositions by re-tracing only the nodes that may change.

``to_edge_transform_and_lower`` calls ``run_decompositions`` three times and each call re-traces
the whole program through AOTAutograd, to change a few nodes: for a 9-layer quantized CNN, 774
nodes re-traced (~1.5-2 s each) to turn 19 reshapes into views, then 9 conv2d into convolutions.

`decompose_locally` gives the re-trace's program another way. The nodes a trace may record
differently (`retrace_skip.retrace_plan` lists them: the table's ops, CompositeImplicitAutograd
ops, calls whose operator is not the one their last trace recorded, calls whose nested graph a
trace inlines) go through torch's own ``run_decompositions`` as a small program holding only
them (their inputs as its user inputs, the nested graphs as its own), and its nodes are spliced
back in their place. Everything else
gets what the whole re-trace would record:

- node names: the trace names call nodes by operator (``view``, ``view_1``, ...) in graph order,
  then export's placeholder naming resolves clashes with input names; both are replayed with
  torch's own namer (`trace_names`), which must first reproduce the input program's own names
  (if not, the stock re-trace runs);
- metadata (`record_as_traced`): each other call node what proxy_tensor's tracer gives it
  (``stack_trace``, the fields torch copies from the node it replays, its own operator as
  ``original_aten``, ``seq_nr``, ``eager_input_vals``, ``val``, ``tensor_meta``);
  placeholders their ``tensor_meta`` and AOT input descriptor, weights their users' copied
  fields (torch's ``_collect_param_buffer_metadata``); the output node its provenance;
- the signature's output names and the module call graph follow renamed nodes;
- in-place calls (``relu_``, ``hardtanh_`` of ``inplace=True`` modules) the out-of-place operator
  functionalization records (`retrace_skip` has checked nothing else reads the mutated tensor);
- a multi-output call's getitems (kept, or from a decomposition such as ``max_pool2d`` ->
  ``max_pool2d_with_indices``) the names a trace gives (one ``getitem`` per output, the unused
  dropped), their place right after the call, and the call's metadata;
- a decomposed call's nodes the place and order a trace records: all of them where the call
  was, in the decomposition's order (a multi-output call's for every output, the unused ones
  named, then dropped); the values downstream of a result laid out otherwise than the call's
  (SDPA's math decomposition) recomputed as a trace computes them.

Dead nodes are dropped as the trace's dead-code elimination drops them (after taking their
names). Lifted constants in a program not traced yet, and backward nodes take the stock re-trace. ``from_node`` provenance chains lack the whole re-trace's
layers; their roots, from which ExecuTorch derives debug handles, are the same. Tests compare the
result with torch's re-trace on fresh exports and decomposed programs; the Arm and XNNPACK
sameness tests compare lowered programs and ``.pte`` bytes with stock's.
"""

from __future__ import annotations

import copy
import operator
import re
import threading
from collections import defaultdict
from collections.abc import Set as AbstractSet
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import (
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)
from torch.fx import Graph, GraphModule, Node

from lowerkit.pass_infra import _upstream
from lowerkit.pass_infra.accelerations.deferred_lowering import building_lazily
from lowerkit.pass_infra.accelerations.deferred_recompile import plain_graph_module
from lowerkit.pass_infra.accelerations.lazy_copies import LAZY_COPIES

__all__ = [
    "decompose_locally",
    "emulation_blocker",
    "inlined_bodies",
    "last_refusal",
    "record_as_traced",
    "renamed_call_graph",
    "trace_names",
]

_REFUSAL = threading.local()

#: A name's numbering suffix (``view_12``).
_NUMBERING = re.compile(r"(_\d+)+$")


def last_refusal() -> str | None:
    """Why this thread's last `decompose_locally` gave None (None when it gave a program)."""
    return getattr(_REFUSAL, "reason", None)


def _refuse(reason: str) -> ExportedProgram | None:
    """Record why the local decomposition cannot run (see `last_refusal`); None."""
    _REFUSAL.reason = reason
    return None


_WEIGHTS = (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
#: Inputs whose AOT descriptor a first trace gives, and this module can.
_TRACED_WEIGHTS = (InputKind.PARAMETER, InputKind.BUFFER)


def trace_names(program: ExportedProgram, graph: Graph, dropped: AbstractSet[Node] = frozenset()) -> dict[Node, str]:
    """The names a whole re-trace of `program` gives `graph`'s nodes (placeholders keep theirs).

    `dropped` nodes (its dead-code elimination's) take their names in the trace, and none after.
    """
    trace_namespace = _upstream.new_namespace()
    placeholders = [node for node in graph.nodes if node.op == "placeholder"]
    for index in range(len(placeholders)):
        trace_namespace.create_name(f"arg{index}_1", None)
    traced: dict[Node, str] = {}
    for node in graph.nodes:
        if node.op == "call_function":
            if is_output_getitem(node):
                continue  # named with the node whose output it takes
            traced[node] = trace_namespace.create_name(
                _upstream.trace_candidate_name(graph, node.target), None
            )
            if is_multi_output(node):
                # a trace names a getitem for every output at once, and drops the unused ones
                getitems = output_getitems(node)
                for index in range(len(node.meta["val"])):
                    name = trace_namespace.create_name(
                        _upstream.trace_candidate_name(graph, operator.getitem), None
                    )
                    if index in getitems:
                        traced[getitems[index]] = name
        elif node.op == "output":
            traced[node] = trace_namespace.create_name("output", None)
    # export's placeholder naming pass: input names first, then call nodes renamed off them.
    name_map: dict[str, str] = {}
    find_available: defaultdict[str, int] = defaultdict(int)
    used: set[str] = set()
    specs = program.graph_signature.input_specs
    ordered = [s for s in specs if s.kind == InputKind.USER_INPUT] + [s for s in specs if s.kind != InputKind.USER_INPUT]
    for spec in ordered:
        _upstream.rename_without_collisions(name_map, find_available, used, spec.arg.name, spec.arg.name, is_placeholder=True)
    names = {node: name_map.get(node.name, node.name) for node in placeholders}
    for node, name in traced.items():
        if node in dropped:
            continue
        _upstream.rename_without_collisions(name_map, find_available, used, name, name)
        names[node] = name_map[name]
    return names


def decompose_locally(
    program: ExportedProgram, decomp_table: dict[Any, Any], decomposing: list[Node]
) -> ExportedProgram | None:
    """``program.run_decompositions(decomp_table)``, re-tracing only `decomposing`; None when it cannot."""
    _REFUSAL.reason = None
    blocker = emulation_blocker(program)
    if blocker is not None:
        return _refuse(blocker)
    inside = set(decomposing)
    bodies = inlined_bodies(program.graph)
    for node in decomposing:
        for arg in node.all_input_nodes:
            if arg.op == "get_attr" and arg.target in bodies:
                continue  # an inlined call's nested graph: goes into the small program with it
            if not isinstance(arg.meta.get("val"), _upstream.FakeTensor) and arg not in inside:
                return _refuse(f"{node.name}'s input {arg.name} has no FakeTensor value")
    for node, name in trace_names(program, program.graph).items():
        if returns_nothing(node):
            continue  # export names a call it inserts by torch function (``_assert_tensor_metadata_default``)
        if _is_inlined(node) or (is_output_getitem(node) and _is_inlined(node.args[0])):
            continue  # a trace records the nested graph's operators instead (named below)
        if _NUMBERING.sub("", name) != _NUMBERING.sub("", node.name):
            # not named the way a trace names it: re-trace the stock way (numbering aside: a
            # trace's dead-code elimination leaves gaps)
            return _refuse(f"{node.name} is not named as a trace names it ({name})")
    with LAZY_COPIES.scope():
        # its graph module's code is made once, from the final graph (below)
        result = _upstream.copy_exported_program(program)
    blocker = _weights_as_retraced(result)
    if blocker is not None:
        return _refuse(blocker)
    _return_buffer_writes(result)
    _functionalize(result.graph)
    _dispatch_arguments(result.graph)
    spliced: set[Node] = set()
    replaced: dict[str, Node] = {}
    if decomposing:
        small, outside, slots = _small_program(program, decomposing)
        decomposed = _upstream.STOCK_RUN_DECOMPOSITIONS(small, decomp_table)
        if decomposed.graph_signature.user_inputs_to_mutate:
            return _refuse(f"an in-place op mutates {', '.join(decomposed.graph_signature.user_inputs_to_mutate.values())}")
        if any(True for _ in decomposed.graph_module.named_children()):
            return _refuse("the re-trace kept a nested graph")
        by_name = {node.name: node for node in result.graph.nodes}
        spliced, replaced, moved = _splice(
            result.graph, decomposed, [by_name[n.name] for n in outside],
            [(by_name[call.name], index) for call, index in slots],
        )  # fmt: skip
        _drop_inlined_bodies(result.graph_module, bodies)
        blocker = _propagate_values(result.graph, spliced, moved)
        if blocker is not None:
            return _refuse(blocker)
    _getitems_after_their_producers(result.graph)
    dropped = _dead_code(result.graph)
    if isinstance(dropped, str):
        return _refuse(dropped)
    names = trace_names(result, result.graph, dropped)
    for node in reversed(list(result.graph.nodes)):
        if node in dropped:
            result.graph.erase_node(node)
    record_as_traced(program, result, spliced)
    old_names = {node: node.name for node in result.graph.nodes}
    _upstream.rename_nodes(result.graph, names)
    if not building_lazily():  # else the half that called it makes what it hands back plain
        plain_graph_module(result.graph_module)
    renamed = {old: node.name for node, old in old_names.items()}
    renamed.update({old: node.name for old, node in replaced.items()})
    for spec in result.graph_signature.output_specs:
        spec.arg.name = renamed.get(spec.arg.name, spec.arg.name)
    _upstream.set_module_call_graph(result, renamed_call_graph(program, renamed))
    return result


def _small_program(
    program: ExportedProgram, decomposing: list[Node]
) -> tuple[ExportedProgram, list[Node], list[tuple[Node, int | None]]]:
    """The decomposing nodes alone, their outside inputs as user inputs; (it, those inputs, what
    each of its outputs stands for).

    Every decomposing node is an output: a node as ``(node, None)``, a multi-output node as
    ``(node, index)`` for each of its outputs, used or not (a trace decomposes the whole call and
    names every node of it before dropping the dead ones; `decomposing` holds its getitems too).
    """
    graph = Graph()
    root = torch.nn.Module()
    env: dict[Node, Node] = {}
    outside: list[Node] = []
    inside = set(decomposing)
    for node in decomposing:
        for arg in node.all_input_nodes:
            if arg.op == "get_attr" and arg not in env:  # an inlined call's nested graph
                assert isinstance(arg.target, str)
                root.add_module(arg.target, program.graph_module.get_submodule(arg.target))
                env[arg] = graph.node_copy(arg)
            elif arg not in inside and arg not in env:
                placeholder = graph.placeholder(f"input_{len(outside)}")
                placeholder.meta = {key: arg.meta[key] for key in ("val", "tensor_meta") if key in arg.meta}
                env[arg] = placeholder
                outside.append(arg)
    for node in decomposing:
        env[node] = graph.node_copy(node, lambda arg: env[arg])
    _functionalize(graph)
    outputs: list[Node] = []
    slots: list[tuple[Node, int | None]] = []
    for node in decomposing:
        if is_output_getitem(node) and node.args[0] in inside:
            continue  # its producer's slot
        if not is_multi_output(node):
            outputs.append(env[node])
            slots.append((node, None))
            continue
        getitems = output_getitems(node)
        for index in range(len(node.meta["val"])):
            if index in getitems:
                outputs.append(env[getitems[index]])
            else:
                with graph.inserting_after(env[node]):
                    outputs.append(graph.call_function(operator.getitem, (env[node], index)))
                outputs[-1].meta["val"] = node.meta["val"][index]
            slots.append((node, index))
    graph.output(tuple(outputs))
    module = GraphModule(root, graph)
    inputs = [env[arg] for arg in outside]
    return _upstream.user_io_program(module, inputs, outputs, program.verifiers), outside, slots


def _splice(
    graph: Graph, decomposed: ExportedProgram, outside: list[Node], slots: list[tuple[Node, int | None]]
) -> tuple[set[Node], dict[str, Node], set[Node]]:
    """Put `decomposed`'s nodes in place of the calls `slots` name: (the nodes put in, old name ->
    what replaced it, the replacements whose value is laid out otherwise than the call's).

    `decomposed`'s placeholders stand for `outside` and its outputs for `slots` (`_small_program`'s,
    whose nodes are `graph`'s). A call's nodes go where the call was, as a trace records them: in
    `decomposed`'s order, all of a multi-output call's before its getitems are replaced (its
    unused outputs' nodes too, left for the dead-code elimination to drop after naming); a node
    needed by an earlier call goes with that call; a call that returns nothing (an inlined
    graph's ``_assert_tensor_metadata``, which the trace keeps) right after the call it follows.
    """
    sources = [node for node in decomposed.graph.nodes if node.op == "placeholder"]
    env: dict[Node, Node] = dict(zip(sources, outside, strict=True))
    results = next(node for node in decomposed.graph.nodes if node.op == "output").args[0]
    pending = [node for node in decomposed.graph.nodes if node.op == "call_function"]
    followers = _side_effect_followers(pending)
    by_call: dict[Node, list[tuple[int | None, Node]]] = {}
    for (call, index), result in zip(slots, results, strict=True):
        by_call.setdefault(call, []).append((index, result))
    spliced: set[Node] = set()
    replaced: dict[str, Node] = {}
    moved: set[Node] = set()
    for call, call_results in by_call.items():
        needed = set().union(*(_ancestors(result, followers) for _, result in call_results))
        with graph.inserting_before(call):
            for node in [n for n in pending if n in needed]:
                copied = graph.node_copy(node, lambda arg: env[arg])
                copied.meta = dict(node.meta)
                env[node] = copied
                spliced.add(copied)
                pending.remove(node)
        getitems = output_getitems(call) if is_multi_output(call) else {}
        for index, result in call_results:
            target = call if index is None else getitems.get(index)
            if target is not None:
                if _layout(target.meta.get("val")) != _layout(env[result].meta.get("val")):
                    moved.add(env[result])
                target.replace_all_uses_with(env[result])
                replaced[target.name] = env[result]
        for getitem in getitems.values():
            graph.erase_node(getitem)
        graph.erase_node(call)
    return spliced, replaced, moved


def _layout(value: Any) -> Any:
    """What a value's layout is to the nodes that read it: (shape, stride, storage offset, dtype) per tensor."""
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.stride(), value.storage_offset(), value.dtype)
    if isinstance(value, (tuple, list)):
        return tuple(_layout(item) for item in value)
    return value


def _propagate_values(graph: Graph, spliced: AbstractSet[Node], moved: set[Node]) -> str | None:
    """Give each node downstream of the `moved` values (laid out anew) the value a trace computes
    for it; or why not.

    A decomposition may lay its result out otherwise than the call it replaces (SDPA's math
    decomposition gives a transposed result where the kept op gave a contiguous one): a trace then
    records other strides for the views and ops that read it, which ExecuTorch turns into dim
    orders. Each such node is run again on its inputs' values, in their fake mode. A re-traced
    node reading one of those was traced on the old value: then the stock re-trace runs.
    """
    if not moved:
        return None
    for node in graph.nodes:
        if node.op != "call_function" or not any(arg in moved for arg in node.all_input_nodes):
            continue
        if node in spliced:
            read = next((arg for arg in node.all_input_nodes if arg in moved and arg not in spliced), None)
            if read is not None:
                return f"{node.name} was re-traced on {read.name}'s value before a decomposition laid it out anew"
            continue
        if returns_nothing(node):
            continue
        values = [arg.meta.get("val") for arg in node.all_input_nodes]
        mode = _upstream.fake_mode_of(values)
        if mode is None:
            return f"{node.name} reads a value laid out anew, and its inputs share no fake mode"
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda arg: arg.meta["val"])
        with mode:
            value = node.target(*args, **kwargs)
        if _layout(value) != _layout(node.meta.get("val")):
            node.meta["val"] = value
            moved.add(node)
    return None


def inlined_bodies(graph: Graph) -> set[str]:
    """The attributes `graph` reads only as the nested graphs of calls a trace inlines."""
    return {
        node.target
        for node in graph.nodes
        if node.op == "get_attr" and node.users and all(_is_inlined(user) for user in node.users)
    }


def _is_inlined(node: Node) -> bool:
    """Whether `node` calls a higher-order operator whose nested graph a trace inlines."""
    return node.op == "call_function" and node.target in _upstream.inlined_higher_order_ops()


def _drop_inlined_bodies(module: GraphModule, bodies: AbstractSet[str]) -> None:
    """Remove the nested graphs `bodies` once their calls are spliced out: a trace has none."""
    for node in list(module.graph.nodes):
        if node.op == "get_attr" and node.target in bodies:
            module.graph.erase_node(node)  # its calls are gone: no users
    for target in bodies:
        module.delete_submodule(target)


def _dead_code(graph: Graph) -> set[Node] | str:
    """The call nodes a trace's dead-code elimination drops (unused and pure, or used only by
    those), or why that cannot be told (a dead random op: pure or not by torch's inductor config)."""
    dropped: set[Node] = set()
    for node in reversed(graph.nodes):
        if node.op != "call_function" or not all(user in dropped for user in node.users):
            continue
        if not node.is_impure(impure_random=True):
            dropped.add(node)
        elif not node.is_impure(impure_random=False):
            return f"{node.name} ({node.target}) is a dead random op"
    return dropped


def _side_effect_followers(calls: list[Node]) -> dict[Node, list[Node]]:
    """{call: the calls returning nothing that come right after it in `calls`} (before the first
    call that returns something, for those at the start)."""
    followers: defaultdict[Node, list[Node]] = defaultdict(list)
    anchors = [call for call in calls if not returns_nothing(call)]
    anchor = anchors[0] if anchors else None
    for call in calls:
        if not returns_nothing(call):
            anchor = call
        elif anchor is not None:
            followers[anchor].append(call)
    return followers


def _ancestors(node: Node, followers: dict[Node, list[Node]]) -> set[Node]:
    """`node`, its inputs and theirs, with each one's `followers` and their ancestors."""
    seen: set[Node] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(current.all_input_nodes)
            stack.extend(followers.get(current, ()))
    return seen


def is_multi_output(node: Node) -> bool:
    """Whether `node` is an operator call with several outputs (a tuple or list value)."""
    return node.op == "call_function" and isinstance(node.meta.get("val"), (tuple, list))


def is_output_getitem(node: Node) -> bool:
    """Whether `node` takes one output of a multi-output operator call (``getitem(op, index)``)."""
    return (
        node.op == "call_function"
        and node.target is operator.getitem
        and isinstance(node.args[0], Node)
        and is_multi_output(node.args[0])
        and isinstance(node.args[1], int)
    )


def output_getitems(node: Node) -> dict[int, Node]:
    """{output index: the getitem taking it} for multi-output `node`."""
    return {user.args[1]: user for user in node.users if is_output_getitem(user)}


def _functionalize(graph: Graph) -> None:
    """Give each in-place call in `graph` the operator functionalization records for it (``relu_`` -> ``relu``).

    `retrace_skip.retrace_plan` has checked that nothing reads the mutated tensor afterwards
    but through the call's own result, so the call's users are all a trace re-points.
    """
    for node in graph.nodes:
        if node.op == "call_function" and isinstance(node.target, _upstream.OpOverload):
            if _upstream.has_cia_kernel(node.target):
                continue  # decomposed before functionalization (dropout_): the small program re-traces it
            functional = _upstream.functional_variant(node.target)
            if functional is not None:
                if "from_node" not in node.meta:  # a trace's provenance names the in-place call
                    node.meta["from_node"] = [_upstream.module_node_source(node)]
                node.target = functional


def written_buffer(node: Node, signature: Any) -> Node | None:
    """The buffer placeholder in-place call `node` writes (its first argument), or None."""
    written = node.args[0] if node.args else None
    if isinstance(written, Node) and written.op == "placeholder" and written.name in signature.inputs_to_buffers:
        return written
    return None


def _module_order(weights: list[InputSpec]) -> list[str]:
    """The parameters', then the buffers' names as a module holding `weights` lists them, its
    modules made as the names first need them (parameters first): the order torch's re-trace
    gives (``ExportedProgram.module()``'s ``named_parameters`` then ``named_buffers``)."""
    tree: dict[str, Any] = {}
    own: defaultdict[tuple[str, InputKind], list[str]] = defaultdict(list)
    for kind in (InputKind.PARAMETER, InputKind.BUFFER):
        for spec in weights:
            if spec.kind is kind and spec.target is not None:
                *path, _ = spec.target.split(".")
                node = tree
                for part in path:
                    node = node.setdefault(part, {})
                own[".".join(path), kind].append(spec.target)
    modules = [""]

    def walk(node: dict[str, Any], prefix: str) -> None:
        for name, child in node.items():
            modules.append(prefix + name)
            walk(child, prefix + name + ".")

    walk(tree, "")
    return [t for kind in (InputKind.PARAMETER, InputKind.BUFFER) for m in modules for t in own[m, kind]]


def _weights_as_retraced(program: ExportedProgram) -> str | None:
    """Put the weight placeholders in the order torch's re-trace gives them (a strict export's
    are in the order dynamo met them); why not, or None.

    The emulated order (`_module_order`) only says whether they already are: to move them,
    ``ExportedProgram.module()`` gives the order torch's re-trace takes.
    """
    signature = program.graph_signature
    specs = signature.input_specs
    weights = [s for s in specs if s.kind in (InputKind.PARAMETER, InputKind.BUFFER)]
    if _module_order(weights) == [s.target for s in weights]:
        return None
    if any(s.kind not in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.USER_INPUT) for s in specs):
        return "weights out of module order beside constants or tokens"
    module = program.module()
    names = [n for n, _ in (*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False))]
    if sorted(names) != sorted(s.target for s in weights):
        return "the module's weights are not the program's"
    position = {name: index for index, name in enumerate(names)}
    ordered = sorted(weights, key=lambda s: position[s.target]) + [s for s in specs if s.kind == InputKind.USER_INPUT]
    placeholders = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    anchor = next(node for node in program.graph.nodes if node.op != "placeholder")
    for spec in ordered:
        anchor.prepend(placeholders[spec.arg.name])
    signature.input_specs[:] = ordered
    return None


def _return_buffer_writes(program: ExportedProgram) -> None:
    """Return the new value of each buffer `program`'s in-place calls write, as functionalization does.

    ``retrace_skip`` has checked each write is its buffer's only one and last reader: a ``copy_``
    back (``ExportedProgram.module()``'s) goes, and the value it copied is the new one; any other
    call is the new value (`_functionalize` then gives it its out-of-place operator). The new
    values lead the outputs, in the buffers' input order, each with a ``BUFFER_MUTATION`` spec.
    """
    signature = program.graph_signature
    written: dict[Node, Node] = {}
    for node in list(program.graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, _upstream.OpOverload):
            continue
        buffer = written_buffer(node, signature) if _upstream.is_mutating(node.target) else None
        if buffer is None:
            continue
        if node.target is torch.ops.aten.copy_.default:
            written[buffer] = node.args[1]
            program.graph.erase_node(node)
        else:
            written[buffer] = node
    if not written:
        return
    order = [node for node in program.graph.nodes if node in written]
    output = program.graph.output_node()
    output.args = ((*(written[b] for b in order), *output.args[0]),)
    mutations = [
        OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument(written[b].name), signature.inputs_to_buffers[b.name])
        for b in order
    ]
    signature.output_specs[:0] = mutations


def returns_nothing(node: Node) -> bool:
    """Whether `node` calls an operator that returns nothing (``_assert_tensor_metadata``, which
    export inserts for ``.to(dtype)``): no value, no users; a trace keeps it (side-effectful)."""
    return (
        node.op == "call_function"
        and isinstance(node.target, _upstream.OpOverload)
        and _upstream.returns_nothing(node.target)
        and node.meta.get("val") is None
        and not node.users
    )


def _dispatch_arguments(graph: Graph) -> None:
    """Give each call that returns nothing the arguments a trace records for it: as the dispatcher
    hands them on (export records ``_assert_tensor_metadata``'s as written at the torch function
    level: ``dtype=`` as a keyword; a trace positionally, after ``size`` and ``stride`` as None)."""
    for node in graph.nodes:
        if returns_nothing(node):
            inputs = {id(arg.meta["val"]): arg for arg in node.all_input_nodes}
            args, kwargs = _upstream.dispatched_arguments(
                node.target, *torch.fx.node.map_arg((node.args, node.kwargs), lambda arg: arg.meta["val"])
            )
            node.args, node.kwargs = torch.fx.node.map_aggregate(
                (args, kwargs), lambda value, inputs=inputs: inputs.get(id(value), value)
            )


def _getitems_after_their_producers(graph: Graph) -> None:
    """Put each multi-output call's getitems right after it, by output index, as a trace records them."""
    for node in list(graph.nodes):
        if is_multi_output(node):
            for _, getitem in sorted(output_getitems(node).items(), reverse=True):
                node.append(getitem)


def emulation_blocker(program: ExportedProgram) -> str | None:
    """Why `record_as_traced` cannot give `program` what a re-trace records, or None."""
    kinds = {spec.kind for spec in program.graph_signature.input_specs}
    first_trace = any("desc" not in node.meta for node in program.graph.nodes if node.op == "placeholder")
    if first_trace and not kinds <= {InputKind.USER_INPUT, *_TRACED_WEIGHTS}:
        return "constants, custom objects or tokens in a program not traced yet"
    bodies = inlined_bodies(program.graph)
    for node in program.graph.nodes:
        if node.op == "get_attr" and node.target in bodies:
            continue  # goes into the small program with its call
        value = node.meta.get("val")
        if is_multi_output(node):
            if not all(isinstance(item, _upstream.FakeTensor) for item in value):
                return f"{node.name} has outputs that are not FakeTensors"
        elif not isinstance(value, _upstream.FakeTensor) and node.op != "output" and not returns_nothing(node):
            return f"{node.name} has no FakeTensor value"
        if node.meta.get("autograd_backward") or node.meta.get("in_grad_fn"):
            return f"{node.name} is a backward node"
    return None


def record_as_traced(source: ExportedProgram, result: ExportedProgram, spliced: AbstractSet[Node] = frozenset()) -> None:
    """Give `result` (a copy of `source`, `spliced` nodes put in) the metadata a re-trace records.

    A call node not spliced in gets what proxy_tensor's tracer gives a node (``stack_trace``, the
    fields torch copies from the current node, its own operator as ``original_aten``, ``seq_nr``,
    ``eager_input_vals`` for stride-sensitive operators, ``val``, ``tensor_meta``), other keys
    dropped; placeholders get ``tensor_meta`` and their AOT input descriptor, and weights their
    users' copied fields in `source` (torch's ``_collect_param_buffer_metadata``, the last user's
    winning, ``nn_module_stack`` and ``stack_trace`` aside); the output node its provenance.
    """
    seq_nr = _upstream.current_seq_nr()
    for node in result.graph.nodes:
        if node.op == "call_function" and node not in spliced:
            if is_output_getitem(node):
                # made with its producer's output, under the producer's metadata and operator
                producer = node.args[0]
                assert isinstance(producer, Node)
                node.meta = _call_meta(node, seq_nr, producer.meta, producer.target)
            else:
                node.meta = _call_meta(node, seq_nr, node.meta, node.target)
        elif node.op == "output" and "from_node" not in node.meta:
            node.meta["from_node"] = [_upstream.module_node_source(node)]
    specs = {spec.arg.name: spec for spec in source.graph_signature.input_specs}
    users: dict[str, dict[str, Any]] = {name: {} for name, spec in specs.items() if spec.kind in _WEIGHTS}
    for node in source.graph.nodes:
        if node.op == "call_function" and not _is_inlined(node):  # torch skips higher-order calls
            # The user as ExportedProgram.module() gives it: with provenance, whatever it had.
            fields = {**node.meta, "from_node": node.meta.get("from_node") or [_upstream.module_node_source(node)]}
            for arg in node.all_input_nodes:
                if arg.name in users:
                    users[arg.name].update(
                        (field, fields[field])
                        for field in _upstream.COPY_META_FIELDS
                        if field != "custom" and field in fields
                    )
    user_index = 0
    for node in result.graph.nodes:
        if node.op != "placeholder":
            continue
        spec, old = specs[node.name], node.meta
        meta = {
            "val": old["val"],
            "tensor_meta": _upstream.tensor_metadata(old["val"]),
            "desc": old.get("desc") or _upstream.aot_input_descriptor(spec.kind, spec.target, user_index),
        }
        if spec.kind == InputKind.USER_INPUT:
            user_index += 1
        elif node.name in users:
            provenance = old.get("from_node") or [_upstream.module_node_source(node)]
            for field, value in {**old, "from_node": provenance, **users[node.name]}.items():
                if field not in ("nn_module_stack", "stack_trace"):
                    meta[field] = value
        node.meta = meta


def _call_meta(node: Node, seq_nr: int, old: dict[str, Any], operator_: Any) -> dict[str, Any]:
    """What a trace records for `node`, made while replaying a node with metadata `old` that dispatched `operator_`."""
    value = node.meta.get("val")  # a call that returns nothing has none
    meta: dict[str, Any] = {}
    if old.get("stack_trace"):
        meta["stack_trace"] = old["stack_trace"]
    for field in _upstream.COPY_META_FIELDS:
        if field == "original_aten":
            meta[field] = operator_  # nothing decomposes it: the operator the trace dispatched
        elif field == "from_node":
            meta[field] = (
                copy.copy(old[field]) if field in old else [_upstream.module_node_source(node)]
            )
        elif field in old:
            meta[field] = copy.copy(old[field])
    meta["seq_nr"] = seq_nr
    if _upstream.needs_eager_input_vals(node.target):
        meta["eager_input_vals"] = _upstream.eager_input_vals(node)
    if value is None and returns_nothing(node):
        return meta  # a trace records no value for a call that returns nothing
    meta["val"] = value
    if isinstance(value, _upstream.FakeTensor):  # a multi-output call's tuple has none
        meta["tensor_meta"] = _upstream.tensor_metadata(value)
        returned = _returned_input(node)
        if returned is not None:
            meta["tensor_meta"] = meta["tensor_meta"]._replace(requires_grad=_traced_requires_grad(returned))
    return meta


def _returned_input(node: Node) -> Node | None:
    """The input a kept CompositeImplicitAutograd call gives back as it is (``weight.type_as(x)``
    of the same dtype), or None.

    A trace records the tensor that call returns, so its ``tensor_meta`` says what the input's
    does (a parameter's ``requires_grad``), where the call's own value would not. Only a call
    with an input laid out as its value is run (in its fake mode) to see which it returns.
    """
    target = node.target
    if not (isinstance(target, _upstream.OpOverload) and _upstream.preservable_cia(target)):
        return None  # (a preservable one is functional: it writes nothing)
    inputs = node.all_input_nodes
    values = [arg.meta.get("val") for arg in inputs]
    own = _layout(node.meta.get("val"))
    fake_mode = _upstream.fake_mode_of(values)
    if fake_mode is None or not any(_layout(value) == own for value in values):
        return None  # no input it could be
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda arg: arg.meta.get("val"))
    with fake_mode:
        result = target(*args, **kwargs)
    return next((arg for arg, value in zip(inputs, values, strict=True) if value is result), None)


def _traced_requires_grad(node: Node) -> bool:
    """``requires_grad`` of the tensor a trace holds for `node`: a placeholder's value's (a
    parameter's is True), a call's as its ``tensor_meta`` records it."""
    if node.op != "placeholder" and "tensor_meta" in node.meta:
        return bool(node.meta["tensor_meta"].requires_grad)
    return bool(node.meta["val"].requires_grad)


def renamed_call_graph(program: ExportedProgram, renamed: dict[str, str]) -> Any:
    """`program`'s module call graph (a copy) with the arguments `renamed` (old name -> new) renamed."""
    call_graph = copy.deepcopy(program.module_call_graph)
    for entry in call_graph:
        if entry.signature is not None:
            for argument in [*entry.signature.inputs, *entry.signature.outputs]:
                if hasattr(argument, "name"):
                    argument.name = renamed.get(argument.name, argument.name)
    return call_graph
