// `sandbox.files` as E2B's SDK has it: read as text, bytes, Blob or a web ReadableStream; write
// one file or many; list with a depth; watchDir. airlock's API has no watch endpoint, so
// watchDir polls the directory listing (files/list) and reports the differences between two
// polls: a file made and removed between them is not seen, a rename is a remove and a create,
// and events arrive up to one poll interval late.

import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';

import { NotFoundError } from '../errors.js';
import { absolute, type Files as NativeFiles, type WriteOptions } from '../files.js';
import type { EntryInfo as NativeEntry } from '../models.js';
import type { UploadSource } from '../transport.js';
import { InvalidArgumentError } from './errors.js';
import { checkUser } from './options.js';

export enum FileType {
  FILE = 'file',
  DIR = 'dir',
}

/** A file or directory (E2B's EntryInfo). */
export interface EntryInfo {
  name: string;
  /** undefined for a symlink or a special file. */
  type?: FileType;
  path: string;
  size: number;
  /** Permission bits, e.g. 0o644. */
  mode: number;
  /** As `ls -l` shows them, e.g. "-rw-r--r--". */
  permissions: string;
  modifiedTime?: Date;
}

/** What `files.write` answers (E2B's WriteInfo). */
export interface WriteInfo {
  name: string;
  type?: FileType;
  path: string;
}

export interface WriteEntry {
  path: string;
  data: string | ArrayBuffer | Uint8Array | Blob | WebReadableStream<Uint8Array> | Readable;
}

export enum FilesystemEventType {
  CHMOD = 'chmod',
  CREATE = 'create',
  REMOVE = 'remove',
  RENAME = 'rename',
  WRITE = 'write',
}

export interface FilesystemEvent {
  /** The entry's path relative to the watched directory. */
  name: string;
  type: FilesystemEventType;
}

export interface WatchOpts {
  /** Also watch subdirectories (each poll then lists them all). */
  recursive?: boolean;
  /** Milliseconds until the watch stops by itself (E2B's default 60 000); 0: never. */
  timeoutMs?: number;
  /** Called once the watch ends: with the error that ended it, or none on stop() or timeout. */
  onExit?: (err?: Error) => void | Promise<void>;
  /** airlock: milliseconds between two listings; default 250. */
  pollIntervalMs?: number;
  user?: string;
  requestTimeoutMs?: number;
}

/** A running watch (E2B's WatchHandle). */
export interface WatchHandle {
  stop(): Promise<void>;
}

export interface FilesystemRequestOpts {
  /** "user" only; "root" is refused. */
  user?: string;
  /** Accepted for E2B code; the sandbox's requestTimeoutMs applies. */
  requestTimeoutMs?: number;
}

function fileType(entry: NativeEntry): FileType | undefined {
  return entry.type === 'file' ? FileType.FILE : entry.type === 'dir' ? FileType.DIR : undefined;
}

function permissions(entry: NativeEntry): string {
  const kind = entry.type === 'dir' ? 'd' : entry.type === 'symlink' ? 'l' : '-';
  let bits = '';
  for (let shift = 6; shift >= 0; shift -= 3) {
    const m = (entry.mode >> shift) & 7;
    bits += `${m & 4 ? 'r' : '-'}${m & 2 ? 'w' : '-'}${m & 1 ? 'x' : '-'}`;
  }
  return kind + bits;
}

export function toEntry(entry: NativeEntry): EntryInfo {
  const out: EntryInfo = {
    name: entry.name,
    path: entry.path,
    size: entry.size,
    mode: entry.mode,
    permissions: permissions(entry),
  };
  const type = fileType(entry);
  if (type !== undefined) out.type = type;
  if (entry.modifiedTime !== null) out.modifiedTime = entry.modifiedTime;
  return out;
}

async function uploadSource(data: WriteEntry['data'], path: string): Promise<UploadSource> {
  if (typeof data === 'string' || data instanceof Uint8Array || data instanceof Readable) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (typeof Blob !== 'undefined' && data instanceof Blob) return new Uint8Array(await data.arrayBuffer());
  if (typeof data === 'object' && data !== null && typeof (data as WebReadableStream).getReader === 'function') {
    return Readable.fromWeb(data as WebReadableStream<Uint8Array>);
  }
  throw new InvalidArgumentError(
    `files.write ${path}: data must be a string, ArrayBuffer, Uint8Array, Blob or ReadableStream, not ${typeof data}`,
  );
}

/** `sandbox.files`, E2B's way. Relative paths are taken from /home/user. */
export class Filesystem {
  constructor(private readonly native: NativeFiles) {}

  read(path: string, opts?: FilesystemRequestOpts & { format?: 'text' }): Promise<string>;
  read(path: string, opts: FilesystemRequestOpts & { format: 'bytes' }): Promise<Uint8Array>;
  read(path: string, opts: FilesystemRequestOpts & { format: 'blob' }): Promise<Blob>;
  read(path: string, opts: FilesystemRequestOpts & { format: 'stream' }): Promise<WebReadableStream<Uint8Array>>;
  async read(
    path: string,
    opts: FilesystemRequestOpts & { format?: 'text' | 'bytes' | 'blob' | 'stream' } = {},
  ): Promise<string | Uint8Array | Blob | WebReadableStream<Uint8Array>> {
    checkUser(opts.user, 'files.read');
    switch (opts.format ?? 'text') {
      case 'text':
        return this.native.read(path);
      case 'bytes':
        return new Uint8Array(await this.native.read(path, { format: 'bytes' }));
      case 'blob':
        return new Blob([await this.native.read(path, { format: 'bytes' })]);
      case 'stream':
        return Readable.toWeb(await this.native.read(path, { format: 'stream' })) as WebReadableStream<Uint8Array>;
      default:
        throw new InvalidArgumentError(
          `files.read ${path}: format must be 'text', 'bytes', 'blob' or 'stream', not '${String(opts.format)}'`,
        );
    }
  }

  write(path: string, data: WriteEntry['data'], opts?: FilesystemRequestOpts & WriteOptions): Promise<WriteInfo>;
  write(files: WriteEntry[], opts?: FilesystemRequestOpts & WriteOptions): Promise<WriteInfo[]>;
  /** Writes one file (replacing it, making missing parents), or each of an array of {path, data}. */
  async write(
    pathOrFiles: string | WriteEntry[],
    dataOrOpts?: WriteEntry['data'] | (FilesystemRequestOpts & WriteOptions),
    maybeOpts?: FilesystemRequestOpts & WriteOptions,
  ): Promise<WriteInfo | WriteInfo[]> {
    if (Array.isArray(pathOrFiles)) {
      const opts = (dataOrOpts ?? {}) as FilesystemRequestOpts & WriteOptions;
      checkUser(opts.user, 'files.write');
      const written: WriteInfo[] = [];
      for (const entry of pathOrFiles) written.push(await this.writeOne(entry.path, entry.data, opts));
      return written;
    }
    const opts = maybeOpts ?? {};
    checkUser(opts.user, 'files.write');
    return this.writeOne(pathOrFiles, dataOrOpts as WriteEntry['data'], opts);
  }

  /** The entries of a directory; `depth` > 1 descends into subdirectories that many levels. */
  async list(path: string, opts: FilesystemRequestOpts & { depth?: number } = {}): Promise<EntryInfo[]> {
    checkUser(opts.user, 'files.list');
    const depth = opts.depth ?? 1;
    if (!Number.isInteger(depth) || depth < 1) {
      throw new InvalidArgumentError(`files.list ${path}: depth must be a whole number >= 1, got ${depth}`);
    }
    const out: EntryInfo[] = [];
    const walk = async (dir: string, level: number): Promise<void> => {
      for (const entry of await this.native.list(dir)) {
        out.push(toEntry(entry));
        if (entry.type === 'dir' && level < depth) await walk(entry.path, level + 1);
      }
    };
    await walk(path, 1);
    return out;
  }

  exists(path: string, opts: FilesystemRequestOpts = {}): Promise<boolean> {
    checkUser(opts.user, 'files.exists');
    return this.native.exists(path);
  }

  async getInfo(path: string, opts: FilesystemRequestOpts = {}): Promise<EntryInfo> {
    checkUser(opts.user, 'files.getInfo');
    return toEntry(await this.native.getInfo(path));
  }

  /** Removes a file, or a directory with everything in it. */
  remove(path: string, opts: FilesystemRequestOpts = {}): Promise<void> {
    checkUser(opts.user, 'files.remove');
    return this.native.remove(path);
  }

  async rename(oldPath: string, newPath: string, opts: FilesystemRequestOpts = {}): Promise<EntryInfo> {
    checkUser(opts.user, 'files.rename');
    return toEntry(await this.native.rename(oldPath, newPath));
  }

  /** Makes the directory and its parents; false when it already existed. */
  makeDir(path: string, opts: FilesystemRequestOpts = {}): Promise<boolean> {
    checkUser(opts.user, 'files.makeDir');
    return this.native.makeDir(path);
  }

  /**
   * Calls `onEvent` for each change in `path` until stop() or `timeoutMs`. Polls the listing
   * (airlock has no watch endpoint): creations (a new non-empty file also as a write, as E2B
   * reports it), removals, writes (size or mtime changed) and mode changes between two polls;
   * a rename is a remove plus a create.
   */
  async watchDir(
    path: string,
    onEvent: (event: FilesystemEvent) => void | Promise<void>,
    opts: WatchOpts = {},
  ): Promise<WatchHandle> {
    checkUser(opts.user, 'files.watchDir');
    if (typeof onEvent !== 'function') throw new InvalidArgumentError('files.watchDir: onEvent must be a function');
    const interval = opts.pollIntervalMs ?? 250;
    const timeoutMs = opts.timeoutMs ?? 60_000;
    if (!(interval > 0)) throw new InvalidArgumentError(`files.watchDir: pollIntervalMs must be > 0, got ${interval}`);
    const info = await this.native.getInfo(path); // NotFoundError for a missing directory, as E2B
    if (info.type !== 'dir') throw new InvalidArgumentError(`files.watchDir: ${info.path} is not a directory`);
    const root = info.path.replace(/\/+$/, '');
    const snapshot = async (): Promise<Map<string, string>> => {
      const seen = new Map<string, string>();
      const walk = async (dir: string): Promise<void> => {
        let entries: NativeEntry[];
        try {
          entries = await this.native.list(dir);
        } catch (err) {
          if (err instanceof NotFoundError && dir !== root) return; // removed between two listings
          throw err;
        }
        for (const e of entries) {
          seen.set(e.path.slice(root.length + 1), `${e.type}|${e.size}|${e.modifiedTime?.getTime() ?? ''}|${e.mode}`);
          if (opts.recursive && e.type === 'dir') await walk(e.path);
        }
      };
      await walk(root);
      return seen;
    };

    let previous = await snapshot();
    let stopped = false;
    let timer: NodeJS.Timeout | undefined;
    let deadline: NodeJS.Timeout | undefined;
    const finish = async (err?: Error): Promise<void> => {
      if (stopped) return;
      stopped = true;
      clearTimeout(timer);
      clearTimeout(deadline);
      await opts.onExit?.(err);
    };
    const poll = async (): Promise<void> => {
      if (stopped) return;
      try {
        const current = await snapshot();
        for (const [name, state] of current) {
          const before = previous.get(name);
          if (before === undefined) {
            await onEvent({ name, type: FilesystemEventType.CREATE });
            // A file made with content was also written to, as inotify reports it to E2B.
            if (state.startsWith('file|') && !state.startsWith('file|0|')) await onEvent({ name, type: FilesystemEventType.WRITE });
          }
          else if (before !== state) {
            const [, , , modeBefore] = before.split('|');
            const [, , , modeNow] = state.split('|');
            const contentSame = before.slice(0, before.lastIndexOf('|')) === state.slice(0, state.lastIndexOf('|'));
            await onEvent({ name, type: contentSame && modeBefore !== modeNow ? FilesystemEventType.CHMOD : FilesystemEventType.WRITE });
          }
        }
        for (const name of previous.keys()) {
          if (!current.has(name)) await onEvent({ name, type: FilesystemEventType.REMOVE });
        }
        previous = current;
      } catch (err) {
        await finish(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      if (!stopped) timer = setTimeout(() => void poll(), interval);
    };
    timer = setTimeout(() => void poll(), interval);
    if (timeoutMs > 0) deadline = setTimeout(() => void finish(), timeoutMs);
    return { stop: () => finish() };
  }

  /** One file; missing parent directories are made, as E2B does. */
  private async writeOne(path: string, data: WriteEntry['data'], opts: WriteOptions): Promise<WriteInfo> {
    const source = await uploadSource(data, path);
    const options = opts.mode === undefined ? {} : { mode: opts.mode };
    const parent = absolute(path).replace(/\/[^/]*$/, '') || '/';
    const replayable = typeof source === 'string' || source instanceof Uint8Array;
    // A stream can be sent once: make the parents first. Bytes are sent again only if needed.
    if (!replayable) await this.native.makeDir(parent);
    let written;
    try {
      written = await this.native.write(path, source, options);
    } catch (err) {
      if (!(err instanceof NotFoundError) || !replayable || !(await this.native.makeDir(parent))) throw err;
      written = await this.native.write(path, source, options);
    }
    return { name: written.name, type: FileType.FILE, path: written.path };
  }
}
