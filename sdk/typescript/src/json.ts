// Tolerant readers for the supervisor's JSON answers. A field of the wrong type reads as absent,
// and unknown fields are ignored, so the supervisor can add fields (a `review` or `audit`
// summary, ...) without breaking clients built before them.

export type JsonObject = Record<string, unknown>;

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function str(o: JsonObject, key: string, fallback = ''): string {
  const v = o[key];
  return typeof v === 'string' ? v : fallback;
}

export function optStr(o: JsonObject, key: string): string | null {
  const v = o[key];
  return typeof v === 'string' ? v : null;
}

export function num(o: JsonObject, key: string, fallback = 0): number {
  const v = o[key];
  return typeof v === 'number' && Number.isFinite(v) ? v : fallback;
}

export function optNum(o: JsonObject, key: string): number | null {
  const v = o[key];
  return typeof v === 'number' && Number.isFinite(v) ? v : null;
}

export function obj(o: JsonObject, key: string): JsonObject {
  const v = o[key];
  return isObject(v) ? v : {};
}

export function optObj(o: JsonObject, key: string): JsonObject | null {
  const v = o[key];
  return isObject(v) ? v : null;
}

/** A Unix-milliseconds field (`*_at`, `mtime_ms`) as a Date. */
export function time(o: JsonObject, key: string): Date | null {
  const ms = optNum(o, key);
  return ms === null ? null : new Date(ms);
}

/** The object values of an array field, skipping anything else. */
export function objects(o: JsonObject, key: string): JsonObject[] {
  const v = o[key];
  return Array.isArray(v) ? v.filter(isObject) : [];
}

/** The bytes of an output event: `bytes` from a frame, `data` as UTF-8 text, or `data_base64`. */
export function eventBytes(event: JsonObject, textKey = 'data'): Buffer {
  const raw = event['bytes'];
  if (Buffer.isBuffer(raw)) return raw;
  const text = event[textKey];
  if (typeof text === 'string') return Buffer.from(text, 'utf8');
  const encoded = event[`${textKey}_base64`];
  if (typeof encoded === 'string') return Buffer.from(encoded, 'base64');
  return Buffer.alloc(0);
}
