// Code runs in stateful contexts: `POST /v1/sandboxes/{sb}/code` read as NDJSON events, and the
// context routes. Sandbox.runCode and the *CodeContext methods call in here.

import { TimeoutError, streamEndedEarly } from './errors.js';
import { eventBytes, isObject, objects, optNum, optStr, str, type JsonObject } from './json.js';
import { Execution, ExecutionError, OutputMessage, Result, parseContext, type Context } from './models.js';
import { optAudit } from './audit.js';
import { optReview } from './review.js';
import { quote, type Transport } from './transport.js';

/** A callback may return a promise; the run waits for it before handling the next event. */
export type OutputHandler = (output: OutputMessage) => unknown;
export type ResultHandler = (result: Result) => unknown;
export type ErrorHandler = (error: ExecutionError) => unknown;

export interface RunCodeOptions {
  /** "python", "node", ...; default: the sandbox's language. */
  language?: string;
  /** A context from createCodeContext (or its id); default: the language's default context. */
  context?: Context | string;
  onStdout?: OutputHandler;
  onStderr?: OutputHandler;
  /** Each result as it arrives: displays (figures) and the last expression's value. */
  onResult?: ResultHandler;
  onError?: ErrorHandler;
  /** Seconds before the run is interrupted; default: the profile's limit. */
  timeout?: number;
}

export interface CreateContextOptions {
  /** Default "python". */
  language?: string;
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
    const execution = new Execution();
    const events = this.transport.events('POST', `${this.base}/code`, body, {
      timeout: options.timeout === undefined ? null : options.timeout + STREAM_GRACE_S,
      answerTimeout: null, // a run held for review has no answer until an operator decides
    });
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
    return parseContext(
      await this.transport.json('POST', `${this.base}/contexts`, { language: options.language ?? 'python' }),
    );
  }

  async listContexts(): Promise<Context[]> {
    return objects(await this.transport.json('GET', `${this.base}/contexts`), 'contexts').map(parseContext);
  }

  async restartContext(context: Context | string): Promise<Context> {
    return parseContext(
      await this.transport.json('POST', `${this.base}/contexts/${quote(contextId(context))}/restart`),
    );
  }

  async removeContext(context: Context | string): Promise<void> {
    await this.transport.json('DELETE', `${this.base}/contexts/${quote(contextId(context))}`);
  }
}

function contextId(context: Context | string): string {
  return typeof context === 'string' ? context : context.id;
}

function applyEnd(execution: Execution, event: JsonObject): void {
  execution.status = str(event, 'status') || 'unknown';
  execution.durationMs = optNum(event, 'duration_ms');
  execution.contextId = optStr(event, 'context_id');
  execution.contextRestarted = event['context_restarted'] === true;
  execution.review = optReview(event);
  execution.audit = optAudit(event);
  execution.rawEnd = event;
}
