// `Sandbox`: one isolated Linux sandbox on an airlock supervisor, with code contexts, commands
// and files. Shaped after E2B Code Interpreter's `Sandbox` so that moving over is mostly a
// change of import (README.md has the mapping).

import type { Readable } from 'node:stream';

import { CodeRunner, type ContextRef, type CreateContextOptions, type RunCodeOptions } from './code.js';
import { Commands } from './commands.js';
import './dispose.js';
import type { ConnectionOptions } from './endpoint.js';
import { InternalError, InvalidRequestError, NotFoundError } from './errors.js';
import { Files } from './files.js';
import { objects, str, type JsonObject } from './json.js';
import {
  parseSandboxInfo,
  parseSandboxMetrics,
  type Context,
  type Execution,
  type SandboxInfo,
  type SandboxMetrics,
  type TransferRecord,
} from './models.js';
import { Transfers, type ArchiveSource, type DownloadArchiveOptions, type TransferOptions } from './transfers.js';
import { Transport, quote } from './transport.js';

/** A host directory to show inside a new sandbox (docs/transfer.md, Mounts). */
export interface MountSpec {
  /** "hostdir:ROOT" or "hostdir:ROOT/sub/dir": a root the operator declared in [transfer] roots. */
  source: string;
  /** Where the sandbox sees it; must be under /mnt. Default /mnt/ROOT[/sub/dir]. */
  path?: string;
  /** Read-write; allowed only for a root in the operator's [transfer] writable_roots. Default false. */
  writable?: boolean;
}

export interface SandboxOptions extends ConnectionOptions {
  /** Policy profile (limits, languages, review); default: the policy's default profile. */
  profile?: string;
  /** Default language of runCode: "python", "node", ... */
  language?: string;
  /** Unique among the tenant's sandboxes; stands in for the id in connect(). */
  name?: string;
  /** Environment variables of everything run inside. */
  envs?: Record<string, string>;
  /** Free-form labels, filterable in Sandbox.list(). */
  metadata?: Record<string, string>;
  /** Idle seconds before the sandbox is destroyed (the profile sets default and maximum). */
  keepAlive?: number;
  /** Hard end in seconds, whatever the activity. */
  lifetime?: number;
  /** Keep /home/user on disk under `name` across sandboxes of that name. */
  persistent?: boolean;
  /**
   * Host directories to show inside (at most 16): a MountSpec, or its source alone
   * ("hostdir:datasets", read-only at /mnt/datasets). A bad source or path is an
   * InvalidRequestError, a root or write the profile forbids a ForbiddenError.
   */
  mounts?: (MountSpec | string)[];
  /** Another isolation backend ("gvisor"), where the profile's isolation_choices allow it. */
  isolation?: string;
}

export interface ListOptions extends ConnectionOptions {
  /** Keep only sandboxes whose metadata has every given key and value. */
  metadata?: Record<string, string>;
  /** One node of a fleet (docs/deploy.md); unset, behind a fleet's proxy, every node in turn. */
  node?: string;
}

/** A fleet's proxy answers a list with this 400: it cannot merge the nodes' lists. */
function listsPerNode(e: unknown): boolean {
  return e instanceof InvalidRequestError && e.message.startsWith('this fleet lists per node');
}

// A cold start (no warm sandbox left) takes longer than an ordinary call.
const CREATE_TIMEOUT_S = 120;

/** A `mounts` entry of the create body: only the fields given, under the API's names. */
function mountJson(mount: MountSpec | string): JsonObject {
  if (typeof mount === 'string') return { source: mount };
  const o: JsonObject = { source: mount.source };
  if (mount.path !== undefined) o['path'] = mount.path;
  if (mount.writable !== undefined) o['writable'] = mount.writable;
  return o;
}

/**
 * A sandbox. Make one with `Sandbox.create()` or attach with `Sandbox.connect()`; with
 * `await using sbx = await Sandbox.create()` it is killed at the end of the block.
 */
export class Sandbox {
  readonly commands: Commands;
  readonly files: Files;
  private readonly code: CodeRunner;
  private readonly transfers: Transfers;

  /** Use Sandbox.create or Sandbox.connect; this only wraps an existing sandbox. */
  constructor(
    private info: SandboxInfo,
    private readonly transport: Transport,
  ) {
    this.code = new CodeRunner(transport, info.id);
    this.commands = new Commands(transport, info.id);
    this.files = new Files(transport, info.id);
    this.transfers = new Transfers(transport, info.id);
  }

  /** Creates a sandbox; resolves once it can run code (milliseconds from the warm pool). */
  static async create(options: SandboxOptions = {}): Promise<Sandbox> {
    const transport = new Transport(options);
    const body: JsonObject = {};
    if (options.profile !== undefined) body['profile'] = options.profile;
    if (options.language !== undefined) body['language'] = options.language;
    if (options.name !== undefined) body['name'] = options.name;
    if (options.envs !== undefined && Object.keys(options.envs).length > 0) body['env'] = { ...options.envs };
    if (options.metadata !== undefined && Object.keys(options.metadata).length > 0) body['metadata'] = { ...options.metadata };
    if (options.keepAlive !== undefined) body['keep_alive_s'] = options.keepAlive;
    if (options.lifetime !== undefined) body['lifetime_s'] = options.lifetime;
    if (options.persistent) body['persistent'] = true;
    if (options.mounts !== undefined && options.mounts.length > 0) body['mounts'] = options.mounts.map(mountJson);
    if (options.isolation !== undefined) body['isolation'] = options.isolation;
    try {
      const answer = await transport.json('POST', '/v1/sandboxes', body, {
        timeout: Math.max(transport.requestTimeout, CREATE_TIMEOUT_S),
      });
      return new Sandbox(parseSandboxInfo(answer), transport);
    } catch (err) {
      transport.close();
      throw err;
    }
  }

  /** Attaches to a running sandbox of this tenant by id or name; NotFoundError if none. */
  static async connect(nameOrId: string, options: ConnectionOptions = {}): Promise<Sandbox> {
    const transport = new Transport(options);
    try {
      return new Sandbox(parseSandboxInfo(await transport.json('GET', `/v1/sandboxes/${quote(nameOrId)}`)), transport);
    } catch (err) {
      transport.close();
      throw err;
    }
  }

  /** The tenant's sandboxes, keeping those whose metadata has every given key and value. */
  static async list(options: ListOptions = {}): Promise<SandboxInfo[]> {
    const transport = new Transport(options);
    const queryFor = (node: string | undefined): [string, string][] => [
      ...Object.entries(options.metadata ?? {}).map(([k, v]): [string, string] => [`metadata.${k}`, v]),
      ...(node === undefined ? [] : [['node', node] as [string, string]]),
    ];
    const listOf = async (node: string | undefined) =>
      objects(await transport.json('GET', '/v1/sandboxes', undefined, { query: queryFor(node) }), 'sandboxes').map(
        parseSandboxInfo,
      );
    try {
      try {
        return await listOf(options.node);
      } catch (e) {
        // Behind a fleet's proxy: every node it names, in turn (a node that is down throws).
        if (options.node !== undefined || !listsPerNode(e)) throw e;
        const fleet = (await transport.json('GET', '/v1/fleet')) as JsonObject;
        const listed = fleet['nodes'];
        const nodes = Array.isArray(listed) ? listed.filter((n): n is string => typeof n === 'string') : [];
        const all: SandboxInfo[] = [];
        for (const n of nodes) all.push(...(await listOf(n)));
        return all;
      }
    } finally {
      transport.close();
    }
  }

  get id(): string {
    return this.info.id;
  }

  /** E2B's name for `id`. */
  get sandboxId(): string {
    return this.info.id;
  }

  get name(): string | null {
    return this.info.name;
  }

  /** The sandbox as the supervisor sees it now (state, timers, running commands). */
  async getInfo(): Promise<SandboxInfo> {
    this.info = parseSandboxInfo(await this.transport.json('GET', this.path()));
    return this.info;
  }

  /**
   * The sandbox's resource use now: CPU seconds, memory, processes, workspace disk, OOM kills
   * (read from its cgroup when asked).
   */
  async metrics(): Promise<SandboxMetrics> {
    return parseSandboxMetrics(await this.transport.json('GET', this.path('/metrics')));
  }

  async isRunning(): Promise<boolean> {
    try {
      return (await this.getInfo()).state === 'running';
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  /**
   * Resets the idle timer and allows `seconds` of idleness from now on (within the profile's
   * maximum); `lifetime` moves the hard end too.
   */
  async setTimeout(seconds: number, options: { lifetime?: number } = {}): Promise<SandboxInfo> {
    const body: JsonObject = { keep_alive_s: seconds };
    if (options.lifetime !== undefined) body['lifetime_s'] = options.lifetime;
    this.info = parseSandboxInfo(await this.transport.json('POST', this.path('/keepalive'), body));
    return this.info;
  }

  /**
   * A URL that reaches `port` inside the sandbox through the supervisor (HTTP and WebSocket),
   * with no header needed: its path carries a token bound to this tenant, sandbox and port,
   * valid until the sandbox ends. It is the SDK's base URL plus that path (for a Unix-socket
   * connection a unix:// URL, which only clients that speak Unix sockets can open). A profile
   * with ports turned off answers ForbiddenError naming the setting.
   */
  async portUrl(port: number): Promise<string> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new InvalidRequestError(`portUrl: port must be a whole number from 1 to 65535, got ${port}`);
    }
    const answer = await this.transport.json('POST', this.path(`/ports/${port}/link`));
    const path = str(answer, 'path');
    if (!path.startsWith('/')) {
      throw new InternalError(`POST ${this.path(`/ports/${port}/link`)}: the answer has no link path: ${JSON.stringify(answer)}`);
    }
    return `${this.transport.baseUrl}${path}`;
  }

  /** Destroys the sandbox and everything in it. False when it was already gone. */
  async kill(): Promise<boolean> {
    try {
      await this.transport.json('DELETE', this.path());
      return true;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    } finally {
      this.transport.close();
    }
  }

  /**
   * Runs `code` in a stateful context (the sandbox's default one for the language unless
   * `context` is given): variables, imports and files persist between calls.
   *
   * An exception in the code does not reject: it is `execution.error` (and onError). A run that
   * hits `timeout` rejects with TimeoutError carrying the partial `execution`; a review denial
   * rejects with DeniedByReview. Callbacks get output chunks, results (figures included) and the
   * error as they happen.
   */
  runCode(code: string, options: RunCodeOptions = {}): Promise<Execution> {
    return this.code.run(code, options);
  }

  createCodeContext(options: CreateContextOptions = {}): Promise<Context> {
    return this.code.createContext(options);
  }

  listCodeContexts(): Promise<Context[]> {
    return this.code.listContexts();
  }

  /** A fresh interpreter under the same context id: its variables and imports are gone. */
  restartCodeContext(context: ContextRef): Promise<Context> {
    return this.code.restartContext(context);
  }

  removeCodeContext(context: ContextRef): Promise<void> {
    return this.code.removeContext(context);
  }

  /**
   * The run of `context` that was in flight when the supervisor died, finished under the next
   * one that adopted the sandbox (`run`: its id, or "last"). Waits for its end; rejects with
   * NotFoundError when no such run was taken over. `execution.restart` says what the sandbox's
   * agent held (`held_bytes`) and dropped (`dropped_bytes`) while no supervisor was there.
   */
  recoveredRun(context: ContextRef, run = 'last', options: RunCodeOptions = {}): Promise<Execution> {
    return this.code.recoveredRun(context, run, options);
  }

  // ---- transfers (docs/transfer.md) ----

  /**
   * Fetches the archive at `source` (an https:// or http:// URL, or hostdir:NAME/path) and
   * unpacks it into the sandbox directory `path`, inside the sandbox; the format (tar, tar.gz,
   * tar.zst, zip, ...) is read from the bytes. `onProgress` gets a TransferProgress about four
   * times a second; throwing in it cancels the transfer. Resolves with the record; rejects with
   * TransferError (its `transfer` is the record) when the status is not "ok": refused by a rule
   * ("denied"), a bad archive or download ("error"), or cancelled.
   */
  transferIn(source: string, path: string, options: TransferOptions = {}): Promise<TransferRecord> {
    return this.transfers.start('in', source, path, options);
  }

  /**
   * Packs the sandbox directory `path` and sends it to `dest`: a URL (uploaded with PUT, e.g. a
   * presigned object-store URL; the format from the URL's path, else tar.gz) or
   * hostdir:NAME/file.tar.gz. Rejects as transferIn does.
   */
  transferOut(dest: string, path: string, options: TransferOptions = {}): Promise<TransferRecord> {
    return this.transfers.start('out', dest, path, options);
  }

  /** The sandbox's transfers, running ("running") and recently ended. */
  listTransfers(): Promise<TransferRecord[]> {
    return this.transfers.list();
  }

  /** Cancels a running transfer (what it unpacked is removed). False when it already ended or is unknown. */
  cancelTransfer(transferId: string): Promise<boolean> {
    return this.transfers.cancel(transferId);
  }

  /**
   * Unpacks an archive sent from this process (bytes, or a Readable / async iterable streamed
   * up) into the sandbox directory `path`: tar, tar.gz, tar.zst or zip. An entry that would
   * leave the directory refuses the whole archive (InvalidRequestError).
   */
  uploadArchive(path: string, data: ArchiveSource): Promise<TransferRecord> {
    return this.transfers.upload(path, data);
  }

  /**
   * The sandbox directory `path` packed as `format` (tar, tar.gz (default), tar.zst or zip): a
   * Buffer, or with `stream: true` a Readable of its bytes (destroying it stops the download).
   */
  downloadArchive(path: string, options?: DownloadArchiveOptions & { stream?: false }): Promise<Buffer>;
  downloadArchive(path: string, options: DownloadArchiveOptions & { stream: true }): Promise<Readable>;
  downloadArchive(path: string, options: DownloadArchiveOptions = {}): Promise<Buffer | Readable> {
    return this.transfers.download(path, options);
  }

  /** `await using sbx = await Sandbox.create()` kills the sandbox when the block ends. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.kill();
  }

  toString(): string {
    return `Sandbox(id=${this.id}, name=${this.name ?? ''}, profile=${this.info.profile})`;
  }

  private path(suffix = ''): string {
    return `/v1/sandboxes/${quote(this.info.id)}${suffix}`;
  }
}
