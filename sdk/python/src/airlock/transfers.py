"""Archives in and out of a sandbox (docs/transfer.md): `POST .../transfers` fetches an archive
from a URL or an operator's host directory and unpacks it into a sandbox directory, or packs a
directory and sends it out, streaming progress events as NDJSON; `PUT`/`GET .../archive` move an
archive through the request itself. `Sandbox.transfer_in`, `transfer_out`, `upload_archive`,
`download_archive`, `list_transfers` and `cancel_transfer` call in here."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator
from typing import IO, Any

from airlock.errors import (
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    TransferError,
    stream_ended_early,
)
from airlock.files import _absolute, _chunks_of, _json_of
from airlock.models import TransferProgress, TransferRecord
from airlock.transport import Transport, quote

ProgressHandler = Callable[[TransferProgress], Any]

ARCHIVE_FORMATS = ("tar", "tar.gz", "tar.zst", "zip")


class Transfers:
    def __init__(self, transport: Transport, sandbox_id: str) -> None:
        self._transport = transport
        self._base = f"/v1/sandboxes/{quote(sandbox_id)}"

    def start(self, direction: str, location: str, path: str,
              on_progress: ProgressHandler | None) -> TransferRecord:
        """One transfer, streamed: progress events to `on_progress`, then the record. Raises
        TransferError unless the record's status is "ok"."""
        key = "source" if direction == "in" else "dest"
        if not isinstance(location, str) or not location:
            raise InvalidRequestError(f"transfer_{direction}: {key} must be a non-empty str, "
                                      f"got {location!r}")
        path = _absolute(path)
        body = {"direction": direction, key: location, "path": path}
        what = f"transfer {direction} {location!r} {'into' if direction == 'in' else 'from'} {path}"
        record: TransferRecord | None = None
        # No socket timeout, as for commands: the supervisor bounds the transfer by the profile's
        # limits, and sends progress about four times a second meanwhile. Leaving early (an
        # exception in on_progress) closes the stream, which cancels the transfer.
        with self._transport.stream("POST", self._base + "/transfers", body) as r:
            for event in r.events():
                kind = event.get("type")
                if kind == "progress":
                    if on_progress is not None:
                        on_progress(TransferProgress.from_event(event))
                elif kind == "transfer":
                    record = TransferRecord.from_json(
                        {k: v for k, v in event.items() if k != "type"})
        if record is None:
            raise stream_ended_early(what, "transfer")
        return _checked(record, what)

    def list(self) -> builtins.list[TransferRecord]:
        answer = self._transport.json("GET", self._base + "/transfers")
        transfers = answer.get("transfers", []) if isinstance(answer, dict) else []
        return [TransferRecord.from_json(t) for t in transfers if isinstance(t, dict)]

    def cancel(self, transfer_id: str) -> bool:
        """False when the transfer has already ended (409) or is unknown (404)."""
        try:
            self._transport.json("DELETE", f"{self._base}/transfers/{quote(transfer_id)}")
            return True
        except (NotFoundError, ConflictError):
            return False

    def upload(self, path: str, data: bytes | bytearray | memoryview | IO[Any]) -> TransferRecord:
        path = _absolute(path)
        body: bytes | Iterator[bytes]
        if isinstance(data, (bytes, bytearray, memoryview)):
            body = bytes(data)
        elif hasattr(data, "read"):
            body = _chunks_of(data)  # sent chunked: the size need not be known up front
        else:
            raise InvalidRequestError(
                f"upload_archive {path}: data must be bytes or a binary file object, "
                f"not {type(data).__name__}")
        headers = {"Content-Type": "application/octet-stream"}
        with self._transport.open("PUT", self._base + "/archive", body, headers=headers,
                                  query=[("path", path)]) as r:
            answer = _json_of(b"".join(r.chunks()))
        return _checked(TransferRecord.from_json(answer), f"upload_archive {path}")

    def download(self, path: str, format: str, file: IO[bytes] | None) -> bytes | int:
        if format not in ARCHIVE_FORMATS:
            raise InvalidRequestError(
                f"download_archive {path}: format must be one of {', '.join(ARCHIVE_FORMATS)}, "
                f"not {format!r}")
        path = _absolute(path)
        response = self._transport.open("GET", self._base + "/archive",
                                        query=[("path", path), ("format", format)])
        if file is None:
            return b"".join(response.chunks())
        written = 0
        for chunk in response.chunks():
            file.write(chunk)
            written += len(chunk)
        return written


def _checked(record: TransferRecord, what: str) -> TransferRecord:
    if record.status != "ok":
        raise TransferError(f"{what}: {record.status or 'no status'}: "
                            f"{record.error or 'no reason given'}", transfer=record)
    return record
