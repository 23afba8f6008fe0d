// Transport timeouts: an ordinary call gives up on a silent supervisor after requestTimeout, but
// a code run or command waits for its answer to start as long as it takes (a run held for an
// operator's review has no answer until someone decides).

import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';

import { Sandbox, TimeoutError } from '../../src/index.js';
import { FakeSupervisor, sandboxDoc, sendJson, sendNdjson } from '../support/fake-supervisor.js';

describe('transport timeouts', () => {
  let fake: FakeSupervisor;
  before(async () => {
    fake = await FakeSupervisor.start();
    fake.on('GET', '/v1/sandboxes/held', (_req, res) => sendJson(res, 200, sandboxDoc({ id: 'held' })));
  });
  after(() => fake.close());

  it('rejects an ordinary call with TimeoutError when the supervisor does not answer in requestTimeout', async () => {
    fake.on('GET', '/v1/sandboxes', async () => {
      await sleep(3000); // never answers in time; the client hangs up first
    });
    const started = performance.now();
    await assert.rejects(Sandbox.list({ url: fake.url, requestTimeout: 0.3 }), (e: unknown) => {
      assert.ok(e instanceof TimeoutError, String(e));
      assert.match(e.message, /^GET \/v1\/sandboxes: the supervisor at unix:\/\/.* did not answer within 0\.3 s$/);
      return true;
    });
    assert.ok(performance.now() - started < 2500);
  });

  it('waits past requestTimeout for a code run and a command whose answer is held', async () => {
    fake.on('POST', '/v1/sandboxes/held/code', async (_req, res) => {
      await sleep(800);
      sendNdjson(res, [{ type: 'result', data: { 'text/plain': '2' } }, { type: 'end', status: 'ok' }]);
    });
    fake.on('POST', '/v1/sandboxes/held/commands', async (req, res) => {
      await sleep(800);
      if (req.json.background) sendJson(res, 201, { command_id: 'c1', pid: 3 });
      else sendNdjson(res, [{ type: 'exit', exit_code: 0, signal: 0, timed_out: false }]);
    });
    const sbx = await Sandbox.connect('held', { url: fake.url, requestTimeout: 0.3 });
    assert.equal((await sbx.runCode('1 + 1')).text, '2');
    assert.equal((await sbx.commands.run('true')).exitCode, 0);
    assert.equal((await sbx.commands.run('true', { background: true })).id, 'c1');
  });
});
