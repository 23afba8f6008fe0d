// Retries in the transport: an answer of 429 or 503 is tried again after a backoff (or the
// answer's Retry-After), a lost connection only for idempotent requests, never more than
// `retry.attempts` times, and a streamed upload (which cannot be replayed) never.

import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { after, before, beforeEach, describe, it } from 'node:test';

import { QuotaExceededError, Sandbox, SupervisorUnavailableError } from '../../src/index.js';
import { retryAfterSeconds } from '../../src/transport.js';
import { FakeSupervisor, sandboxDoc, sendCreated, sendJson, sendNdjson } from '../support/fake-supervisor.js';

const FAST = { attempts: 3, backoff: 0.01, maxBackoff: 1 };
const busy = { error: { code: 'unavailable', message: 'the supervisor is draining' } };
const quota = { error: { code: 'too_many_requests', message: 'tenant default: max_sandboxes (2) reached' } };

describe('retries', () => {
  let fake: FakeSupervisor;
  before(async () => {
    fake = await FakeSupervisor.start();
    fake.on('GET', '/v1/sandboxes/sb', (_req, res) => sendJson(res, 200, sandboxDoc({ id: 'sb' })));
  });
  beforeEach(() => {
    fake.requests.length = 0;
  });
  after(() => fake.close());

  const count = (method: string, path: string): number =>
    fake.requests.filter((r) => r.method === method && r.path === path).length;

  it('retries a 503 on a GET until it succeeds', async () => {
    let calls = 0;
    fake.on('GET', '/v1/sandboxes', (_req, res) => {
      if (++calls < 3) sendJson(res, 503, busy);
      else sendJson(res, 200, { sandboxes: [sandboxDoc()] });
    });
    const list = await Sandbox.list({ url: fake.url, retry: FAST });
    assert.equal(list.length, 1);
    assert.equal(count('GET', '/v1/sandboxes'), 3);
  });

  it('retries a 429 on a POST (the supervisor refused before acting) and honours Retry-After', async () => {
    let calls = 0;
    fake.on('POST', '/v1/sandboxes', (req, res) => {
      if (++calls === 1) {
        res.setHeader('Retry-After', '1');
        sendJson(res, 429, quota);
      } else sendCreated(req, res);
    });
    const started = performance.now();
    const sbx = await Sandbox.create({ url: fake.url, retry: { ...FAST, maxBackoff: 2 } });
    const waited = performance.now() - started;
    assert.equal(sbx.id, '3f2a9c0d1e4b5a67');
    assert.equal(count('POST', '/v1/sandboxes'), 2);
    assert.ok(waited >= 950, `waited ${waited} ms, Retry-After asked for 1 s`);
    sbx['transport'].close();
  });

  it('gives up after retry.attempts with the last error, mapped as usual', async () => {
    fake.on('POST', '/v1/sandboxes', (_req, res) => sendJson(res, 429, quota));
    await assert.rejects(Sandbox.create({ url: fake.url, retry: FAST }), (e: unknown) => {
      assert.ok(e instanceof QuotaExceededError, String(e));
      assert.equal(e.status, 429);
      assert.match(e.message, /max_sandboxes \(2\) reached/);
      return true;
    });
    assert.equal(count('POST', '/v1/sandboxes'), 3);
  });

  it('does not wait for a Retry-After longer than maxBackoff, nor retry with retry: false', async () => {
    fake.on('POST', '/v1/sandboxes', (_req, res) => {
      res.setHeader('Retry-After', '120');
      sendJson(res, 503, busy);
    });
    const started = performance.now();
    await assert.rejects(Sandbox.create({ url: fake.url, retry: FAST }), SupervisorUnavailableError);
    assert.ok(performance.now() - started < 1000);
    assert.equal(count('POST', '/v1/sandboxes'), 1);
    fake.requests.length = 0;
    fake.on('GET', '/v1/sandboxes', (_req, res) => sendJson(res, 503, busy));
    await assert.rejects(Sandbox.list({ url: fake.url, retry: false }), SupervisorUnavailableError);
    assert.equal(count('GET', '/v1/sandboxes'), 1);
  });

  it('retries a connection lost before the answer for a GET, but not for a POST that may have acted', async () => {
    let calls = 0;
    fake.on('GET', '/v1/sandboxes/sb/commands', (_req, res) => {
      if (++calls === 1) res.socket?.destroy();
      else sendJson(res, 200, { commands: [] });
    });
    const sbx = await Sandbox.connect('sb', { url: fake.url, retry: FAST });
    assert.deepEqual(await sbx.commands.list(), []);
    assert.equal(count('GET', '/v1/sandboxes/sb/commands'), 2);

    fake.on('POST', '/v1/sandboxes/sb/code', (_req, res) => void res.socket?.destroy());
    await assert.rejects(sbx.runCode('print(1)'), SupervisorUnavailableError);
    assert.equal(count('POST', '/v1/sandboxes/sb/code'), 1);
    sbx['transport'].close();
  });

  it('never replays a streamed upload', async () => {
    fake.on('PUT', '/v1/sandboxes/sb/files', (_req, res) => sendJson(res, 503, busy));
    const sbx = await Sandbox.connect('sb', { url: fake.url, retry: FAST });
    await assert.rejects(sbx.files.write('/tmp/x', Readable.from([Buffer.from('abc')])), SupervisorUnavailableError);
    assert.equal(count('PUT', '/v1/sandboxes/sb/files'), 1);
    // Bytes in memory can be sent again.
    await assert.rejects(sbx.files.write('/tmp/x', 'abc'), SupervisorUnavailableError);
    assert.equal(count('PUT', '/v1/sandboxes/sb/files'), 4);
    sbx['transport'].close();
  });

  it('streams events of a run as they arrive through the retried request', async () => {
    let calls = 0;
    fake.on('POST', '/v1/sandboxes/sb/code', (_req, res) => {
      if (++calls === 1) sendJson(res, 503, busy);
      else sendNdjson(res, [{ type: 'stdout', data: 'hi\n' }, { type: 'end', status: 'ok' }]);
    });
    const sbx = await Sandbox.connect('sb', { url: fake.url, retry: FAST });
    assert.equal((await sbx.runCode('print("hi")')).stdout, 'hi\n');
    sbx['transport'].close();
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    assert.equal(retryAfterSeconds('3'), 3);
    assert.equal(retryAfterSeconds(undefined), undefined);
    assert.equal(retryAfterSeconds('soon'), undefined);
    const inTwo = new Date(Date.now() + 2000).toUTCString();
    const seconds = retryAfterSeconds(inTwo)!;
    assert.ok(seconds > 0.5 && seconds <= 2, String(seconds));
  });
});
