// Processes in a sandbox: `sbx.commands`. Foreground runs stream their output as NDJSON events;
// background runs answer at once with a CommandHandle that attaches to the command's events
// (the buffered output first, then live) to wait for it.

import { InvalidRequestError, NotFoundError, TimeoutError, streamEndedEarly } from './errors.js';
import { eventBytes, objects, optNum, optStr, type JsonObject } from './json.js';
import { parseCommandInfo, parseExit, type CommandInfo, type CommandResult } from './models.js';
import { quote, type Transport } from './transport.js';

/** Called with each chunk of output as it arrives; a returned promise is awaited. */
export type CommandOutputHandler = (data: string) => unknown;

export interface CommandOptions {
  /** Environment variables added for this command. */
  envs?: Record<string, string>;
  /** Working directory inside the sandbox; default /home/user. */
  cwd?: string;
  /** Bytes for the command's stdin. A foreground command then sees end-of-file. */
  stdin?: string | Uint8Array;
  onStdout?: CommandOutputHandler;
  onStderr?: CommandOutputHandler;
  /** Seconds before the command is killed; default: the profile's limit. */
  timeout?: number;
}

export interface RunOptions extends CommandOptions {
  /** Return a CommandHandle at once instead of waiting for the exit. */
  background?: boolean;
}

/** One chunk of a command's output, as `for await (const chunk of handle)` yields it. */
export interface CommandOutput {
  stream: 'stdout' | 'stderr';
  data: string;
}

const STREAM_GRACE_S = 30;

/** Folds one command's events into a CommandResult, calling the output callbacks as they come. */
class Collector {
  private readonly stdout: Buffer[] = [];
  private readonly stderr: Buffer[] = [];
  private readonly errors: string[] = [];
  private exit: JsonObject | undefined;

  constructor(
    private commandId: string,
    private pid: number | null,
  ) {}

  /** The output chunk in `event`, if it carries one. */
  feed(event: JsonObject): CommandOutput | undefined {
    switch (event['type']) {
      case 'start':
        this.commandId = optStr(event, 'command_id') ?? this.commandId;
        this.pid = optNum(event, 'pid') ?? this.pid;
        return undefined;
      case 'stdout':
      case 'stderr': {
        const bytes = eventBytes(event);
        (event['type'] === 'stdout' ? this.stdout : this.stderr).push(bytes);
        return { stream: event['type'], data: bytes.toString('utf8') };
      }
      case 'error': {
        const message = optStr(event, 'message');
        if (message !== null) this.errors.push(message);
        return undefined;
      }
      case 'exit':
        this.exit = event;
        return undefined;
      default:
        return undefined; // an event type newer than this SDK
    }
  }

  result(what: string, timeout: number | undefined): CommandResult {
    if (this.exit === undefined) throw streamEndedEarly(what, 'exit');
    const result = parseExit(this.exit, {
      stdout: Buffer.concat(this.stdout).toString('utf8'),
      stderr: Buffer.concat(this.stderr).toString('utf8'),
      commandId: this.commandId,
      pid: this.pid,
      errors: this.errors,
    });
    if (result.timedOut) {
      const limit = timeout !== undefined ? `after ${timeout} s` : "(the profile's timeout)";
      throw new TimeoutError(`${what}: timed out ${limit} and was killed`, { result });
    }
    return result;
  }
}

async function collect(
  events: AsyncIterable<JsonObject>,
  collector: Collector,
  handlers: { onStdout?: CommandOutputHandler | undefined; onStderr?: CommandOutputHandler | undefined },
): Promise<void> {
  for await (const event of events) {
    const output = collector.feed(event);
    if (output !== undefined) await (output.stream === 'stdout' ? handlers.onStdout : handlers.onStderr)?.(output.data);
  }
}

/**
 * A command running in the background. `wait()` resolves with its CommandResult; `kill()`,
 * `sendStdin()` and `signal()` act on it meanwhile. Given output callbacks, it attaches at once
 * so they are called live. Iterating it (`for await`) yields the output chunks.
 */
export class CommandHandle implements AsyncIterable<CommandOutput> {
  private outcome: Promise<CommandResult> | undefined;

  constructor(
    private readonly commands: Commands,
    /** The command's id in the sandbox. */
    readonly id: string,
    /** Its process id inside the sandbox. */
    readonly pid: number | null,
    private readonly options: Pick<CommandOptions, 'onStdout' | 'onStderr' | 'timeout'> = {},
  ) {
    if (options.onStdout !== undefined || options.onStderr !== undefined) this.startAttach(options);
  }

  /** Waits for the exit. A non-zero exit resolves; a timeout kill rejects with TimeoutError. */
  wait(handlers: Pick<CommandOptions, 'onStdout' | 'onStderr'> = {}): Promise<CommandResult> {
    return this.outcome ?? this.startAttach({
      onStdout: handlers.onStdout ?? this.options.onStdout,
      onStderr: handlers.onStderr ?? this.options.onStderr,
    });
  }

  /** SIGKILL to all its processes. False when the command was already gone. */
  kill(): Promise<boolean> {
    return this.commands.kill(this.id);
  }

  sendStdin(data: string | Uint8Array, options: { eof?: boolean } = {}): Promise<void> {
    return this.commands.sendStdin(this.id, data, options);
  }

  closeStdin(): Promise<void> {
    return this.commands.sendStdin(this.id, '', { eof: true });
  }

  /** Sends a signal by name ("SIGTERM") or number. */
  signal(signal: string | number): Promise<void> {
    return this.commands.signal(this.id, signal);
  }

  async *[Symbol.asyncIterator](): AsyncIterator<CommandOutput> {
    const collector = new Collector(this.id, this.pid);
    for await (const event of this.commands.events(this.id)) {
      const output = collector.feed(event);
      if (output !== undefined) yield output;
    }
    if (this.outcome === undefined) {
      // The exit was seen here: wait() answers from it without attaching again.
      this.outcome = Promise.resolve().then(() => collector.result(this.what, this.options.timeout));
      this.outcome.catch(() => {});
    }
  }

  private get what(): string {
    return `command ${this.id}`;
  }

  private startAttach(handlers: Pick<CommandOptions, 'onStdout' | 'onStderr'>): Promise<CommandResult> {
    const collector = new Collector(this.id, this.pid);
    this.outcome = collect(this.commands.events(this.id), collector, handlers).then(() =>
      collector.result(this.what, this.options.timeout),
    );
    // Reported by wait(); a handle nobody waits for must not crash the process.
    this.outcome.catch(() => {});
    return this.outcome;
  }
}

/** `sbx.commands`: run processes, list them, attach to them. */
export class Commands {
  private readonly base: string;

  constructor(
    private readonly transport: Transport,
    sandboxId: string,
  ) {
    this.base = `/v1/sandboxes/${quote(sandboxId)}/commands`;
  }

  /**
   * Runs `cmd` (a string for `/bin/sh -c`, or an argv array whose first element is looked up on
   * PATH). Foreground: resolves with the CommandResult once it exits, calling onStdout/onStderr
   * with each chunk as it arrives; a non-zero exit resolves, a timeout rejects with TimeoutError.
   * `background: true` resolves at once with a CommandHandle; its stdin stays open for sendStdin.
   */
  run(cmd: string | string[], options: RunOptions & { background: true }): Promise<CommandHandle>;
  run(cmd: string | string[], options?: RunOptions & { background?: false }): Promise<CommandResult>;
  run(cmd: string | string[], options?: RunOptions): Promise<CommandResult | CommandHandle>;
  async run(cmd: string | string[], options: RunOptions = {}): Promise<CommandResult | CommandHandle> {
    const body = requestBody(cmd, options);
    if (options.background) {
      body['background'] = true;
      // A command held for review has no answer until an operator decides.
      const answer = await this.transport.json('POST', this.base, body, { answerTimeout: null });
      return new CommandHandle(this, optStr(answer, 'command_id') ?? '', optNum(answer, 'pid'), options);
    }
    const collector = new Collector('', null);
    const events = this.transport.events('POST', this.base, body, {
      timeout: options.timeout === undefined ? null : options.timeout + STREAM_GRACE_S,
      answerTimeout: null,
    });
    await collect(events, collector, options);
    return collector.result(`command ${describe(cmd)}`, options.timeout);
  }

  async list(): Promise<CommandInfo[]> {
    return objects(await this.transport.json('GET', this.base), 'commands').map(parseCommandInfo);
  }

  /**
   * A handle on a command started earlier (by any client of this tenant): `wait()` replays its
   * buffered output, then follows it live. Rejects with NotFoundError for an unknown id.
   */
  async connect(commandId: string, handlers: Pick<CommandOptions, 'onStdout' | 'onStderr'> = {}): Promise<CommandHandle> {
    const info = (await this.list()).find((c) => c.id === commandId);
    if (info === undefined) {
      throw new NotFoundError(`command '${commandId}' not found in this sandbox`, { status: 404, code: 'not_found' });
    }
    return new CommandHandle(this, commandId, info.pid, handlers);
  }

  /** SIGKILL to all the command's processes. False when it was already gone. */
  async kill(commandId: string): Promise<boolean> {
    try {
      await this.transport.json('DELETE', this.path(commandId));
      return true;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  async sendStdin(commandId: string, data: string | Uint8Array, options: { eof?: boolean } = {}): Promise<void> {
    const body: JsonObject = { eof: options.eof ?? false };
    if (typeof data === 'string') body['data'] = data;
    else body['data_base64'] = Buffer.from(data).toString('base64');
    await this.transport.json('POST', this.path(commandId, '/stdin'), body);
  }

  /** Sends a signal by name ("SIGTERM") or number. */
  async signal(commandId: string, signal: string | number): Promise<void> {
    await this.transport.json('POST', this.path(commandId, '/signal'), { signal });
  }

  /** The command's events: its buffered output, then live ones until `exit`. */
  events(commandId: string): AsyncGenerator<JsonObject> {
    return this.transport.events('GET', this.path(commandId, '/events'), undefined, { timeout: null });
  }

  private path(commandId: string, suffix = ''): string {
    return `${this.base}/${quote(commandId)}${suffix}`;
  }
}

function requestBody(cmd: string | string[], options: CommandOptions): JsonObject {
  const body: JsonObject = {};
  if (typeof cmd === 'string') {
    body['cmd'] = cmd;
  } else if (Array.isArray(cmd) && cmd.length > 0 && cmd.every((a) => typeof a === 'string')) {
    body['argv'] = [...cmd];
  } else {
    throw new InvalidRequestError(
      `commands.run: cmd must be a shell string or a non-empty array of strings, got ${JSON.stringify(cmd)}`,
    );
  }
  if (options.envs !== undefined && Object.keys(options.envs).length > 0) body['env'] = { ...options.envs };
  if (options.cwd !== undefined) body['cwd'] = options.cwd;
  if (typeof options.stdin === 'string') body['stdin'] = options.stdin;
  else if (options.stdin !== undefined) body['stdin_base64'] = Buffer.from(options.stdin).toString('base64');
  if (options.timeout !== undefined) body['timeout_s'] = options.timeout;
  return body;
}

function describe(cmd: string | string[]): string {
  const text = typeof cmd === 'string' ? cmd : cmd.join(' ');
  return `'${text.length <= 60 ? text : `${text.slice(0, 57)}...`}'`;
}
