// Archives in and out of a sandbox (docs/transfer.md): `POST .../transfers` fetches an archive
// from a URL or an operator's host directory and unpacks it into a sandbox directory, or packs a
// directory and sends it out, streaming progress events; `PUT` / `GET .../archive` move an archive
// through the request itself. Sandbox.transferIn, transferOut, uploadArchive, downloadArchive,
// listTransfers and cancelTransfer call in here.

import type { Readable } from 'node:stream';

import { ConflictError, InvalidRequestError, NotFoundError, TransferError, streamEndedEarly } from './errors.js';
import { absolute, TRANSFER_SILENCE_S } from './files.js';
import { objects } from './json.js';
import { parseTransfer, parseTransferProgress, type TransferProgress, type TransferRecord } from './models.js';
import { quote, readAll, type Transport } from './transport.js';

/** Called with each progress event (about four a second); a returned promise is awaited. */
export type TransferProgressHandler = (progress: TransferProgress) => unknown;

export interface TransferOptions {
  onProgress?: TransferProgressHandler;
}

export type ArchiveFormat = 'tar' | 'tar.gz' | 'tar.zst' | 'zip';

export interface DownloadArchiveOptions {
  /** The archive's format; default "tar.gz". */
  format?: ArchiveFormat;
  /** Resolve with a Readable of the archive's bytes instead of a Buffer. */
  stream?: boolean;
}

/** What uploadArchive can stream up: bytes, or a stream / async iterable of byte chunks. */
export type ArchiveSource = Uint8Array | Readable | AsyncIterable<Uint8Array>;

const ARCHIVE_FORMATS: readonly string[] = ['tar', 'tar.gz', 'tar.zst', 'zip'];

export class Transfers {
  private readonly base: string;

  constructor(
    private readonly transport: Transport,
    sandboxId: string,
  ) {
    this.base = `/v1/sandboxes/${quote(sandboxId)}`;
  }

  /**
   * One transfer, streamed: progress events to onProgress, then the record. Rejects with
   * TransferError unless the record's status is "ok".
   */
  async start(direction: 'in' | 'out', location: string, path: string, options: TransferOptions): Promise<TransferRecord> {
    const key = direction === 'in' ? 'source' : 'dest';
    if (typeof location !== 'string' || location === '') {
      throw new InvalidRequestError(`transfer ${direction}: ${key} must be a non-empty string, got ${JSON.stringify(location)}`);
    }
    path = absolute(path);
    const what = `transfer ${direction} '${location}' ${direction === 'in' ? 'into' : 'from'} ${path}`;
    let record: TransferRecord | undefined;
    // No silence limit, as for commands: the supervisor bounds a transfer by the profile's limits.
    // Leaving early (onProgress throws) closes the stream, which cancels the transfer.
    const events = this.transport.events('POST', `${this.base}/transfers`, { direction, [key]: location, path }, { timeout: null });
    for await (const event of events) {
      if (event['type'] === 'progress') {
        await options.onProgress?.(parseTransferProgress(event));
      } else if (event['type'] === 'transfer') {
        const { type: _type, ...rest } = event;
        record = parseTransfer(rest);
      }
    }
    if (record === undefined) throw streamEndedEarly(what, 'transfer');
    return checked(record, what);
  }

  async list(): Promise<TransferRecord[]> {
    return objects(await this.transport.json('GET', `${this.base}/transfers`), 'transfers').map(parseTransfer);
  }

  /** False when the transfer has already ended (409) or is unknown (404). */
  async cancel(transferId: string): Promise<boolean> {
    try {
      await this.transport.json('DELETE', `${this.base}/transfers/${quote(transferId)}`);
      return true;
    } catch (err) {
      if (err instanceof NotFoundError || err instanceof ConflictError) return false;
      throw err;
    }
  }

  async upload(path: string, data: ArchiveSource): Promise<TransferRecord> {
    path = absolute(path);
    if (!(data instanceof Uint8Array) && !(typeof data === 'object' && data !== null && Symbol.asyncIterator in data)) {
      throw new InvalidRequestError(
        `uploadArchive ${path}: data must be a Buffer/Uint8Array, Readable or async iterable of bytes, not ${typeof data}`,
      );
    }
    const answer = await this.transport.upload('PUT', `${this.base}/archive`, data, {
      query: { path },
      timeout: TRANSFER_SILENCE_S,
    });
    return checked(parseTransfer(answer), `uploadArchive ${path}`);
  }

  async download(path: string, options: DownloadArchiveOptions): Promise<Buffer | Readable> {
    const format = options.format ?? 'tar.gz';
    if (!ARCHIVE_FORMATS.includes(format)) {
      throw new InvalidRequestError(
        `downloadArchive ${path}: format must be one of ${ARCHIVE_FORMATS.join(', ')}, not '${String(format)}'`,
      );
    }
    path = absolute(path);
    const res = await this.transport.download(`${this.base}/archive`, { query: { path, format }, timeout: TRANSFER_SILENCE_S });
    if (options.stream) return res;
    return readAll(res, `GET ${this.base}/archive?path=${path}`);
  }
}

function checked(record: TransferRecord, what: string): TransferRecord {
  if (record.status !== 'ok') {
    throw new TransferError(`${what}: ${record.status || 'no status'}: ${record.error ?? 'no reason given'}`, record);
  }
  return record;
}
