// The errors the SDK throws, all extending AirlockError, and the mapping from the API's error
// bodies. Every error the supervisor answers is {"error": {"code", "message"}} with a 4xx or 5xx
// status (docs/api.md, Conventions): the code picks the class, and the status is the fallback for
// an answer without a usable body (a proxy, a crash mid-answer).

import type { CommandResult, Execution, TransferRecord } from './models.js';
import { isObject } from './json.js';
import { parseReview, type Review } from './review.js';

export interface AirlockErrorDetails {
  /** HTTP status of the supervisor's answer, when the error came from one. */
  status?: number;
  /** The API's error code ("not_found", "conflict", ...), when the answer had one. */
  code?: string;
  /** The whole decoded error answer, unknown fields included. */
  body?: Record<string, unknown>;
  cause?: unknown;
}

/** Base of every error the SDK throws. */
export class AirlockError extends Error {
  readonly status: number | undefined;
  readonly code: string | undefined;
  readonly body: Record<string, unknown>;

  constructor(message: string, details: AirlockErrorDetails = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.status = details.status;
    this.code = details.code;
    this.body = details.body ?? {};
  }
}

/** The supervisor's address or token is malformed (AIRLOCK_URL, `url`, `token`). */
export class ConfigurationError extends AirlockError {}

/** 400 `bad_request` (or 405): a wrong field, type or value in the request. */
export class InvalidRequestError extends AirlockError {}

/** 401 `unauthorized`: the bearer token is missing (TCP) or not valid. */
export class AuthenticationError extends AirlockError {}

/** 403 `forbidden`: the tenant may not use this profile. */
export class ForbiddenError extends AirlockError {}

/**
 * 403 `denied_by_review`: the profile's review chain (or an operator, or the approval deadline)
 * refused the code or command before it started. `review` says who decided and why.
 */
export class DeniedByReview extends ForbiddenError {
  readonly review: Review;

  constructor(message: string, review: Review, details: AirlockErrorDetails = {}) {
    super(message, { status: 403, code: 'denied_by_review', ...details });
    this.review = review;
  }
}

/** 404 `not_found`: no such sandbox, command, context, file or route (for this tenant). */
export class NotFoundError extends AirlockError {}

/** 409 `conflict`: name already taken, sandbox not running, context busy, workspace in use. */
export class ConflictError extends AirlockError {}

/**
 * 429 `too_many_requests` (a tenant or host quota) or 413 `payload_too_large` (a body over the
 * limit, a file over the workspace quota).
 */
export class QuotaExceededError extends AirlockError {}

/** 500 `internal`: an airlock bug or a host failure; the message names the step. */
export class InternalError extends AirlockError {}

/**
 * The supervisor cannot be reached (no socket, connection refused, connection lost mid-answer)
 * or answered 503 `unavailable` because it is draining.
 */
export class SupervisorUnavailableError extends AirlockError {}

/**
 * A code run or command hit its timeout, or the supervisor did not answer in time. `runCode`
 * throws it when the run's status is `timeout` (the run was interrupted; what it printed until
 * then is in `execution`); `commands.run` and `CommandHandle.wait` when the command was killed
 * by its timeout (its output is in `result`).
 */
export class TimeoutError extends AirlockError {
  readonly execution: Execution | undefined;
  readonly result: CommandResult | undefined;

  constructor(message: string, options: { execution?: Execution; result?: CommandResult } = {}) {
    super(message);
    this.execution = options.execution;
    this.result = options.result;
  }
}

/**
 * A transfer ended with a status other than "ok": "error" (a bad archive, a failed download, a
 * limit), "denied" (a rule of the profile refused it before any byte moved) or "cancelled".
 * `transfer` is the whole record; `code` is its status and the message carries its `error` text.
 */
export class TransferError extends AirlockError {
  readonly transfer: TransferRecord;

  constructor(message: string, transfer: TransferRecord) {
    super(message, { code: transfer.status, body: transfer.raw });
    this.transfer = transfer;
  }
}

type ErrorClass = new (message: string, details?: AirlockErrorDetails) => AirlockError;

const byCode: Record<string, ErrorClass> = {
  bad_request: InvalidRequestError,
  method_not_allowed: InvalidRequestError,
  unauthorized: AuthenticationError,
  forbidden: ForbiddenError,
  not_found: NotFoundError,
  conflict: ConflictError,
  payload_too_large: QuotaExceededError,
  too_many_requests: QuotaExceededError,
  internal: InternalError,
  unavailable: SupervisorUnavailableError,
};

const byStatus: Record<number, ErrorClass> = {
  400: InvalidRequestError,
  401: AuthenticationError,
  403: ForbiddenError,
  404: NotFoundError,
  405: InvalidRequestError,
  409: ConflictError,
  413: QuotaExceededError,
  429: QuotaExceededError,
  500: InternalError,
  503: SupervisorUnavailableError,
};

/**
 * The error for an answer with status >= 400. `what` names the request ("POST /v1/sandboxes")
 * so that an answer without a message of its own still says what failed.
 */
export function errorFromResponse(status: number, payload: Buffer, what: string): AirlockError {
  let body: Record<string, unknown> = {};
  try {
    const decoded: unknown = payload.length > 0 ? JSON.parse(payload.toString('utf8')) : undefined;
    if (isObject(decoded)) body = decoded;
  } catch {
    // Not JSON (a proxy's page, a truncated answer): the status decides, the text is quoted.
  }
  const error = isObject(body['error']) ? body['error'] : {};
  const code = typeof error['code'] === 'string' ? error['code'] : undefined;
  let message = typeof error['message'] === 'string' ? error['message'] : '';
  if (!message) {
    const text = payload.subarray(0, 200).toString('utf8').trim();
    message = `${what}: HTTP ${status}${text ? `: ${text}` : ''}`;
  }
  const details: AirlockErrorDetails = { status, body };
  if (code !== undefined) details.code = code;
  if (code === 'denied_by_review') {
    return new DeniedByReview(message, parseReview(error['review']), details);
  }
  const cls =
    (code !== undefined ? byCode[code] : undefined) ??
    byStatus[status] ??
    (status >= 500 ? InternalError : InvalidRequestError);
  return new cls(message, details);
}

/** A stream that stopped before its last event: the supervisor went away mid-run. */
export function streamEndedEarly(what: string, lastEvent: string): SupervisorUnavailableError {
  return new SupervisorUnavailableError(
    `${what}: the supervisor ended the event stream before the '${lastEvent}' event ` +
      '(it stopped or restarted?)',
  );
}
