// https:// supervisor URLs: the transport speaks TLS to a remote supervisor, checks its
// certificate (a private CA through the `ca` option), and sends the token over it.

import assert from 'node:assert/strict';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';

import { ConfigurationError, Sandbox, SupervisorUnavailableError } from '../../src/index.js';

// A self-signed certificate for 127.0.0.1 made for this test (openssl req -x509, EC P-256,
// valid for 100 years); it is its own CA.
const CERT = `-----BEGIN CERTIFICATE-----
MIIBqTCCAU+gAwIBAgIUB+l+MILWQ4HHAZb6jy0emFTR72IwCgYIKoZIzj0EAwIw
GzEZMBcGA1UEAwwQYWlybG9jay1zZGstdGVzdDAgFw0yNjExMjgwMzMzMzZaGA8y
MTI2MTEwNDAzMzMzNlowGzEZMBcGA1UEAwwQYWlybG9jay1zZGstdGVzdDBZMBMG
ByqGSM49AgEGCCqGSM49AwEHA0IABB5UrK5Jh3pHb66Y2a6vJQkgK1IzS0p5c3or
ZEy85QPJ4IR+0RyRwmQcraAn8ct6CQCZWgG0V3ESHZaW0znyysmjbzBtMB0GA1Ud
DgQWBBTh4WktuLNZQ7Qj1O7Li6b/YKv9zjAfBgNVHSMEGDAWgBTh4WktuLNZQ7Qj
1O7Li6b/YKv9zjAPBgNVHRMBAf8EBTADAQH/MBoGA1UdEQQTMBGHBH8AAAGCCWxv
Y2FsaG9zdDAKBggqhkjOPQQDAgNIADBFAiEAuiwUHiDbIriJIhG04PeofqIsNHF6
TBWqB4Htgvk6TlsCIFWjVUG/nlo25PtR8lzeAvdmDJ8HG+LIhSeR3E5QqcOg
-----END CERTIFICATE-----
`;
const KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgZkhpLuNNGrnEpOeJ
ClX7YAYIc6HKqJEdNe1Qv0mw8pKhRANCAAQeVKyuSYd6R2+umNmuryUJICtSM0tK
eXN6K2RMvOUDyeCEftEckcJkHK2gJ/HLegkAmVoBtFdxEh2WltM58srJ
-----END PRIVATE KEY-----
`;

describe('https:// supervisor', () => {
  let server: https.Server;
  let url: string;
  const seen: { auth: string | undefined }[] = [];
  before(async () => {
    server = https.createServer({ cert: CERT, key: KEY }, (req, res) => {
      seen.push({ auth: req.headers.authorization });
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ sandboxes: [] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('talks TLS to a supervisor whose certificate the given CA signed, with the token', async () => {
    assert.deepEqual(await Sandbox.list({ url, token: 'tok', ca: CERT }), []);
    assert.equal(seen.at(-1)?.auth, 'Bearer tok');
  });

  it('refuses a certificate no trusted CA signed, saying why', async () => {
    const before = seen.length;
    await assert.rejects(Sandbox.list({ url, token: 'tok', retry: false }), (e: unknown) => {
      assert.ok(e instanceof SupervisorUnavailableError, String(e));
      assert.match(e.message, /self-signed certificate/);
      return true;
    });
    assert.equal(seen.length, before, 'no request reached the server');
  });

  it('refuses a CA for a URL that is not https', async () => {
    await assert.rejects(Sandbox.list({ url: 'http://127.0.0.1:1', ca: CERT }), ConfigurationError);
  });
});
