// Sandbox lifecycle against a scripted supervisor: the create body, connect by name, list with
// metadata filters, setTimeout, kill, and `await using`.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { Sandbox } from '../../src/index.js';
import { FakeSupervisor, sandboxDoc, sendJson } from '../support/fake-supervisor.js';

describe('Sandbox', () => {
  let fake: FakeSupervisor;
  before(async () => {
    fake = await FakeSupervisor.start();
    fake.on('POST', '/v1/sandboxes', (req, res) => sendJson(res, 201, sandboxDoc({ id: 'aaaa000000000001', name: req.json?.name ?? null })));
    fake.on('DELETE', '/v1/sandboxes/aaaa000000000001', (_req, res) => sendJson(res, 204));
  });
  after(() => fake.close());

  it('creates with the options mapped to the API fields', async () => {
    const sbx = await Sandbox.create({
      url: fake.url,
      profile: 'data-science',
      language: 'python',
      name: 'analysis-42',
      envs: { MPLBACKEND: 'Agg' },
      metadata: { user: 'u1' },
      keepAlive: 600,
      lifetime: 3600,
    });
    assert.deepEqual(fake.last('POST', '/v1/sandboxes').json, {
      profile: 'data-science',
      language: 'python',
      name: 'analysis-42',
      env: { MPLBACKEND: 'Agg' },
      metadata: { user: 'u1' },
      keep_alive_s: 600,
      lifetime_s: 3600,
    });
    assert.equal(sbx.id, 'aaaa000000000001');
    assert.equal(sbx.sandboxId, 'aaaa000000000001');
    assert.equal(sbx.name, 'analysis-42');
    assert.equal(await sbx.kill(), true);
  });

  it('creates with an empty body by default', async () => {
    const sbx = await Sandbox.create({ url: fake.url });
    assert.deepEqual(fake.last('POST', '/v1/sandboxes').json, {});
    await sbx.kill();
  });

  it('connects by name, quoting it into the path', async () => {
    fake.on('GET', '/v1/sandboxes/a%2Fb', (_req, res) => sendJson(res, 200, sandboxDoc({ name: 'a/b' })));
    const sbx = await Sandbox.connect('a/b', { url: fake.url });
    assert.equal(sbx.name, 'a/b');
  });

  it('lists with metadata filters as metadata.K=V query parameters', async () => {
    fake.on('GET', '/v1/sandboxes', (_req, res) => sendJson(res, 200, { sandboxes: [sandboxDoc(), 'junk', sandboxDoc({ id: 'x2' })] }));
    const list = await Sandbox.list({ url: fake.url, metadata: { user: 'u1', team: 'a b' } });
    const query = fake.last('GET', '/v1/sandboxes').query;
    assert.equal(query.get('metadata.user'), 'u1');
    assert.equal(query.get('metadata.team'), 'a b');
    assert.deepEqual(list.map((s) => s.id), ['3f2a9c0d1e4b5a67', 'x2']);
    assert.equal(list[0]!.createdAt?.getTime(), 1795000000000);
    assert.equal(list[0]!.endsAt?.getTime(), 1795003600000);
    assert.deepEqual(list[0]!.metadata, { user: 'u1' });
  });

  it('setTimeout posts keep_alive_s (and lifetime_s) and answers the sandbox', async () => {
    fake.on('POST', '/v1/sandboxes/aaaa000000000001/keepalive', (req, res) =>
      sendJson(res, 200, sandboxDoc({ id: 'aaaa000000000001', keep_alive_s: req.json.keep_alive_s })),
    );
    const sbx = await Sandbox.create({ url: fake.url });
    const info = await sbx.setTimeout(900);
    assert.deepEqual(fake.last('POST', '/v1/sandboxes/aaaa000000000001/keepalive').json, { keep_alive_s: 900 });
    assert.equal(info.keepAlive, 900);
    await sbx.setTimeout(60, { lifetime: 7200 });
    assert.deepEqual(fake.last('POST', '/v1/sandboxes/aaaa000000000001/keepalive').json, { keep_alive_s: 60, lifetime_s: 7200 });
    await sbx.kill();
  });

  it('kills the sandbox at the end of an `await using` block', async () => {
    const deletes = () => fake.requests.filter((r) => r.method === 'DELETE' && r.path === '/v1/sandboxes/aaaa000000000001').length;
    const before = deletes();
    {
      await using sbx = await Sandbox.create({ url: fake.url });
      assert.equal(sbx.id, 'aaaa000000000001');
      assert.equal(deletes(), before);
    }
    assert.equal(deletes(), before + 1);
  });

  it('answers kill() of a sandbox that is already gone with false', async () => {
    fake.on('GET', '/v1/sandboxes/gone', (_req, res) => sendJson(res, 200, sandboxDoc({ id: 'gone0000000000' })));
    const sbx = await Sandbox.connect('gone', { url: fake.url });
    assert.equal(await sbx.kill(), false);
    assert.equal(await sbx.isRunning(), false);
  });
});
