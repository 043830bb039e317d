"""The remote cache over the Remote Execution API (REAPI v2): ActionCache + CAS + ByteStream.

A lowering key becomes a deterministic REAPI Action (a Command naming the key, an empty input
root); its ActionResult holds one output file, the encoded entry, stored in the CAS. So any
REAPI server serves it (BuildGrid, Buildbarn, bazel-remote...). Every blob read is checked
against its digest. Any gRPC failure or timeout disables the remote for the rest of the
process, with one warning: the lowering goes on locally.
"""

from __future__ import annotations

import hashlib
import socket
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

if TYPE_CHECKING:
    from buildgrid.common.protos.build.bazel.remote.execution.v2.remote_execution_pb2 import Digest

#: Seconds for a metadata call (lookups, small uploads); a slow server must not slow lowering much.
CALL_TIMEOUT = 3.0
#: Seconds to open a TCP connection: a server that is down is noticed at once.
CONNECT_TIMEOUT = 1.0
#: Blobs above this go through ByteStream instead of one batch call.
BATCH_LIMIT = 1024 * 1024
_CHUNK = 1024 * 1024
_OUTPUT = "lowering.entry"


class RemoteUnavailable(Exception):
    """The remote cache cannot be used; the message says why, in one line."""


def parse_address(url: str) -> str:
    """'grpc://HOST:PORT' -> 'HOST:PORT'; a ValueError names the expected form."""
    parsed = urlparse(url)
    if parsed.scheme != "grpc" or not parsed.hostname or parsed.port is None or parsed.path not in ("", "/"):
        raise ValueError(f"remote cache address '{url}' must look like grpc://HOST:PORT (TLS is not supported yet)")
    return f"{parsed.hostname}:{parsed.port}"


class RemoteStore:
    """Encoded entries by key on a REAPI server; `read_only` never writes."""

    def __init__(self, url: str, *, instance: str = "", read_only: bool = False, warn: Callable[[str], None]) -> None:
        self.url = url
        self.read_only = read_only
        self._address = parse_address(url)
        self._instance = instance
        self._warn = warn
        self._disabled = False
        self._channel: Any = None
        self._stubs: _Stubs | None = None

    def get(self, key: str) -> bytes | None:
        """The encoded entry for `key` from the server (digest-checked), or None."""
        if self._disabled:
            return None
        try:
            return self._get(key)
        except RemoteUnavailable as error:
            self._give_up(str(error))
        except Exception as error:  # grpc.RpcError and friends: never fail a lowering
            self._give_up(_describe(error))
        return None

    def put(self, key: str, data: bytes) -> bool:
        """Upload the encoded entry for `key`; False (after one warning) when the server fails."""
        if self._disabled or self.read_only:
            return False
        try:
            self._put(key, data)
            return True
        except Exception as error:
            self._give_up(str(error) if isinstance(error, RemoteUnavailable) else _describe(error))
        return False

    def close(self) -> None:
        """Close the gRPC channel."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    # --- REAPI ---------------------------------------------------------------------------

    def _get(self, key: str) -> bytes | None:
        import grpc

        stubs = self._connect()
        re = stubs.re
        action_digest, _ = _action(key)
        try:
            result = stubs.ac.GetActionResult(
                re.GetActionResultRequest(instance_name=self._instance, action_digest=action_digest),
                timeout=CALL_TIMEOUT,
            )
        except grpc.RpcError as error:
            if getattr(error, "code", lambda: None)() == grpc.StatusCode.NOT_FOUND:
                return None
            raise
        files = [f for f in result.output_files if f.path == _OUTPUT]
        if len(files) != 1:
            return None
        return self._read_blob(files[0].digest)

    def _put(self, key: str, data: bytes) -> None:
        stubs = self._connect()
        re, cas = stubs.re, stubs.cas
        action_digest, blobs = _action(key)
        entry_digest = _digest(data)
        blobs.append((entry_digest, data))
        missing = cas.FindMissingBlobs(
            re.FindMissingBlobsRequest(instance_name=self._instance, blob_digests=[d for d, _ in blobs]),
            timeout=CALL_TIMEOUT,
        )
        wanted = {(d.hash, d.size_bytes) for d in missing.missing_blob_digests}
        small = [(d, b) for d, b in blobs if (d.hash, d.size_bytes) in wanted and len(b) <= BATCH_LIMIT]
        large = [(d, b) for d, b in blobs if (d.hash, d.size_bytes) in wanted and len(b) > BATCH_LIMIT]
        if small:
            response = cas.BatchUpdateBlobs(
                re.BatchUpdateBlobsRequest(
                    instance_name=self._instance,
                    requests=[re.BatchUpdateBlobsRequest.Request(digest=d, data=b) for d, b in small],
                ),
                timeout=CALL_TIMEOUT,
            )
            failed = [r for r in response.responses if r.status.code != 0]
            if failed:
                raise RemoteUnavailable(f"the server refused a blob upload: {failed[0].status.message}")
        for digest, blob in large:
            self._write_blob(digest, blob)
        result = re.ActionResult(output_files=[re.OutputFile(path=_OUTPUT, digest=entry_digest)], exit_code=0)
        stubs.ac.UpdateActionResult(
            re.UpdateActionResultRequest(instance_name=self._instance, action_digest=action_digest, action_result=result),
            timeout=CALL_TIMEOUT,
        )

    def _read_blob(self, digest: Digest) -> bytes | None:
        """The blob, checked against `digest`; None when the CAS no longer holds it (a miss)."""
        import grpc

        stubs = self._connect()
        size = digest.size_bytes
        if size <= BATCH_LIMIT:
            response = stubs.cas.BatchReadBlobs(
                stubs.re.BatchReadBlobsRequest(instance_name=self._instance, digests=[digest]), timeout=CALL_TIMEOUT
            )
            if len(response.responses) != 1:
                raise RemoteUnavailable("the server answered a one-blob read with another count")
            if response.responses[0].status.code == grpc.StatusCode.NOT_FOUND.value[0]:
                return None
            if response.responses[0].status.code != 0:
                raise RemoteUnavailable(f"blob read failed: {response.responses[0].status.message}")
            data = bytes(response.responses[0].data)
        else:
            name = f"{self._prefix()}blobs/{digest.hash}/{size}"
            stream = stubs.bs.Read(stubs.bs_pb2.ReadRequest(resource_name=name), timeout=_transfer_timeout(size))
            try:
                data = b"".join(chunk.data for chunk in stream)
            except grpc.RpcError as error:
                if getattr(error, "code", lambda: None)() == grpc.StatusCode.NOT_FOUND:
                    return None
                raise
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest.hash:
            raise RemoteUnavailable("a blob from the server does not match its digest")
        return data

    def _write_blob(self, digest: Digest, data: bytes) -> None:
        stubs = self._connect()
        bs_pb2 = stubs.bs_pb2
        size = len(data)
        name = f"{self._prefix()}uploads/{uuid.uuid4()}/blobs/{digest.hash}/{size}"

        def requests() -> Iterator[Any]:
            for offset in range(0, size, _CHUNK):
                end = min(offset + _CHUNK, size)
                yield bs_pb2.WriteRequest(
                    resource_name=name if offset == 0 else "",
                    write_offset=offset,
                    finish_write=end == size,
                    data=data[offset:end],
                )

        response = stubs.bs.Write(requests(), timeout=_transfer_timeout(size))
        if response.committed_size not in (size, -1):
            raise RemoteUnavailable(f"the server committed {response.committed_size} of {size} bytes")

    def _prefix(self) -> str:
        return f"{self._instance}/" if self._instance else ""

    def _connect(self) -> _Stubs:
        if self._stubs is None:
            import grpc
            from buildgrid.common.protos.build.bazel.remote.execution.v2 import (
                remote_execution_pb2,
                remote_execution_pb2_grpc,
            )
            from buildgrid.common.protos.google.bytestream import (
                bytestream_pb2,
                bytestream_pb2_grpc,
            )

            host, _, port = self._address.rpartition(":")
            try:
                socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT).close()
            except OSError as error:
                raise RemoteUnavailable(f"cannot connect: {error.strerror or error}") from None
            channel = grpc.insecure_channel(
                self._address,
                options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)],
            )
            try:
                grpc.channel_ready_future(channel).result(timeout=CALL_TIMEOUT)
            except grpc.FutureTimeoutError:
                channel.close()
                raise RemoteUnavailable(f"no answer within {CALL_TIMEOUT:g} s") from None
            self._channel = channel
            self._stubs = _Stubs(
                re=remote_execution_pb2,
                cas=remote_execution_pb2_grpc.ContentAddressableStorageStub(channel),
                ac=remote_execution_pb2_grpc.ActionCacheStub(channel),
                bs=bytestream_pb2_grpc.ByteStreamStub(channel),
                bs_pb2=bytestream_pb2,
            )
        return self._stubs

    def _give_up(self, why: str) -> None:
        self._disabled = True
        self.close()
        self._warn(f"remote cache {self.url} is unusable ({why}); lowering locally without it")


@dataclass(frozen=True)
class _Stubs:
    """The REAPI message modules and service stubs on one channel."""

    re: Any
    cas: Any
    ac: Any
    bs: Any
    bs_pb2: Any


def _action(key: str) -> tuple[Digest, list[tuple[Digest, bytes]]]:
    """The Action digest for `key`, and the Action, Command and input root blobs it names."""
    from buildgrid.common.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re

    command = re.Command(arguments=["lowerkit-lower", key], output_paths=[_OUTPUT]).SerializeToString(
        deterministic=True
    )
    root = re.Directory().SerializeToString(deterministic=True)
    action = re.Action(command_digest=_digest(command), input_root_digest=_digest(root)).SerializeToString(
        deterministic=True
    )
    digest = _digest(action)
    return digest, [(digest, action), (_digest(command), command), (_digest(root), root)]


def _digest(data: bytes) -> Digest:
    from buildgrid.common.protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re

    return re.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


def _transfer_timeout(size: int) -> float:
    return CALL_TIMEOUT + size / (4 * 1024 * 1024)  # at least 4 MB/s


def _describe(error: Exception) -> str:
    code = getattr(error, "code", None)
    if callable(code):
        details = error.details() if callable(getattr(error, "details", None)) else ""  # type: ignore[attr-defined]
        return f"{code().name}: {(details or '').splitlines()[0] if details else 'no detail'}"
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'no detail'}"
