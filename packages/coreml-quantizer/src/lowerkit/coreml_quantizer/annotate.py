"""Annotating matched ops with quantization specs, rule for rule as ExecuTorch does.

Three routines: weighted ops (conv / linear [+ batch_norm] [+ activation]) and
binary ops (add / mul / matmul [+ activation]) matched with a traced pattern, and
unary ops that share their input's observer (pools, flatten) found by source partition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.fx import GraphModule, Node
from torch.fx.passes.utils.matcher_with_name_node_map_utils import (
    SubgraphMatcherWithNameNodeMap,
)
from torch.fx.passes.utils.source_matcher_utils import get_source_partitions
from torchao.quantization.pt2e.quantizer.quantizer import (
    Q_ANNOTATION_KEY,
    FixedQParamsQuantizationSpec,
    QuantizationSpec,
    SharedQuantizationSpec,
)

from lowerkit.coreml_quantizer._upstream import (
    is_annotated,
    mark_nodes_as_annotated,
    new_annotation,
)
from lowerkit.coreml_quantizer.annotation_config import AnnotationConfig
from lowerkit.coreml_quantizer.filters import NodeFilter

aten = torch.ops.aten


def adjust_activation_qspec(node: Node, qspec: Any) -> Any:
    """The output spec for an activation: fixed-range ops and ReLU-like ops get their own qscheme."""
    if qspec is None:
        return qspec

    tanh_qspec = FixedQParamsQuantizationSpec(
        dtype=torch.uint8,
        scale=2.0 / 256.0,
        zero_point=128,
        quant_min=0,
        quant_max=255,
        qscheme=torch.per_tensor_symmetric,
    )
    sigmoid_qspec = FixedQParamsQuantizationSpec(
        dtype=torch.uint8,
        scale=1.0 / 256.0,
        zero_point=0,
        quant_min=0,
        quant_max=255,
        qscheme=torch.per_tensor_affine,
    )
    fixed_q_params_ops = {
        aten.tanh.default: tanh_qspec,
        aten.tanh_.default: tanh_qspec,
        aten.sigmoid.default: sigmoid_qspec,
        aten.sigmoid_.default: sigmoid_qspec,
        aten.hardsigmoid.default: sigmoid_qspec,
        aten.hardsigmoid_.default: sigmoid_qspec,
    }
    always_affine_ops = (
        aten.relu.default,
        aten.relu_.default,
        aten.relu6.default,
        aten.relu6_.default,
    )
    # ReLU6 may appear as hardtanh(min_val=0, max_val=6).
    is_always_affine_op = node.target in always_affine_ops or (
        node.target in [aten.hardtanh.default, aten.hardtanh_.default]
        and node.args[1] == 0
        and node.args[2] == 6
    )
    if node.target in fixed_q_params_ops:
        # ExecuTorch keeps the observer and only takes the fixed op's qscheme.
        return QuantizationSpec(
            observer_or_fake_quant_ctr=qspec.observer_or_fake_quant_ctr,
            dtype=qspec.dtype,
            qscheme=fixed_q_params_ops[node.target].qscheme,
        )
    if is_always_affine_op:
        return QuantizationSpec(
            observer_or_fake_quant_ctr=qspec.observer_or_fake_quant_ctr,
            dtype=qspec.dtype,
            qscheme=torch.per_tensor_affine,
        )
    return qspec


def annotate_weighted_mod_pattern(
    model: GraphModule,
    pattern_gm: GraphModule,
    quantization_config: AnnotationConfig | None,
    filter_fn: NodeFilter | None,
) -> list[list[Node]]:
    """Annotate every match of input -> weighted op [-> batch_norm] [-> activation]."""
    matcher = SubgraphMatcherWithNameNodeMap(pattern_gm, ignore_literals=True)
    matches = matcher.match(model.graph)

    annotated_partitions: list[list[Node]] = []
    for match in matches:
        name_node_map = match.name_node_map
        input_node = name_node_map["input"]
        mod_node = name_node_map["mod"]
        weight_node = name_node_map["weight"]
        bias_node = name_node_map["bias"]
        if "output" in name_node_map:
            output_node = name_node_map["output"]
            # An in-place activation: the "mod" entry names the activation itself.
            if mod_node == output_node:
                mod_node = mod_node.args[0]
        else:
            output_node = None

        if mod_node.args[0] is not input_node:
            raise ValueError(f"Weighted module arg did not contain input node {input_node}")
        if mod_node.args[1] is not weight_node:
            raise ValueError(f"Weighted module arg did not contain weight node {weight_node}")
        if len(mod_node.args) > 2 and mod_node.args[2] is not bias_node:
            raise ValueError(f"Weighted module arg did not contain bias node {bias_node}")

        partition = [mod_node, weight_node]
        if bias_node is not None:
            partition.append(bias_node)
        if is_annotated(partition):
            continue
        if filter_fn and any(not filter_fn(n) for n in partition):
            continue

        input_qspec_map: dict[Node, Any] = {}
        if not is_annotated([input_node]):
            input_qspec_map[input_node] = (
                quantization_config.input_activation if quantization_config else None
            )
        else:
            input_qspec_map[input_node] = input_node.meta[Q_ANNOTATION_KEY].output_qspec

        input_qspec_map[weight_node] = quantization_config.weight if quantization_config else None
        output_qspec = quantization_config.output_activation if quantization_config else None
        if bias_node is not None:
            input_qspec_map[bias_node] = None

        if output_node is None:
            mod_node.meta[Q_ANNOTATION_KEY] = new_annotation(input_qspec_map, output_qspec)
        else:
            mod_node.meta[Q_ANNOTATION_KEY] = new_annotation(input_qspec_map)
            if not is_annotated([output_node]):
                output_qspec = adjust_activation_qspec(node=output_node, qspec=output_qspec)
                output_node.meta[Q_ANNOTATION_KEY] = new_annotation(output_qspec=output_qspec)

        mark_nodes_as_annotated(partition)
        annotated_partitions.append(partition)
    return annotated_partitions


def annotate_binary_op_act_pattern(
    model: GraphModule,
    pattern_gm: GraphModule,
    quantization_config: AnnotationConfig | None,
    filter_fn: NodeFilter | None = None,
) -> list[list[Node]]:
    """Annotate every match of (input_1, input_2) -> binary op [-> activation]."""
    matcher = SubgraphMatcherWithNameNodeMap(pattern_gm, ignore_literals=True)
    matches = matcher.match(model.graph)

    annotated_partitions: list[list[Node]] = []
    for match in matches:
        name_node_map = match.name_node_map
        binary_op_node: Node = name_node_map["binary_op"]
        output_node: Node | None
        if "output" in name_node_map:
            output_node = name_node_map["output"]
            # An in-place activation: the "binary_op" entry names the activation itself.
            if binary_op_node == output_node:
                binary_op_node = binary_op_node.args[0]
            partition = [output_node, binary_op_node]
        else:
            output_node = None
            partition = [binary_op_node]

        if output_node is not None and len(binary_op_node.users) > 1:
            raise ValueError("Binary op with activation has more than one users.")
        if is_annotated(partition):
            continue
        if filter_fn and any(not filter_fn(n) for n in partition):
            continue

        input_act_qspec = quantization_config.input_activation if quantization_config else None
        output_act_qspec = quantization_config.output_activation if quantization_config else None

        input_qspec_map: dict[Node, Any] = {}
        input_act0 = binary_op_node.args[0]
        if isinstance(input_act0, Node):
            input_qspec_map[input_act0] = input_act_qspec
        input_act1 = binary_op_node.args[1]
        if isinstance(input_act1, Node):
            input_qspec_map[input_act1] = input_act_qspec

        if output_node is None:
            binary_op_node.meta[Q_ANNOTATION_KEY] = new_annotation(
                input_qspec_map, output_act_qspec
            )
        else:
            binary_op_node.meta[Q_ANNOTATION_KEY] = new_annotation(input_qspec_map)
            output_act_qspec = adjust_activation_qspec(node=output_node, qspec=output_act_qspec)
            output_node.meta[Q_ANNOTATION_KEY] = new_annotation(output_qspec=output_act_qspec)
        mark_nodes_as_annotated(partition)
        annotated_partitions.append(partition)
    return annotated_partitions


def annotate_unary_shared_observer_ops(
    model: GraphModule,
    ops: list[Callable[..., Any]],
    quantization_config: AnnotationConfig | None,
    filter_fn: NodeFilter | None = None,
) -> list[list[Node]]:
    """Annotate unary ops (pools, flatten) so input and output share the input's observer."""
    partitions = get_source_partitions(model.graph, ops, filter_fn)
    annotated_partitions: list[list[Node]] = []
    for op_partitions in partitions.values():
        for partition in op_partitions:
            output_node = partition.output_nodes[0]
            op_node = partition.nodes[0]
            if is_annotated([output_node, op_node]):
                continue

            input_node = op_node.args[0]
            input_act_qspec = quantization_config.input_activation if quantization_config else None
            output_act_qspec = (
                quantization_config.output_activation if quantization_config else None
            )
            if (
                not isinstance(input_node, Node)
                or not is_annotated([input_node])
                or input_node.meta[Q_ANNOTATION_KEY].output_qspec is None
                or input_act_qspec is None
                or output_act_qspec is None
            ):
                continue

            act_qspec = SharedQuantizationSpec(input_node)
            op_node.meta[Q_ANNOTATION_KEY] = new_annotation({input_node: act_qspec})
            output_node.meta[Q_ANNOTATION_KEY] = new_annotation(output_qspec=act_qspec)
            annotated_partitions.append(partition.nodes)
    return annotated_partitions
