// The supervisor's error answers become typed errors that say what was wrong, and unknown fields
// in answers never break parsing.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import {
  AirlockError,
  AuthenticationError,
  ConflictError,
  DeniedByReview,
  ForbiddenError,
  InternalError,
  InvalidRequestError,
  NotFoundError,
  QuotaExceededError,
  Sandbox,
  SupervisorUnavailableError,
} from '../../src/index.js';
import { errorFromResponse } from '../../src/errors.js';
import { FakeSupervisor, sandboxDoc, sendJson } from '../support/fake-supervisor.js';

function body(code: string, message: string, extra: Record<string, unknown> = {}): Buffer {
  return Buffer.from(JSON.stringify({ error: { code, message, ...extra } }));
}

describe('errorFromResponse', () => {
  const cases: Array<[string, number, new (...args: any[]) => AirlockError]> = [
    ['bad_request', 400, InvalidRequestError],
    ['unauthorized', 401, AuthenticationError],
    ['forbidden', 403, ForbiddenError],
    ['not_found', 404, NotFoundError],
    ['method_not_allowed', 405, InvalidRequestError],
    ['conflict', 409, ConflictError],
    ['payload_too_large', 413, QuotaExceededError],
    ['too_many_requests', 429, QuotaExceededError],
    ['internal', 500, InternalError],
    ['unavailable', 503, SupervisorUnavailableError],
  ];
  for (const [code, status, cls] of cases) {
    it(`maps ${status} ${code} to ${cls.name}, keeping the server's message`, () => {
      const err = errorFromResponse(status, body(code, `the ${code} message`), 'GET /x');
      assert.ok(err instanceof cls, `${err.constructor.name} is not ${cls.name}`);
      assert.ok(err instanceof AirlockError);
      assert.equal(err.message, `the ${code} message`);
      assert.equal(err.status, status);
      assert.equal(err.code, code);
      assert.equal(err.name, cls.name);
    });
  }

  it('falls back to the status, and names the request, for an answer that is not JSON', () => {
    const err = errorFromResponse(429, Buffer.from('<html>slow down</html>'), 'POST /v1/sandboxes');
    assert.ok(err instanceof QuotaExceededError);
    assert.equal(err.message, 'POST /v1/sandboxes: HTTP 429: <html>slow down</html>');
    assert.equal(err.code, undefined);
    const empty = errorFromResponse(502, Buffer.alloc(0), 'GET /healthz');
    assert.ok(empty instanceof InternalError);
    assert.equal(empty.message, 'GET /healthz: HTTP 502');
  });

  it('reads denied_by_review with its review, ignoring fields it does not know', () => {
    const review = {
      verdict: 'deny',
      reviewer: 'patterns',
      rule: 'py-subprocess',
      reason: 'spawning processes is not allowed',
      duration_ms: 0.21,
      cached: false,
      added_later: { anything: [1, 2] },
    };
    const message = "denied by reviewer 'patterns', rule 'py-subprocess': spawning processes is not allowed";
    const err = errorFromResponse(403, body('denied_by_review', message, { review, audit_id: 'a1' }), 'POST /code');
    assert.ok(err instanceof DeniedByReview);
    assert.ok(err instanceof ForbiddenError, 'a review denial is also a 403 forbidden');
    assert.equal(err.message, message);
    assert.equal(err.code, 'denied_by_review');
    assert.equal(err.review.verdict, 'deny');
    assert.equal(err.review.reviewer, 'patterns');
    assert.equal(err.review.rule, 'py-subprocess');
    assert.equal(err.review.reason, 'spawning processes is not allowed');
    assert.equal(err.review.durationMs, 0.21);
    assert.equal(err.review.cached, false);
    assert.deepEqual(err.review.raw['added_later'], { anything: [1, 2] });
  });

  it('keeps a denial usable when the review object is missing or malformed', () => {
    const err = errorFromResponse(403, body('denied_by_review', 'rejected by operator', { review: 'oops' }), 'POST /code');
    assert.ok(err instanceof DeniedByReview);
    assert.equal(err.review.verdict, '');
    assert.equal(err.review.rule, null);
  });
});

describe('error answers through the SDK', () => {
  let fake: FakeSupervisor;
  before(async () => {
    fake = await FakeSupervisor.start();
  });
  after(() => fake.close());

  it('rejects create with QuotaExceededError naming the limit', async () => {
    fake.on('POST', '/v1/sandboxes', (_req, res) =>
      sendJson(res, 429, { error: { code: 'too_many_requests', message: "tenant 'default' has 100 sandboxes, its max_sandboxes" } }),
    );
    await assert.rejects(Sandbox.create({ url: fake.url }), (e: unknown) => e instanceof QuotaExceededError && /max_sandboxes/.test(e.message));
  });

  it('rejects connect to an unknown sandbox with NotFoundError', async () => {
    await assert.rejects(Sandbox.connect('nope', { url: fake.url }), NotFoundError);
  });

  it('rejects runCode denied by review with DeniedByReview and its review', async () => {
    fake.on('GET', '/v1/sandboxes/sb1', (_req, res) => sendJson(res, 200, sandboxDoc({ id: 'sb1' })));
    fake.on('POST', '/v1/sandboxes/sb1/code', (_req, res) =>
      sendJson(res, 403, {
        error: {
          code: 'denied_by_review',
          message: "denied by reviewer 'patterns', rule 'py-subprocess': spawning processes is not allowed",
          review: { verdict: 'deny', reviewer: 'patterns', rule: 'py-subprocess', reason: 'spawning processes is not allowed' },
        },
      }),
    );
    fake.on('POST', '/v1/sandboxes/sb1/commands', (_req, res) =>
      sendJson(res, 403, {
        error: {
          code: 'denied_by_review',
          message: "denied by reviewer 'operator', rule 'deadline': no approval within 300 s",
          review: { verdict: 'deny', reviewer: 'operator', rule: 'deadline', reason: 'no approval within 300 s' },
        },
      }),
    );
    const sbx = await Sandbox.connect('sb1', { url: fake.url });
    await assert.rejects(sbx.runCode('import subprocess'), (e: unknown) => {
      assert.ok(e instanceof DeniedByReview);
      assert.deepEqual(
        { verdict: e.review.verdict, reviewer: e.review.reviewer, rule: e.review.rule, reason: e.review.reason },
        { verdict: 'deny', reviewer: 'patterns', rule: 'py-subprocess', reason: 'spawning processes is not allowed' },
      );
      return true;
    });
    await assert.rejects(sbx.commands.run('rm -rf /home/user'), (e: unknown) => e instanceof DeniedByReview && e.review.rule === 'deadline');
  });

  it('parses answers that carry fields it does not know', async () => {
    fake.on('GET', '/v1/sandboxes/sb2', (_req, res) =>
      sendJson(res, 200, sandboxDoc({ id: 'sb2', audit: { events: 3 }, review: { verdict: 'allow' }, state: 'running', future: null })),
    );
    const sbx = await Sandbox.connect('sb2', { url: fake.url });
    const info = await sbx.getInfo();
    assert.equal(info.id, 'sb2');
    assert.equal(info.keepAlive, 300);
    assert.deepEqual(info.raw['audit'], { events: 3 });
  });

  it('reports a sandbox document with wrong types as absent fields, not a crash', async () => {
    fake.on('GET', '/v1/sandboxes/sb3', (_req, res) =>
      sendJson(res, 200, { id: 'sb3', name: 7, metadata: { a: 'b', n: 1 }, keep_alive_s: 'soon', created_at: null }),
    );
    const info = await (await Sandbox.connect('sb3', { url: fake.url })).getInfo();
    assert.equal(info.name, null);
    assert.deepEqual(info.metadata, { a: 'b' });
    assert.equal(info.keepAlive, null);
    assert.equal(info.createdAt, null);
  });
});
