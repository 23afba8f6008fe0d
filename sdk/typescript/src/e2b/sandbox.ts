// E2B's `Sandbox` (code-interpreter JS SDK) over airlock's native one: the same constructors,
// methods, option names and units (milliseconds), so E2B code runs with only its import changed.
// What differs is listed in docs/e2b.md (its TypeScript section); options airlock cannot honour are refused
// with a message saying why (options.ts).

import { InvalidRequestError, NotFoundError, TimeoutError } from '../errors.js';
import { Sandbox as NativeSandbox } from '../sandbox.js';
import type {
  Context as NativeContext,
  Execution,
  ExecutionError,
  Result,
  SandboxInfo as NativeInfo,
} from '../models.js';
import { Commands } from './commands.js';
import { InvalidArgumentError } from './errors.js';
import { Filesystem } from './filesystem.js';
import {
  checkSandboxOpts,
  connectionOf,
  languageOf,
  msToSeconds,
  profileOf,
  type SandboxOpts,
} from './options.js';

/** One chunk of a code run's stdout or stderr, as E2B's callbacks receive it. */
export class OutputMessage {
  constructor(
    /** The text as the interpreter flushed it (not always one whole line). */
    readonly line: string,
    /** When it arrived, Unix epoch in nanoseconds (E2B's unit). */
    readonly timestamp: number,
    /** True for stderr. */
    readonly error: boolean,
  ) {}

  toString(): string {
    return this.line;
  }
}

/** A code context (E2B's Context). */
export interface Context {
  id: string;
  language: string;
  cwd: string;
}

export interface CreateCodeContextOpts {
  /** Working directory, absolute; default /home/user. */
  cwd?: string;
  /** Default "python"; "js" is node, "bash" a persistent shell. */
  language?: string;
  requestTimeoutMs?: number;
}

export interface RunCodeOpts {
  /** "python" (default), "js"/"javascript" (node), "bash"; not together with `context`. */
  language?: string;
  /** A context from createCodeContext; not together with `language`. */
  context?: Context;
  onStdout?: (output: OutputMessage) => unknown;
  onStderr?: (output: OutputMessage) => unknown;
  onResult?: (result: Result) => unknown;
  onError?: (error: ExecutionError) => unknown;
  /** Environment variables for this run only. */
  envs?: Record<string, string>;
  /**
   * Milliseconds before the run is interrupted (TimeoutError); 0 or absent: the airlock
   * profile's limit (E2B's default is 60 s, the default profile's 30 s).
   */
  timeoutMs?: number;
  /** Accepted for E2B code; the sandbox's requestTimeoutMs applies. */
  requestTimeoutMs?: number;
}

/** A sandbox as `getInfo()` answers it (E2B's SandboxInfo). */
export interface SandboxInfo {
  sandboxId: string;
  /** The airlock profile it runs under (E2B's template). */
  templateId: string;
  name?: string;
  metadata: Record<string, string>;
  startedAt: Date;
  /** When it ends: its hard end, or sooner if it stays idle until its idle timer runs out. */
  endAt: Date;
  state: 'running' | 'paused';
}

/**
 * E2B's SandboxMetrics, from one sample of airlock's `metrics()`: airlock keeps no history, so
 * `getMetrics()` answers the one sample read now. `cpuUsedPct` is the average since the sandbox
 * started, in percent of one CPU; `cpuCount` is not known to the API and is 0. A total airlock
 * cannot give (no limit, or the disk of a gVisor or microVM sandbox) is 0.
 */
export interface SandboxMetrics {
  cpuCount: number;
  cpuUsedPct: number;
  memUsed: number;
  memTotal: number;
  diskUsed: number;
  diskTotal: number;
  timestamp: Date;
}

/**
 * The promise of `getHost(port)`. airlock asks the supervisor for the port's link, so getHost
 * is asynchronous where E2B's is not; using the promise as a string (`https://${host}` without
 * `await`) throws instead of producing a wrong URL.
 */
export class HostPromise extends Promise<string> {
  static override get [Symbol.species](): PromiseConstructor {
    return Promise;
  }

  [Symbol.toPrimitive](): never {
    throw new TypeError(
      'getHost(port) is asynchronous with airlock (the link is made by the supervisor): use `await sandbox.getHost(port)`',
    );
  }
}

// E2B's default sandbox timeout: five minutes.
const DEFAULT_SANDBOX_TIMEOUT_MS = 300_000;

/** An airlock sandbox with E2B's interface. */
export class Sandbox {
  readonly commands: Commands;
  readonly files: Filesystem;

  private constructor(
    /** The native airlock sandbox, for what E2B has no name for (transfers, audit, review). */
    readonly airlock: NativeSandbox,
  ) {
    this.commands = new Commands(airlock.commands);
    this.files = new Filesystem(airlock.files);
  }

  static create(opts?: SandboxOpts): Promise<Sandbox>;
  static create(template: string, opts?: SandboxOpts): Promise<Sandbox>;
  /**
   * Creates a sandbox. `template` is the airlock profile (E2B's "base" and
   * "code-interpreter-v1" are the default profile); `timeoutMs` its time to live.
   */
  static async create(templateOrOpts?: string | SandboxOpts, maybeOpts: SandboxOpts = {}): Promise<Sandbox> {
    const template = typeof templateOrOpts === 'string' ? templateOrOpts : undefined;
    const opts = (typeof templateOrOpts === 'object' && templateOrOpts !== null ? templateOrOpts : maybeOpts) ?? {};
    checkSandboxOpts(opts, 'Sandbox.create');
    const seconds = msToSeconds(opts.timeoutMs ?? DEFAULT_SANDBOX_TIMEOUT_MS, 'Sandbox.create timeoutMs');
    const profile = profileOf(template);
    const native = await NativeSandbox.create({
      ...connectionOf(opts),
      ...(profile !== undefined && { profile }),
      ...(opts.metadata !== undefined && { metadata: opts.metadata }),
      ...(opts.envs !== undefined && { envs: opts.envs }),
      ...(seconds !== undefined && { keepAlive: seconds, lifetime: seconds }),
    }).catch((err: unknown) => {
      throw timeoutRefused(err, opts.timeoutMs ?? DEFAULT_SANDBOX_TIMEOUT_MS, 'Sandbox.create');
    });
    return new Sandbox(native);
  }

  /** Attaches to a running sandbox by id; `timeoutMs` given resets its time to live. */
  static async connect(sandboxId: string, opts: SandboxOpts = {}): Promise<Sandbox> {
    checkSandboxOpts(opts, 'Sandbox.connect');
    const sandbox = new Sandbox(await NativeSandbox.connect(sandboxId, connectionOf(opts)));
    if (opts.timeoutMs !== undefined) await sandbox.setTimeout(opts.timeoutMs);
    return sandbox;
  }

  /**
   * The tenant's sandboxes as E2B's paginator: `await paginator.nextItems()` answers them all
   * (airlock lists in one page), after which `hasNext` is false. `query.metadata` keeps those
   * whose metadata has every given key and value; `query.state` other than running finds none
   * (airlock does not pause sandboxes).
   */
  static list(opts: SandboxOpts & { query?: { metadata?: Record<string, string>; state?: string[] }; limit?: number } = {}): SandboxPaginator {
    const { query, limit, ...rest } = opts;
    checkSandboxOpts(rest, 'Sandbox.list');
    return new SandboxPaginator(async () => {
      if (query?.state !== undefined && !query.state.includes('running')) return [];
      const infos = await NativeSandbox.list({ ...connectionOf(rest), ...(query?.metadata !== undefined && { metadata: query.metadata }) });
      const out = infos.map(toInfo);
      return limit === undefined ? out : out.slice(0, limit);
    });
  }

  /** Kills the sandbox with this id; false when there was none. */
  static async kill(sandboxId: string, opts: SandboxOpts = {}): Promise<boolean> {
    checkSandboxOpts(opts, 'Sandbox.kill');
    let sandbox: NativeSandbox;
    try {
      sandbox = await NativeSandbox.connect(sandboxId, connectionOf(opts));
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
    return sandbox.kill();
  }

  get sandboxId(): string {
    return this.airlock.id;
  }

  /**
   * Runs `code` in a stateful context. An exception in the code is `execution.error` (and
   * onError), not a throw; a run past its timeout throws TimeoutError.
   */
  async runCode(code: string, opts: RunCodeOpts = {}): Promise<Execution> {
    if (opts.language !== undefined && opts.context !== undefined) {
      throw new InvalidArgumentError('runCode: give either `language` or `context`, not both (the context has its language)');
    }
    const timeout = msToSeconds(opts.timeoutMs, 'runCode timeoutMs');
    const language = languageOf(opts.language);
    // E2B hands out output line by line (Jupyter's stream messages); airlock's interpreters send
    // each write as it is flushed ("hello", then "\n"). Whole lines are passed on as they
    // complete; a last line without its newline at the end of the run.
    const stdout = new LineBuffer(opts.onStdout, false);
    const stderr = new LineBuffer(opts.onStderr, true);
    let execution: Execution;
    try {
      execution = await this.airlock.runCode(code, {
        ...(language !== undefined && { language }),
        ...(opts.context !== undefined && { context: opts.context.id }),
        ...(opts.onStdout !== undefined && { onStdout: (m) => stdout.push(m.line, m.timestamp) }),
        ...(opts.onStderr !== undefined && { onStderr: (m) => stderr.push(m.line, m.timestamp) }),
        ...(opts.onResult !== undefined && { onResult: opts.onResult }),
        ...(opts.onError !== undefined && { onError: opts.onError }),
        ...(opts.envs !== undefined && { envs: opts.envs }),
        ...(timeout !== undefined && { timeout }),
      });
    } catch (err) {
      if (err instanceof TimeoutError && err.execution !== undefined) asLines(err.execution);
      throw err;
    } finally {
      await stdout.end();
      await stderr.end();
    }
    return asLines(execution);
  }

  async createCodeContext(opts: CreateCodeContextOpts = {}): Promise<Context> {
    const language = languageOf(opts.language);
    return toContext(
      await this.airlock.createCodeContext({
        ...(language !== undefined && { language }),
        ...(opts.cwd !== undefined && { cwd: opts.cwd }),
      }),
    );
  }

  async listCodeContexts(): Promise<Context[]> {
    return (await this.airlock.listCodeContexts()).map(toContext);
  }

  /** A fresh interpreter under the same id: variables and imports are gone. */
  async restartCodeContext(context: Context | string): Promise<void> {
    await this.airlock.restartCodeContext(typeof context === 'string' ? context : context.id);
  }

  async removeCodeContext(context: Context | string): Promise<void> {
    await this.airlock.removeCodeContext(typeof context === 'string' ? context : context.id);
  }

  async getInfo(): Promise<SandboxInfo> {
    return toInfo(await this.airlock.getInfo());
  }

  /** The sandbox's resource use: one sample read now (see SandboxMetrics). */
  async getMetrics(): Promise<SandboxMetrics[]> {
    const m = await this.airlock.metrics();
    return [
      {
        cpuCount: 0,
        cpuUsedPct: m.uptimeS > 0 ? (100 * m.cpuSeconds) / m.uptimeS : 0,
        memUsed: m.memoryBytes,
        memTotal: m.memoryLimitBytes ?? 0,
        diskUsed: m.diskBytes,
        diskTotal: m.diskLimitBytes ?? 0,
        timestamp: m.sampledAt ?? new Date(),
      },
    ];
  }

  /**
   * The sandbox now ends `timeoutMs` from now (sooner or later than before), as E2B's: its
   * lifetime becomes its age plus that, and its idle time that. The profile's maxima bound both.
   */
  async setTimeout(timeoutMs: number): Promise<void> {
    const seconds = msToSeconds(timeoutMs, 'setTimeout timeoutMs');
    if (seconds === undefined) throw new InvalidArgumentError('setTimeout: timeoutMs must be > 0');
    const created = (await this.airlock.getInfo()).createdAt;
    const age = created === null ? 0 : Math.max(0, Math.ceil((Date.now() - created.getTime()) / 1000));
    await this.airlock.setTimeout(seconds, { lifetime: age + seconds }).catch((err: unknown) => {
      throw timeoutRefused(err, timeoutMs, 'setTimeout');
    });
  }

  /** Kills the sandbox and everything in it. */
  async kill(): Promise<void> {
    await this.airlock.kill();
  }

  async isRunning(): Promise<boolean> {
    return this.airlock.isRunning();
  }

  /**
   * "host:port/v1/ports/<token>/": the supervisor's address and the port's link, without a
   * scheme, so `https://${await sandbox.getHost(3000)}` reaches port 3000 in the sandbox (use
   * http:// when the supervisor serves plain HTTP). The token in the path is the authorization.
   * Asynchronous, unlike E2B's: forget the `await` and using it as a string throws.
   */
  getHost(port: number): HostPromise {
    return new HostPromise((resolve, reject) => {
      this.airlock.portUrl(port).then((url) => resolve(url.replace(/^[a-z]+:\/\//, '')), reject);
    });
  }

  toString(): string {
    return `Sandbox(sandboxId=${this.sandboxId})`;
  }
}

/** Passes whole lines of one stream to an E2B callback as their last chunk arrives. */
class LineBuffer {
  private pending = '';
  private last = new Date();

  constructor(
    private readonly handler: ((m: OutputMessage) => unknown) | undefined,
    private readonly isStderr: boolean,
  ) {}

  async push(chunk: string, at: Date): Promise<void> {
    this.pending += chunk;
    this.last = at;
    let eol: number;
    while ((eol = this.pending.indexOf('\n')) >= 0) {
      const line = this.pending.slice(0, eol + 1);
      this.pending = this.pending.slice(eol + 1);
      await this.emit(line);
    }
  }

  async end(): Promise<void> {
    if (this.pending) await this.emit(this.pending);
    this.pending = '';
  }

  private emit(line: string): unknown {
    return this.handler?.(new OutputMessage(line, this.last.getTime() * 1_000_000, this.isStderr));
  }
}

/** The execution with its logs as whole lines, as E2B's are. */
function asLines(execution: Execution): Execution {
  for (const stream of [execution.logs.stdout, execution.logs.stderr]) {
    const lines = stream.join('').match(/[^\n]*\n|[^\n]+$/g) ?? [];
    stream.splice(0, stream.length, ...lines);
  }
  return execution;
}

/**
 * A refusal of keep_alive_s or lifetime_s (past the profile's maximum) said in terms of the
 * `timeoutMs` the caller gave; other errors pass as they are.
 */
function timeoutRefused(err: unknown, timeoutMs: number, what: string): unknown {
  if (!(err instanceof InvalidRequestError) || !/keep_alive_s|lifetime_s/.test(err.message)) return err;
  return new InvalidArgumentError(
    `${what}: timeoutMs ${timeoutMs} is more than the airlock profile allows (it sets the sandbox's ` +
      `keep_alive_s and lifetime_s): ${err.message}`,
    { ...(err.status !== undefined && { status: err.status }), ...(err.code !== undefined && { code: err.code }), body: err.body, cause: err },
  );
}

/** E2B's SandboxInfo of a native one. */
function toInfo(info: NativeInfo): SandboxInfo {
  const ends = [info.endsAt, info.idleExpiresAt].filter((d): d is Date => d !== null);
  const out: SandboxInfo = {
    sandboxId: info.id,
    templateId: info.profile,
    metadata: info.metadata,
    startedAt: info.createdAt ?? new Date(0),
    endAt: ends.length ? new Date(Math.min(...ends.map((d) => d.getTime()))) : new Date(0),
    state: 'running',
  };
  if (info.name !== null) out.name = info.name;
  return out;
}

/** E2B's paginator over Sandbox.list: one page, since airlock lists every sandbox at once. */
export class SandboxPaginator {
  private done = false;

  constructor(private readonly fetchAll: () => Promise<SandboxInfo[]>) {}

  get hasNext(): boolean {
    return !this.done;
  }

  /** undefined: airlock has a single page. */
  get nextToken(): string | undefined {
    return undefined;
  }

  async nextItems(): Promise<SandboxInfo[]> {
    if (this.done) throw new InvalidArgumentError('Sandbox.list: no more items to fetch');
    const items = await this.fetchAll();
    this.done = true;
    return items;
  }
}

function toContext(context: NativeContext): Context {
  return { id: context.id, language: context.language, cwd: context.cwd ?? '/home/user' };
}
