// Finding the supervisor: AIRLOCK_URL / AIRLOCK_TOKEN, the default socket, explicit options, and
// clear errors for addresses the SDK cannot use.

import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';

import { resolveConnection } from '../../src/endpoint.js';
import { ConfigurationError, DEFAULT_URL, Sandbox, SupervisorUnavailableError, parseUrl } from '../../src/index.js';
import { FakeSupervisor, sandboxDoc, sendJson } from '../support/fake-supervisor.js';

describe('parseUrl', () => {
  it('reads a Unix socket URL, percent-decoding the path', () => {
    assert.deepEqual(parseUrl('unix:///run/airlock/airlock.sock'), {
      url: 'unix:///run/airlock/airlock.sock',
      kind: 'unix',
      socketPath: '/run/airlock/airlock.sock',
    });
    assert.equal((parseUrl('unix:///tmp/a%20b.sock') as { socketPath: string }).socketPath, '/tmp/a b.sock');
  });

  it('reads loopback TCP URLs, IPv4 and IPv6', () => {
    assert.deepEqual(parseUrl('http://127.0.0.1:8080'), { url: 'http://127.0.0.1:8080', kind: 'tcp', host: '127.0.0.1', port: 8080, tls: false });
    assert.deepEqual(parseUrl('https://airlock.example:8443'), { url: 'https://airlock.example:8443', kind: 'tcp', host: 'airlock.example', port: 8443, tls: true });
    assert.equal((parseUrl('https://airlock.example') as { port: number }).port, 443);
    assert.deepEqual(parseUrl('http://[::1]:9000/'), { url: 'http://[::1]:9000/', kind: 'tcp', host: '::1', port: 9000, tls: false });
  });

  it('refuses relative socket paths, other schemes, paths and credentials with a message saying what to use', () => {
    assert.throws(() => parseUrl('unix://run/airlock.sock'), (e: unknown) => e instanceof ConfigurationError && /absolute path/.test(e.message));
    assert.throws(() => parseUrl('ftp://127.0.0.1:8443'), (e: unknown) => e instanceof ConfigurationError && /scheme 'ftp' is not supported/.test(e.message));
    assert.throws(() => parseUrl('/run/airlock.sock'), (e: unknown) => e instanceof ConfigurationError && /expected unix:\/\/\/path/.test(e.message));
    assert.throws(() => parseUrl('http://127.0.0.1:8080/v1'), (e: unknown) => e instanceof ConfigurationError && /only a host and port/.test(e.message));
    assert.throws(() => parseUrl('http://tok@127.0.0.1:8080'), (e: unknown) => e instanceof ConfigurationError && /AIRLOCK_TOKEN/.test(e.message));
  });
});

describe('resolveConnection', () => {
  const saved = { url: process.env['AIRLOCK_URL'], token: process.env['AIRLOCK_TOKEN'] };
  beforeEach(() => {
    delete process.env['AIRLOCK_URL'];
    delete process.env['AIRLOCK_TOKEN'];
  });
  afterEach(() => {
    for (const [key, value] of [['AIRLOCK_URL', saved.url], ['AIRLOCK_TOKEN', saved.token]] as const) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  });

  it('defaults to the standard socket and no token', () => {
    const c = resolveConnection();
    assert.equal(c.endpoint.url, DEFAULT_URL);
    assert.equal(c.token, undefined);
    assert.equal(c.requestTimeout, 60);
  });

  it('takes AIRLOCK_URL and AIRLOCK_TOKEN from the environment', () => {
    process.env['AIRLOCK_URL'] = 'http://127.0.0.1:7000';
    process.env['AIRLOCK_TOKEN'] = 'secret-token';
    const c = resolveConnection();
    assert.deepEqual(c.endpoint, { url: 'http://127.0.0.1:7000', kind: 'tcp', host: '127.0.0.1', port: 7000, tls: false });
    assert.equal(c.token, 'secret-token');
  });

  it('lets explicit options override the environment', () => {
    process.env['AIRLOCK_URL'] = 'http://127.0.0.1:7000';
    process.env['AIRLOCK_TOKEN'] = 'env-token';
    const c = resolveConnection({ url: 'unix:///tmp/x.sock', token: 'mine', requestTimeout: 5 });
    assert.equal(c.endpoint.url, 'unix:///tmp/x.sock');
    assert.equal(c.token, 'mine');
    assert.equal(c.requestTimeout, 5);
  });

  it('refuses a token that cannot travel in a header, without echoing it', () => {
    assert.throws(
      () => resolveConnection({ token: 'two words' }),
      (e: unknown) => e instanceof ConfigurationError && /printable ASCII/.test(e.message) && !e.message.includes('two words'),
    );
  });
});

describe('connecting', () => {
  it('says the supervisor is not running when the socket does not exist', async () => {
    await assert.rejects(Sandbox.list({ url: 'unix:///nonexistent/airlock-test.sock' }), (e: unknown) => {
      assert.ok(e instanceof SupervisorUnavailableError);
      assert.match(e.message, /cannot connect to \/nonexistent\/airlock-test\.sock: ENOENT — is airlock serve running\?/);
      return true;
    });
  });

  it('sends AIRLOCK_TOKEN as a bearer token over the Unix socket', async () => {
    const fake = await FakeSupervisor.start();
    try {
      fake.on('GET', '/v1/sandboxes', (_req, res) => sendJson(res, 200, { sandboxes: [] }));
      await Sandbox.list({ url: fake.url, token: 'tenant-token' });
      assert.equal(fake.last('GET', '/v1/sandboxes').headers['authorization'], 'Bearer tenant-token');
      await Sandbox.list({ url: fake.url });
      assert.equal(fake.last('GET', '/v1/sandboxes').headers['authorization'], undefined);
    } finally {
      await fake.close();
    }
  });

  it('talks to a loopback TCP supervisor with its token', async () => {
    const fake = await FakeSupervisor.start({ tcp: true });
    try {
      fake.on('GET', '/v1/sandboxes/web-1', (req, res) =>
        req.headers['authorization'] === 'Bearer t0k'
          ? sendJson(res, 200, sandboxDoc({ name: 'web-1' }))
          : sendJson(res, 401, { error: { code: 'unauthorized', message: 'missing or invalid bearer token' } }),
      );
      const sbx = await Sandbox.connect('web-1', { url: fake.url, token: 't0k' });
      assert.equal(sbx.name, 'web-1');
      assert.equal(await sbx.kill(), false, 'the fake has no DELETE route: a 404 means already gone');
    } finally {
      await fake.close();
    }
  });
});
