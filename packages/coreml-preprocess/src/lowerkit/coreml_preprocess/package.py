"""A converted Core ML model as a deterministic delegate payload (ExecuTorch's layout).

The payload holds the same files ExecuTorch's ``CoreMLBackend.preprocess_model`` writes:
``metadata.json``, ``model.mlpackage`` (or ``model.mlmodelc``) and, when coremltools mapped
debug handles, ``debug_info.json``. What ExecuTorch leaves to chance is derived from content:

* the model identifier (``executorch_<uuid>``; ExecuTorch draws ``uuid4``) is a name-based
  UUID of the package's files and the input/output names, so the on-device model cache, keyed
  by identifier, still tells different models apart;
* the ``Manifest.json`` item identifiers (random in coremltools) are name-based UUIDs of each
  item's path and content;
* the model spec is serialized deterministically (protobuf map fields sorted) and its
  ``com.github.apple.coremltools.conversion_date`` is the UTC date of ``SOURCE_DATE_EPOCH``
  when that is set, and left out otherwise;
* the directory tree is flattened in sorted order (``payload.flatten_tree``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lowerkit.coreml_preprocess.errors import CoreMLLoweringError
from lowerkit.coreml_preprocess.options import ModelType
from lowerkit.coreml_preprocess.payload import flatten_tree

CONVERSION_DATE_KEY = "com.github.apple.coremltools.conversion_date"
MODEL_SPEC_PATH = "Data/com.apple.CoreML/model.mlmodel"
DEBUG_MAPPING = "executorch_debug_handle_mapping.json"
#: Namespace of lowerkit's name-based UUIDs (uuid5 of the DNS name "lowerkit.coreml").
NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "lowerkit.coreml")


@dataclass
class ModelMetadata:
    """ExecuTorch's ``metadata.json`` (same field order)."""

    inputNames: list[str]
    outputNames: list[str]
    identifier: str


@dataclass
class ModelDebugInfo:
    """ExecuTorch's ``debug_info.json`` (same field order)."""

    versionInfo: Any
    debugSymbolToOperationPath: dict[str, list[dict[str, str]]]
    debugSymbolToHandles: dict[str, list[int]]


def conversion_date() -> str | None:
    """The conversion date to record: ``SOURCE_DATE_EPOCH``'s UTC date, or ``None`` (left out)."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if not epoch:
        return None
    try:
        return time.strftime("%Y-%m-%d", time.gmtime(int(epoch)))
    except ValueError:
        raise CoreMLLoweringError(
            f"SOURCE_DATE_EPOCH must be an integer number of seconds, got {epoch!r}."
        ) from None


def deterministic_spec_bytes(spec_bytes: bytes) -> bytes:
    """A serialized model spec re-serialized with sorted maps and the conversion date settled."""
    from coremltools.proto import Model_pb2

    spec = Model_pb2.Model()
    spec.ParseFromString(spec_bytes)
    _settle_spec(spec)
    return bytes(spec.SerializeToString(deterministic=True))


def settle_conversion_date(metadata: Any) -> None:
    """Set (``SOURCE_DATE_EPOCH``) or drop coremltools' conversion date in a user metadata map."""
    date = conversion_date()
    if date is None:
        if CONVERSION_DATE_KEY in metadata:
            del metadata[CONVERSION_DATE_KEY]
    elif CONVERSION_DATE_KEY in metadata:
        metadata[CONVERSION_DATE_KEY] = date


def _settle_spec(spec: Any) -> None:
    settle_conversion_date(spec.description.metadata.userDefined)
    if spec.WhichOneof("Type") == "pipeline":
        for model in spec.pipeline.models:
            _settle_spec(model)


def content_uuid(*parts: bytes | str) -> str:
    """A UUID derived from `parts` (length-prefixed, so no two part lists collide)."""
    digest = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return str(uuid.uuid5(NAMESPACE, digest.hexdigest()))


#: ``{path: (the bytes hashed, their sha256)}``: lets one payload's files be hashed once each.
DigestCache = dict[str, tuple[bytes, str]]


def digest_files(files: dict[str, bytes], cache: DigestCache | None = None) -> list[str]:
    """``path:sha256`` of each file, sorted by path (`cache` reused when it holds the same bytes object)."""
    result = []
    for path, data in sorted(files.items()):
        known = cache.get(path) if cache is not None else None
        if known is not None and known[0] is data:
            digest = known[1]
        else:
            digest = hashlib.sha256(data).hexdigest()
            if cache is not None:
                cache[path] = (data, digest)
        result.append(f"{path}:{digest}")
    return result


def settle_manifest(package: dict[str, bytes], cache: DigestCache | None = None) -> None:
    """Replace the random item identifiers of ``Manifest.json`` by content-derived ones."""
    manifest = json.loads(package["Manifest.json"])
    entries = manifest.get("itemInfoEntries", {})
    renamed: dict[str, str] = {}
    new_entries: dict[str, Any] = {}
    for old_id, entry in entries.items():
        prefix = "Data/" + entry["path"]
        content = {p: d for p, d in package.items() if p == prefix or p.startswith(prefix + "/")}
        new_id = content_uuid(entry["path"], *digest_files(content, cache))
        renamed[old_id] = new_id
        new_entries[new_id] = entry
    manifest["itemInfoEntries"] = new_entries
    if manifest.get("rootModelIdentifier") in renamed:
        manifest["rootModelIdentifier"] = renamed[manifest["rootModelIdentifier"]]
    package["Manifest.json"] = (json.dumps(manifest, indent=4, sort_keys=True) + "\n").encode("utf-8")


def read_tree(directory: Path) -> dict[str, bytes]:
    """``{relative/path: bytes}`` of every file under ``directory``."""
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def nest(files: dict[str, bytes]) -> dict[str, Any]:
    """``{"a/b": x}`` -> ``{"a": {"b": x}}``."""
    tree: dict[str, Any] = {}
    for path, data in files.items():
        node = tree
        *dirs, name = path.split("/")
        for part in dirs:
            node = node.setdefault(part, {})
        node[name] = data
    return tree


def debug_info(mapping_json: bytes | None) -> ModelDebugInfo | None:
    """ExecuTorch's ``CoreMLBackend.get_model_debug_info`` on the package's debug mapping."""
    if mapping_json is None:
        return None
    try:
        info = json.loads(mapping_json)
    except ValueError:
        return None
    if info is None:
        return None
    mapping = info.get("mapping", None)
    if mapping is None:
        return None
    to_path: dict[str, list[dict[str, str]]] = {}
    to_handles: dict[str, list[int]] = {}
    for handle, operation_paths in mapping.items():
        try:
            handle_value = int(handle)
        except ValueError:
            continue
        for operation_path in operation_paths:
            if not operation_path:
                continue
            operator = operation_path[-1].get("Operator", None)
            output = operation_path[-1].get("Output", None)
            if operator is None or output is None:
                continue
            symbol = output + ":" + operator
            to_handles.setdefault(symbol, []).append(handle_value)
            to_path[symbol] = operation_path
    return ModelDebugInfo(info.get("version", {}), to_path, to_handles)


@dataclass(frozen=True)
class BuiltPayload:
    """A payload and what ExecuTorch's ``PreprocessResult`` needs besides."""

    processed_bytes: bytes
    debug_handle_map: dict[str, tuple[int, ...]] | None
    identifier: str


def model_metadata(spec: Any, identifier: str) -> ModelMetadata:
    """ExecuTorch's ``model_metadata_from_spec`` checks, with lowerkit's errors."""
    inputs = [i.name for i in spec.description.input]
    outputs = [o.name for o in spec.description.output]
    if not outputs:
        raise CoreMLLoweringError("Cannot lower a model with no outputs in Core ML.")
    if not inputs and spec.specificationVersion < 9:
        raise CoreMLLoweringError(
            "a Core ML model with no inputs needs minimum_deployment_target iOS18 or later: set "
            "CoreMLCompileOptions(minimum_deployment_target='iOS18')."
        )
    return ModelMetadata(inputs, outputs, identifier)


def build_payload(mlmodel: Any, model_type: ModelType) -> BuiltPayload:
    """Save ``mlmodel`` the way ExecuTorch does and flatten it deterministically."""
    spec = mlmodel.get_spec()
    digests: DigestCache = {}
    with tempfile.TemporaryDirectory(prefix="lowerkit_coreml_") as tmp:
        saved = Path(tmp) / "model.mlpackage"
        mlmodel.save(str(saved))
        package = read_tree(saved)
        if model_type is ModelType.COMPILED_MODEL:
            try:
                compiled = Path(mlmodel.get_compiled_model_path())
            except Exception as error:
                raise CoreMLLoweringError(
                    f"model_type='compiled_model' needs Core ML to compile the model ({error}); "
                    "Core ML runs on macOS only. Use model_type='model' (the device compiles it)."
                ) from None
            model_dir = "model.mlmodelc"
            model_files = read_tree(compiled)
            shutil.rmtree(compiled, ignore_errors=True)
        else:
            model_dir = "model.mlpackage"
            package[MODEL_SPEC_PATH] = deterministic_spec_bytes(package[MODEL_SPEC_PATH])
            settle_manifest(package, digests)
            model_files = package
    info = debug_info(package.get(DEBUG_MAPPING))
    digest = digest_files(model_files, digests)
    inputs = [i.name for i in spec.description.input]
    outputs = [o.name for o in spec.description.output]
    identifier = "executorch_" + content_uuid(model_dir, *digest, json.dumps([inputs, outputs]))
    metadata = model_metadata(spec, identifier)
    tree: dict[str, Any] = {
        model_dir: nest(model_files),
        "metadata.json": json.dumps(asdict(metadata)).encode("utf-8"),
    }
    if info is not None:
        tree["debug_info.json"] = json.dumps(asdict(info)).encode("utf-8")
    handles = None
    if info is not None:
        handles = {k: tuple(v) for k, v in info.debugSymbolToHandles.items()}
    return BuiltPayload(flatten_tree("lowered_module", tree), handles, identifier)

