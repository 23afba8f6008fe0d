// Sandbox lifecycle against a scripted supervisor: the create body, connect by name, list with
// metadata filters, setTimeout, kill, and `await using`.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { ForbiddenError, InvalidRequestError, Sandbox } from '../../src/index.js';
import { FakeSupervisor, sandboxDoc, sendCreated, sendJson } from '../support/fake-supervisor.js';

describe('Sandbox', () => {
  let fake: FakeSupervisor;
  before(async () => {
    fake = await FakeSupervisor.start();
    fake.on('POST', '/v1/sandboxes', (req, res) => sendCreated(req, res, { id: 'aaaa000000000001', name: req.json?.name ?? null }));
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
    await (await Sandbox.create({ url: fake.url, mounts: [] })).kill();
    assert.deepEqual(fake.last('POST', '/v1/sandboxes').json, {}, 'no mounts field for an empty list');
  });

  it('sends mounts with only the fields given and reads them back with their defaults', async () => {
    const sbx = await Sandbox.create({
      url: fake.url,
      name: 'm',
      persistent: true,
      mounts: [
        { source: 'hostdir:datasets/imagenet', path: '/mnt/imagenet', writable: true },
        { source: 'hostdir:models' },
        'hostdir:scratch',
        { source: 'hostdir:logs/today', writable: false },
      ],
    });
    assert.deepEqual(fake.last('POST', '/v1/sandboxes').json, {
      name: 'm',
      persistent: true,
      mounts: [
        { source: 'hostdir:datasets/imagenet', path: '/mnt/imagenet', writable: true },
        { source: 'hostdir:models' },
        { source: 'hostdir:scratch' },
        { source: 'hostdir:logs/today', writable: false },
      ],
    });
    // get answers the sandbox as create did.
    const create = fake.last('POST', '/v1/sandboxes');
    fake.on('GET', '/v1/sandboxes/aaaa000000000001', (_req, res) => sendCreated(create, res, { id: 'aaaa000000000001' }));
    const info = await sbx.getInfo();
    assert.deepEqual(info.mounts, [
      { source: 'hostdir:datasets/imagenet', path: '/mnt/imagenet', writable: true },
      { source: 'hostdir:models', path: '/mnt/models', writable: false },
      { source: 'hostdir:scratch', path: '/mnt/scratch', writable: false },
      { source: 'hostdir:logs/today', path: '/mnt/logs/today', writable: false },
    ]);
    await sbx.kill();
  });

  it('maps a bad mount to InvalidRequestError and a forbidden one to ForbiddenError', async () => {
    await assert.rejects(Sandbox.create({ url: fake.url, mounts: [{ source: 'hostdir:data', path: '/etc/data' }] }), (err: unknown) => {
      assert.ok(err instanceof InvalidRequestError);
      assert.match(err.message, /not under \/mnt/);
      return true;
    });
    const other = await FakeSupervisor.start();
    try {
      other.on('POST', '/v1/sandboxes', (_req, res) =>
        sendJson(res, 403, { error: { code: 'forbidden', message: "profile 'default' may not mount 'data' writable" } }),
      );
      await assert.rejects(Sandbox.create({ url: other.url, mounts: [{ source: 'hostdir:data', writable: true }] }), ForbiddenError);
    } finally {
      await other.close();
    }
  });

  it('lists sandboxes with their mounts, skipping entries that are not objects', async () => {
    const mounts = [{ source: 'hostdir:out', path: '/mnt/results', writable: true }, 'junk'];
    fake.on('GET', '/v1/sandboxes', (_req, res) => sendJson(res, 200, { sandboxes: [sandboxDoc({ mounts })] }));
    const [info] = await Sandbox.list({ url: fake.url });
    assert.deepEqual(info!.mounts, [{ source: 'hostdir:out', path: '/mnt/results', writable: true }]);
  });

  it('lists every node in turn behind a fleet proxy, which lists per node', async () => {
    const perNode = { code: 'bad_request', message: 'this fleet lists per node: add ?node=NAME (GET /v1/fleet names the nodes)' };
    const lists: Record<string, unknown[]> = {
      n1: [sandboxDoc({ id: 'n1_00000000000000a1', node: 'n1' })],
      n2: [sandboxDoc({ id: 'n2_00000000000000b2', node: 'n2' })],
    };
    fake.on('GET', '/v1/sandboxes', (req, res) => {
      const node = req.query.get('node');
      if (node) sendJson(res, 200, { sandboxes: lists[node] });
      else sendJson(res, 400, { error: perNode });
    });
    fake.on('GET', '/v1/fleet', (_req, res) => sendJson(res, 200, { nodes: ['n1', 'n2'] }));
    const all = await Sandbox.list({ url: fake.url, metadata: { user: 'u1' } });
    assert.deepEqual(all.map((s) => [s.id, s.node]), [['n1_00000000000000a1', 'n1'], ['n2_00000000000000b2', 'n2']]);
    assert.equal(fake.last('GET', '/v1/sandboxes').query.get('metadata.user'), 'u1');
    const one = await Sandbox.list({ url: fake.url, node: 'n2' });
    assert.deepEqual(one.map((s) => s.id), ['n2_00000000000000b2']);
    fake.on('GET', '/v1/sandboxes', (_req, res) => sendJson(res, 400, { error: { code: 'bad_request', message: 'no' } }));
    await assert.rejects(Sandbox.list({ url: fake.url }), InvalidRequestError);
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

  it('metrics() reads the resource use, unlimited limits as null', async () => {
    fake.on('GET', '/v1/sandboxes/aaaa000000000001/metrics', (_req, res) =>
      sendJson(res, 200, {
        sandbox_id: 'aaaa000000000001',
        cpu_seconds: 1.25,
        memory_bytes: 52428800,
        memory_peak_bytes: 73400320,
        memory_limit_bytes: null,
        pids: 3,
        pids_limit: 256,
        disk_bytes: 4096,
        disk_limit_bytes: 536870912,
        oom_kills: 1,
        executions: 7,
        uptime_s: 12.5,
        sampled_at: '2026-11-28T07:12:03.417Z',
      }),
    );
    const sbx = await Sandbox.create({ url: fake.url });
    const m = await sbx.metrics();
    assert.equal(m.sandboxId, 'aaaa000000000001');
    assert.equal(m.cpuSeconds, 1.25);
    assert.equal(m.memoryBytes, 52428800);
    assert.equal(m.memoryLimitBytes, null);
    assert.equal(m.pidsLimit, 256);
    assert.equal(m.oomKills, 1);
    assert.equal(m.executions, 7);
    assert.deepEqual(m.sampledAt, new Date('2026-11-28T07:12:03.417Z'));
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
