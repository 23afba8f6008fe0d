// Code runs in stateful contexts: `POST /v1/sandboxes/{sb}/code` read as NDJSON events, and the
// context routes. Sandbox.runCode and the *CodeContext methods call in here.

import { InvalidRequestError, TimeoutError, streamEndedEarly } from './errors.js';
import { eventBytes, isObject, objects, optNum, optStr, str, type JsonObject } from './json.js';
import { Execution, ExecutionError, OutputMessage, Result, parseContext, type Context } from './models.js';
import { optAudit } from './audit.js';
import { optReview } from './review.js';
import { quote, type Transport } from './transport.js';

/** A callback may return a promise; the run waits for it before handling the next event. */
export type OutputHandler = (output: OutputMessage) => unknown;
export type ResultHandler = (result: Result) => unknown;
export type ErrorHandler = (error: ExecutionError) => unknown;

/** A context, or its id: anything with an `id` will do. */
export type ContextRef = Context | { id: string } | string;

export interface RunCodeOptions {
  /** "python", "node", ...; default: the sandbox's language. */
  language?: string;
  /** A context from createCodeContext (or its id); default: the language's default context. */
  context?: ContextRef;
  onStdout?: OutputHandler;
  onStderr?: OutputHandler;
  /** Each result as it arrives: displays (figures) and the last expression's value. */
  onResult?: ResultHandler;
  onError?: ErrorHandler;
  /** Seconds before the run is interrupted; default: the profile's limit. */
  timeout?: number;
  /** Environment variables set for this run only (os.environ in Python, exported in bash). */
  envs?: Record<string, string>;
}

export interface CreateContextOptions {
  /** Default "python"; "bash" (or "shell", "sh") for a persistent shell. */
  language?: string;
  /** The context's working directory, absolute; default /home/user. */
  cwd?: string;
}

// The connection waits this long past the run's own timeout: the supervisor reports the
// timeout itself, with what the run printed until then.
const STREAM_GRACE_S = 30;

export class CodeRunner {
  private readonly base: string;

  constructor(
    private readonly transport: Transport,
    sandboxId: string,
  ) {
    this.base = `/v1/sandboxes/${quote(sandboxId)}`;
  }

  async run(code: string, options: RunCodeOptions = {}): Promise<Execution> {
    if (typeof code !== 'string') throw new TypeError(`runCode: code must be a string, got ${typeof code}`);
    const body: JsonObject = { code, stream: true };
    if (options.language !== undefined) body['language'] = options.language;
    if (options.context !== undefined) body['context_id'] = contextId(options.context);
    if (options.timeout !== undefined) body['timeout_s'] = options.timeout;
    if (options.envs !== undefined && Object.keys(options.envs).length > 0) body['env'] = { ...options.envs };
    const events = this.transport.events('POST', `${this.base}/code`, body, {
      timeout: options.timeout === undefined ? null : options.timeout + STREAM_GRACE_S,
      answerTimeout: null, // a run held for review has no answer until an operator decides
    });
    return this.fold(events, options);
  }

  /**
   * The run of `context` that was in flight when the supervisor died, finished under the next
   * one that adopted the sandbox (`run`: its id, or "last"); waits for its end. Its `restart`
   * says what the agent held and dropped meanwhile.
   */
  async recoveredRun(context: ContextRef, run = 'last', options: RunCodeOptions = {}): Promise<Execution> {
    if (typeof run !== 'string' || run === '') {
      throw new InvalidRequestError(`recoveredRun: run must be a run id ('r3') or 'last', got ${JSON.stringify(run)}`);
    }
    const events = this.transport.events(
      'GET',
      `${this.base}/contexts/${quote(contextId(context))}/runs/${quote(run)}/events`,
      undefined,
      { timeout: null, answerTimeout: null },
    );
    return this.fold(events, options);
  }

  private async fold(events: AsyncGenerator<JsonObject>, options: RunCodeOptions): Promise<Execution> {
    const execution = new Execution();
    for await (const event of events) {
      switch (event['type']) {
        case 'stdout':
        case 'stderr': {
          const isErr = event['type'] === 'stderr';
          const text = eventBytes(event).toString('utf8');
          (isErr ? execution.logs.stderr : execution.logs.stdout).push(text);
          await (isErr ? options.onStderr : options.onStdout)?.(new OutputMessage(text, isErr, new Date()));
          break;
        }
        case 'result':
        case 'display': {
          const data = event['data'];
          const result = new Result(isObject(data) ? data : {}, event['type'] === 'result');
          execution.results.push(result);
          await options.onResult?.(result);
          break;
        }
        case 'error':
          execution.error = ExecutionError.fromEvent(event);
          await options.onError?.(execution.error);
          break;
        case 'end':
          applyEnd(execution, event);
          break;
        case 'supervisor_restart':
          execution.restart = event; // a run taken over from a supervisor that died
          break;
        default:
          break; // an event type newer than this SDK
      }
    }
    if (!execution.status) throw streamEndedEarly('code run', 'end');
    if (execution.status === 'timeout') {
      throw new TimeoutError(
        options.timeout !== undefined
          ? `code run timed out after ${options.timeout} s and was interrupted`
          : "code run hit the profile's timeout and was interrupted",
        { execution },
      );
    }
    if (execution.status === 'context_lost' && execution.error === undefined) {
      execution.error = new ExecutionError(
        'ContextLost',
        `the interpreter of context '${execution.contextId ?? ''}' died during the run ` +
          '(killed, out of memory, or it exited); the next run starts a fresh one',
        '',
      );
      await options.onError?.(execution.error);
    }
    return execution;
  }

  async createContext(options: CreateContextOptions = {}): Promise<Context> {
    const body: JsonObject = { language: options.language ?? 'python' };
    if (options.cwd !== undefined) {
      if (typeof options.cwd !== 'string' || !options.cwd.startsWith('/')) {
        throw new InvalidRequestError(`createCodeContext: cwd must be an absolute path, got ${JSON.stringify(options.cwd)}`);
      }
      body['cwd'] = options.cwd;
    }
    return parseContext(await this.transport.json('POST', `${this.base}/contexts`, body));
  }

  async listContexts(): Promise<Context[]> {
    return objects(await this.transport.json('GET', `${this.base}/contexts`), 'contexts').map(parseContext);
  }

  async restartContext(context: ContextRef): Promise<Context> {
    return parseContext(
      await this.transport.json('POST', `${this.base}/contexts/${quote(contextId(context))}/restart`),
    );
  }

  async removeContext(context: ContextRef): Promise<void> {
    await this.transport.json('DELETE', `${this.base}/contexts/${quote(contextId(context))}`);
  }
}

function contextId(context: ContextRef): string {
  return typeof context === 'string' ? context : context.id;
}

function applyEnd(execution: Execution, event: JsonObject): void {
  execution.status = str(event, 'status') || 'unknown';
  execution.durationMs = optNum(event, 'duration_ms');
  execution.contextId = optStr(event, 'context_id');
  execution.contextRestarted = event['context_restarted'] === true;
  execution.executionCount = optNum(event, 'execution_count');
  execution.review = optReview(event);
  execution.audit = optAudit(event);
  execution.rawEnd = event;
}
