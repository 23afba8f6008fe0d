// The review chain's outcome (docs/api.md, Review): carried by a 403 `denied_by_review` error,
// and by an allowed run's `end` (code) or `exit` (command) event.

import { isObject, optNum, optStr, str, type JsonObject } from './json.js';

export interface Review {
  /** "allow", "deny" or "hold" (kept as sent when the supervisor adds another). */
  verdict: string;
  /** The reviewer that decided; null when every reviewer allowed. */
  reviewer: string | null;
  /** The rule that decided: a pattern's name, or "operator" / "deadline" for held runs. */
  rule: string | null;
  /** Why, in words. */
  reason: string | null;
  durationMs: number | null;
  cached: boolean;
  /** The object as sent, unknown fields included. */
  raw: JsonObject;
}

export function parseReview(value: unknown): Review {
  const o = isObject(value) ? value : {};
  return {
    verdict: str(o, 'verdict'),
    reviewer: optStr(o, 'reviewer'),
    rule: optStr(o, 'rule'),
    reason: optStr(o, 'reason'),
    durationMs: optNum(o, 'duration_ms'),
    cached: o['cached'] === true,
    raw: o,
  };
}

/** The review of an allowed run, when its last event carries one. */
export function optReview(o: JsonObject, key = 'review'): Review | null {
  return isObject(o[key]) ? parseReview(o[key]) : null;
}
