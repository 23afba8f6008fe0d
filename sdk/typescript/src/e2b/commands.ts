// `sandbox.commands` as E2B's SDK has it: processes named by pid, a non-zero exit thrown as
// CommandExitError, timeouts in milliseconds, and background commands as handles whose output
// callbacks fire live. It drives the native Commands; airlock names commands by id, so the pid
// is looked up in the command list where E2B's calls take one.

import {
  CommandHandle as NativeHandle,
  type Commands as NativeCommands,
  type CommandOutputHandler,
} from '../commands.js';
import type { CommandResult as NativeResult } from '../models.js';
import { CommandExitError, InvalidArgumentError, UnsupportedOptionError, type CommandResult } from './errors.js';
import { checkUser, msToSeconds } from './options.js';

export interface CommandStartOpts {
  /** Return a CommandHandle at once instead of waiting for the exit. */
  background?: boolean;
  /** Working directory; default /home/user. */
  cwd?: string;
  /** "user" (the default); "root" is refused: a sandbox has no root. */
  user?: string;
  /** Environment variables added for this command. */
  envs?: Record<string, string>;
  /** Each chunk of stdout as it arrives. */
  onStdout?: CommandOutputHandler;
  onStderr?: CommandOutputHandler;
  /**
   * Milliseconds before the command is killed; 0 or absent: the airlock profile's limit
   * (E2B's default is 60 s, the default profile's 30 s).
   */
  timeoutMs?: number;
  /** Accepted for E2B code; the sandbox's requestTimeoutMs applies. */
  requestTimeoutMs?: number;
  /** E2B keeps stdin open with `stdin: true`; airlock's background commands always do. */
  stdin?: boolean;
}

export type CommandConnectOpts = Pick<CommandStartOpts, 'onStdout' | 'onStderr' | 'timeoutMs' | 'requestTimeoutMs'>;

/** A process as `commands.list()` reports it (E2B's ProcessInfo). */
export interface ProcessInfo {
  pid: number;
  /** airlock's command id. */
  tag: string;
  cmd: string;
  args: string[];
  /** airlock does not report a running command's environment: always {}. */
  envs: Record<string, string>;
  /** airlock does not report a running command's directory: always "". */
  cwd: string;
}

/** The E2B result of a native one; a non-zero exit (or a signal) becomes CommandExitError. */
export function toResult(native: NativeResult): CommandResult {
  const result: CommandResult = { exitCode: native.exitCode ?? -1, stdout: native.stdout, stderr: native.stderr };
  const error = native.error ?? (native.signal !== null ? `killed by signal ${native.signal}` : undefined);
  if (error !== undefined) result.error = error;
  if (result.exitCode !== 0) throw new CommandExitError(result);
  return result;
}

/**
 * A command running in the background (E2B's CommandHandle). `stdout` and `stderr` grow as
 * output arrives; `wait()` resolves with the result or throws CommandExitError.
 */
export class CommandHandle {
  private out = '';
  private err = '';
  private ended: CommandResult | undefined;
  private failure: string | undefined;
  private detached = false;
  private readonly outcome: Promise<CommandResult>;

  constructor(
    private readonly native: NativeHandle,
    handlers: Pick<CommandStartOpts, 'onStdout' | 'onStderr'> = {},
  ) {
    // Attach at once, as E2B streams a background command's output from its start.
    this.outcome = native
      .wait({
        onStdout: (data) => {
          this.out += data;
          return this.detached ? undefined : handlers.onStdout?.(data);
        },
        onStderr: (data) => {
          this.err += data;
          return this.detached ? undefined : handlers.onStderr?.(data);
        },
      })
      .then((result) => {
        try {
          this.ended = toResult(result);
        } catch (e) {
          if (e instanceof CommandExitError) {
            this.ended = e.result;
            this.failure = e.result.error;
          }
          throw e;
        }
        return this.ended;
      });
    this.outcome.catch(() => {}); // reported by wait(); an unwaited handle must not crash the process
  }

  get pid(): number {
    return this.native.pid ?? -1;
  }

  /** airlock's id of the command. */
  get commandId(): string {
    return this.native.id;
  }

  get stdout(): string {
    return this.out;
  }

  get stderr(): string {
    return this.err;
  }

  /** undefined while it runs. */
  get exitCode(): number | undefined {
    return this.ended?.exitCode;
  }

  get error(): string | undefined {
    return this.failure;
  }

  /** The result once it exits; CommandExitError for a non-zero exit, TimeoutError for a timeout kill. */
  wait(): Promise<CommandResult> {
    return this.outcome;
  }

  /** SIGKILL to the command. False when it had already ended. */
  kill(): Promise<boolean> {
    return this.native.kill();
  }

  /** Stops calling the output callbacks; the command keeps running (kill() ends it). */
  async disconnect(): Promise<void> {
    this.detached = true;
  }
}

/** `sandbox.commands`, E2B's way. */
export class Commands {
  constructor(private readonly native: NativeCommands) {}

  run(cmd: string, opts: CommandStartOpts & { background: true }): Promise<CommandHandle>;
  run(cmd: string, opts?: CommandStartOpts & { background?: false }): Promise<CommandResult>;
  run(cmd: string, opts?: CommandStartOpts): Promise<CommandResult | CommandHandle>;
  /**
   * Runs `cmd` with /bin/sh -c. Resolves with {exitCode, stdout, stderr}; a non-zero exit
   * throws CommandExitError (the result on it), a timeout TimeoutError. With `background: true`
   * resolves at once with a CommandHandle.
   */
  async run(cmd: string, opts: CommandStartOpts = {}): Promise<CommandResult | CommandHandle> {
    if (typeof cmd !== 'string') {
      throw new InvalidArgumentError(`commands.run: cmd must be a shell string, got ${JSON.stringify(cmd)}`);
    }
    checkUser(opts.user, 'commands.run');
    if (opts.stdin === false && opts.background) {
      throw new UnsupportedOptionError(
        'commands.run: stdin: false is not supported for a background command: airlock keeps its stdin open (sendStdin); leave the option out',
      );
    }
    const timeout = msToSeconds(opts.timeoutMs, 'commands.run timeoutMs');
    const native = {
      ...(opts.envs !== undefined && { envs: opts.envs }),
      ...(opts.cwd !== undefined && { cwd: opts.cwd }),
      ...(timeout !== undefined && { timeout }),
    };
    if (opts.background) {
      const handle = await this.native.run(cmd, { ...native, background: true });
      return new CommandHandle(handle, opts);
    }
    const result = await this.native.run(cmd, {
      ...native,
      ...(opts.onStdout !== undefined && { onStdout: opts.onStdout }),
      ...(opts.onStderr !== undefined && { onStderr: opts.onStderr }),
    });
    return toResult(result);
  }

  /** The sandbox's running commands. */
  async list(): Promise<ProcessInfo[]> {
    return (await this.native.list())
      .filter((c) => c.state === 'running')
      .map((c) => ({
        pid: c.pid ?? -1,
        tag: c.id,
        cmd: c.argv[0] ?? '',
        args: c.argv.slice(1),
        envs: {},
        cwd: '',
      }));
  }

  /** A handle on a running command, by pid: its buffered output first, then live. */
  async connect(pid: number, opts: CommandConnectOpts = {}): Promise<CommandHandle> {
    const id = await this.idOf(pid);
    if (id === undefined) throw new InvalidArgumentError(`commands.connect: no running command has pid ${pid}`);
    return new CommandHandle(await this.native.connect(id), opts);
  }

  /** SIGKILL to the command with this pid. False when no running command has it. */
  async kill(pid: number): Promise<boolean> {
    const id = await this.idOf(pid);
    return id === undefined ? false : this.native.kill(id);
  }

  /** Writes to the stdin of the (background) command with this pid. */
  async sendStdin(pid: number, data: string): Promise<void> {
    const id = await this.idOf(pid);
    if (id === undefined) throw new InvalidArgumentError(`commands.sendStdin: no running command has pid ${pid}`);
    await this.native.sendStdin(id, data);
  }

  private async idOf(pid: number): Promise<string | undefined> {
    if (!Number.isInteger(pid)) throw new InvalidArgumentError(`pid must be a whole number, got ${JSON.stringify(pid)}`);
    return (await this.native.list()).find((c) => c.pid === pid && c.state === 'running')?.id;
  }
}
