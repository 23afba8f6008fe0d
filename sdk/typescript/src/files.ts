// Files inside a sandbox: `sbx.files`. Contents travel as raw bytes (PUT/GET .../files) streamed
// both ways, so a file of any size within the workspace quota goes through without being held in
// memory twice or base64-encoded.

import type { Readable } from 'node:stream';

import { ConflictError, InvalidRequestError, NotFoundError } from './errors.js';
import { parseEntries, parseEntry, parseWriteInfo, type EntryInfo, type WriteInfo } from './models.js';
import { quote, readAll, type Transport, type UploadSource } from './transport.js';

export interface WriteOptions {
  /** Permission bits, e.g. 0o755; default 0o644. */
  mode?: number;
}

export type ReadFormat = 'text' | 'bytes' | 'stream';

// An upload or download may take long in total; the limit is on silence, not on the transfer.
export const TRANSFER_SILENCE_S = 300;

/** `sbx.files`. Paths are absolute inside the sandbox; relative ones are taken from /home/user. */
export class Files {
  private readonly base: string;

  constructor(
    private readonly transport: Transport,
    sandboxId: string,
  ) {
    this.base = `/v1/sandboxes/${quote(sandboxId)}/files`;
  }

  /**
   * Writes `data` to `path`, replacing it: text as UTF-8, bytes, or a Readable / async iterable
   * streamed up in chunks (its size need not be known). Rejects with QuotaExceededError when the
   * file passes the sandbox's workspace quota.
   */
  async write(path: string, data: UploadSource, options: WriteOptions = {}): Promise<WriteInfo> {
    path = absolute(path);
    if (!isUploadSource(data)) {
      throw new InvalidRequestError(
        `files.write ${path}: data must be a string, Buffer/Uint8Array, Readable or async iterable, not ${typeof data}`,
      );
    }
    const query: Array<[string, string]> = [['path', path]];
    if (options.mode !== undefined) {
      if (!Number.isInteger(options.mode) || options.mode < 0 || options.mode > 0o7777) {
        throw new InvalidRequestError(`files.write ${path}: mode must be permission bits such as 0o644, got ${options.mode}`);
      }
      query.push(['mode', options.mode.toString(8).padStart(4, '0')]);
    }
    const answer = await this.transport.upload('PUT', this.base, data, { query, timeout: TRANSFER_SILENCE_S });
    return parseWriteInfo(answer, path);
  }

  /**
   * The file's contents: "text" (UTF-8, the default), "bytes" (a Buffer), or "stream" (a
   * Readable of chunks for big files; destroying it stops the download).
   */
  read(path: string, options?: { format?: 'text' }): Promise<string>;
  read(path: string, options: { format: 'bytes' }): Promise<Buffer>;
  read(path: string, options: { format: 'stream' }): Promise<Readable>;
  async read(path: string, options: { format?: ReadFormat } = {}): Promise<string | Buffer | Readable> {
    const format = options.format ?? 'text';
    if (format !== 'text' && format !== 'bytes' && format !== 'stream') {
      throw new InvalidRequestError(`files.read ${path}: format must be 'text', 'bytes' or 'stream', not '${String(format)}'`);
    }
    path = absolute(path);
    const res = await this.transport.download(this.base, { query: { path }, timeout: TRANSFER_SILENCE_S });
    if (format === 'stream') return res;
    const data = await readAll(res, `GET ${this.base}?path=${path}`);
    return format === 'bytes' ? data : data.toString('utf8');
  }

  /** The entries of a directory. */
  async list(path = '/home/user'): Promise<EntryInfo[]> {
    path = absolute(path);
    return parseEntries(await this.transport.json('GET', `${this.base}/list`, undefined, { query: { path } }), path);
  }

  async getInfo(path: string): Promise<EntryInfo> {
    path = absolute(path);
    return parseEntry(await this.transport.json('GET', `${this.base}/stat`, undefined, { query: { path } }));
  }

  async exists(path: string): Promise<boolean> {
    try {
      await this.getInfo(path);
      return true;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  /** Creates the directory and its missing parents. False when it already existed. */
  async makeDir(path: string): Promise<boolean> {
    path = absolute(path);
    if (await this.exists(path)) return false;
    try {
      await this.transport.json('POST', `${this.base}/mkdir`, { path, parents: true });
      return true;
    } catch (err) {
      if (err instanceof ConflictError) return false; // made meanwhile by someone else
      throw err;
    }
  }

  /**
   * Removes a file, or a directory with everything in it (as E2B does); `recursive: false`
   * refuses a non-empty directory.
   */
  async remove(path: string, options: { recursive?: boolean } = {}): Promise<void> {
    await this.transport.json('POST', `${this.base}/remove`, { path: absolute(path), recursive: options.recursive ?? true });
  }

  /** Moves `oldPath` to `newPath`; the entry at its new place. */
  async rename(oldPath: string, newPath: string): Promise<EntryInfo> {
    newPath = absolute(newPath);
    await this.transport.json('POST', `${this.base}/rename`, { from: absolute(oldPath), to: newPath });
    return this.getInfo(newPath);
  }
}

/** `path` inside the sandbox: relative paths are taken from /home/user. */
export function absolute(path: string): string {
  if (typeof path !== 'string' || path === '') {
    throw new InvalidRequestError(`file path must be a non-empty string, got ${JSON.stringify(path)}`);
  }
  return path.startsWith('/') ? path : `/home/user/${path}`;
}

function isUploadSource(data: unknown): data is UploadSource {
  return (
    typeof data === 'string' ||
    data instanceof Uint8Array ||
    (typeof data === 'object' && data !== null && Symbol.asyncIterator in data)
  );
}
