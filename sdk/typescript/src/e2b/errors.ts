// E2B's error names over airlock's errors, so `catch (e) { if (e instanceof CommandExitError) }`
// and friends work unchanged. Every one is an AirlockError too.

import { AirlockError, InvalidRequestError, type AirlockErrorDetails } from '../errors.js';

export {
  AirlockError as SandboxError,
  AuthenticationError,
  InvalidRequestError as InvalidArgumentError,
  NotFoundError,
  QuotaExceededError as RateLimitError,
  QuotaExceededError as NotEnoughSpaceError,
  TimeoutError,
} from '../errors.js';

/** What `commands.run` resolves with (E2B's shape). */
export interface CommandResult {
  /** The exit code; -1 when a signal ended the command (`error` says which). */
  exitCode: number;
  /** Why the command failed to end normally (a signal, a lost end), if it did. */
  error?: string;
  stdout: string;
  stderr: string;
}

/**
 * A command ended with a non-zero exit code (or a signal). Thrown by `commands.run` and
 * `CommandHandle.wait`, as E2B does; the result is on the error itself.
 */
export class CommandExitError extends AirlockError implements CommandResult {
  constructor(
    readonly result: CommandResult,
    details: AirlockErrorDetails = {},
  ) {
    super(result.error ?? `command exited with code ${result.exitCode}`, details);
  }

  get exitCode(): number {
    return this.result.exitCode;
  }

  get error(): string | undefined {
    return this.result.error;
  }

  get stdout(): string {
    return this.result.stdout;
  }

  get stderr(): string {
    return this.result.stderr;
  }
}

/** An option E2B's SDK has that airlock cannot honour; the message says why and what to do. */
export class UnsupportedOptionError extends InvalidRequestError {
  constructor(message: string) {
    super(message, { code: 'unsupported_option' });
  }
}
