// The SDK's types checked field by field against the supervisor's API description,
// supervisor/api/openapi.json (what `GET /v1/openapi.json` serves), so the two cannot drift:
//
// - answers: a document with every property of a schema set is parsed by the SDK's parser, and
//   every property must come out under its camelCase name (or the rename listed here) with its
//   value; every field of the parsed type must come from a property, or be listed as the SDK's
//   own (aliases, `raw`);
// - requests: every SDK option is set, and each key the SDK sends must be a property of the
//   request's schema; every property must be sent by some option, or be listed as unused.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { Execution, Sandbox } from '../../src/index.js';
import {
  parseCommandInfo,
  parseContext,
  parseEntry,
  parseExit,
  parseMount,
  parseSandboxInfo,
  parseSandboxMetrics,
  parseTransfer,
} from '../../src/models.js';
import { FakeSupervisor, sandboxDoc, sendCreated, sendJson, sendNdjson, type RecordedRequest } from '../support/fake-supervisor.js';

interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  $ref?: string;
  items?: Schema;
}

function openapiPath(): string {
  const candidates = [
    process.env['AIRLOCK_OPENAPI'],
    resolve(process.cwd(), '../../supervisor/api/openapi.json'),
    resolve(process.cwd(), 'supervisor/api/openapi.json'),
  ].filter((p): p is string => p !== undefined);
  const found = candidates.find((p) => existsSync(p));
  if (found === undefined) throw new Error(`openapi.json not found; tried ${candidates.join(', ')} (set AIRLOCK_OPENAPI)`);
  return found;
}

const spec = JSON.parse(readFileSync(openapiPath(), 'utf8')) as {
  components: { schemas: Record<string, Schema> };
  paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: Schema }> } }>>;
};

function properties(schema: Schema | string): Record<string, Schema> {
  const s = typeof schema === 'string' ? spec.components.schemas[schema] : schema;
  assert.ok(s?.properties, `schema ${JSON.stringify(schema)} has no properties in openapi.json`);
  return s.properties;
}

function requestSchema(path: string, method: string): Schema {
  const body = spec.paths[path]?.[method]?.requestBody?.content['application/json']?.schema;
  assert.ok(body, `openapi.json has no JSON request body for ${method.toUpperCase()} ${path}`);
  return body.$ref ? spec.components.schemas[body.$ref.split('/').pop()!]! : body;
}

/** Fields the description may not name yet: schema -> properties (none today). */
const PENDING: Record<string, string[]> = {};

const camel = (name: string): string => name.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());

/** A value of the property's type, distinct per property so that a mix-up shows. */
function sample(name: string, schema: Schema, i: number): unknown {
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
  if (schema.items?.$ref?.endsWith('/Mount')) return [{ source: 'hostdir:data', path: '/mnt/data', writable: true }];
  if (schema.$ref?.endsWith('/Review') || name === 'review') return { verdict: 'allow', reviewer: 'r', rule: 'x' };
  switch (type) {
    case 'string':
      return name === 'type' ? 'dir' : `${name}-${i}`;
    case 'integer':
    case 'number':
      return 1000 + i;
    case 'boolean':
      return true;
    case 'array':
      return name === 'argv' ? ['sleep', '9'] : [];
    case 'object':
      return name === 'metadata' ? { k: 'v' } : {};
    default:
      return `${name}-${i}`;
  }
}

function documentOf(schemaName: string): Record<string, unknown> {
  const doc: Record<string, unknown> = {};
  Object.entries(properties(schemaName)).forEach(([name, schema], i) => (doc[name] = sample(name, schema, i)));
  return doc;
}

/** The parsed value `field` should hold for the wire value `value`. */
function expected(wire: string, value: unknown): unknown {
  if (wire.endsWith('_at') || wire === 'mtime_ms') return new Date(value as number);
  return value;
}

/**
 * Checks one answer schema against its parser: every property surfaces (under `renames[prop]`
 * or its camelCase name), and every parsed field is a property's or listed in `own`.
 */
function checkAnswer(
  schemaName: string,
  parse: (o: Record<string, unknown>) => object,
  renames: Record<string, string | string[]>,
  own: string[],
  compare: (field: string, got: unknown, wire: string, value: unknown) => void = (field, got, wire, value) =>
    assert.deepEqual(got, expected(wire, value), `${schemaName}.${wire} -> ${field}`),
): void {
  const doc = documentOf(schemaName);
  const parsed = parse(doc) as Record<string, unknown>;
  const fromSchema = new Set<string>();
  for (const [wire, value] of Object.entries(doc)) {
    const fields = [renames[wire] ?? camel(wire)].flat();
    for (const field of fields) {
      assert.ok(field in parsed, `${schemaName}.${wire} is not read by the SDK (expected a field '${field}')`);
      compare(field, parsed[field], wire, value);
      fromSchema.add(field);
    }
  }
  const pending = (PENDING[schemaName] ?? []).filter((p) => !(p in doc)).map((p) => [renames[p] ?? camel(p)].flat()).flat();
  for (const field of Object.keys(parsed)) {
    assert.ok(
      fromSchema.has(field) || own.includes(field) || pending.includes(field),
      `${schemaName}: the SDK's field '${field}' matches no property of the schema in openapi.json`,
    );
  }
}

describe('contract with openapi.json', () => {
  it('Sandbox answers', () => {
    checkAnswer('Sandbox', parseSandboxInfo, { keep_alive_s: ['keepAliveS', 'keepAlive'], lifetime_s: ['lifetimeS', 'lifetime'] }, [
      'sandboxId',
      'raw',
    ], (field, got, wire, value) => {
      if (wire === 'mounts') assert.deepEqual(got, [{ source: 'hostdir:data', path: '/mnt/data', writable: true }]);
      else assert.deepEqual(got, expected(wire, value), `Sandbox.${wire} -> ${field}`);
    });
  });

  it('SandboxMetrics answers', () => {
    checkAnswer('SandboxMetrics', parseSandboxMetrics, {}, ['raw'], (field, got, wire, value) => {
      // sampled_at is RFC 3339 text, read into a Date (the sample value is no real date).
      if (wire === 'sampled_at') assert.ok(got === null || got instanceof Date, `SandboxMetrics.sampled_at -> ${field}`);
      else assert.deepEqual(got, value, `SandboxMetrics.${wire} -> ${field}`);
    });
  });

  it('Context, Command, FileEntry, Mount and Transfer answers', () => {
    checkAnswer('Context', parseContext, { context_id: 'id' }, ['raw']);
    checkAnswer('Command', parseCommandInfo, { command_id: ['id', 'commandId'] }, ['raw']);
    checkAnswer('FileEntry', (o) => parseEntry(o), { mtime_ms: 'modifiedTime' }, ['raw']);
    checkAnswer('Mount', parseMount, {}, []);
    checkAnswer('Transfer', parseTransfer, {}, ['raw'], (field, got, wire, value) => {
      if (wire === 'review') assert.equal((got as { verdict: string } | null)?.verdict, 'allow');
      else assert.deepEqual(got, value, `Transfer.${wire} -> ${field}`);
    });
  });

  it('CommandResult: the exit event read into CommandResult', () => {
    const renames: Record<string, string> = { stdout_base64: 'stdout', stderr_base64: 'stderr' };
    const doc = documentOf('CommandResult');
    const result = parseExit(doc, { stdout: 'o', stderr: 'e', commandId: 'c', pid: 1, errors: [] }) as unknown as Record<string, unknown>;
    for (const wire of Object.keys(doc)) {
      const field = renames[wire] ?? camel(wire);
      assert.ok(field in result, `CommandResult.${wire} is not read by the SDK (expected '${field}')`);
    }
  });

  it('CodeResult: every property has a home in Execution', () => {
    const homes: Record<string, string> = {
      status: 'status',
      stdout: 'logs',
      stdout_base64: 'logs',
      stderr: 'logs',
      stderr_base64: 'logs',
      results: 'results',
      error: 'error',
      duration_ms: 'durationMs',
      context_id: 'contextId',
      context_restarted: 'contextRestarted',
      audit: 'audit',
      execution_count: 'executionCount',
    };
    const execution = new Execution() as unknown as Record<string, unknown>;
    for (const wire of [...Object.keys(properties('CodeResult')), ...(PENDING['CodeResult'] ?? [])]) {
      const home = homes[wire];
      assert.ok(home !== undefined, `CodeResult.${wire} is new in openapi.json: give it a field in Execution`);
      assert.ok(home in execution, `Execution has no field '${home}' for CodeResult.${wire}`);
    }
  });

  describe('requests', () => {
    let fake: FakeSupervisor;
    let sbx: Sandbox;
    const SB = '/v1/sandboxes/3f2a9c0d1e4b5a67';
    before(async () => {
      fake = await FakeSupervisor.start();
      fake.on('POST', '/v1/sandboxes', (req, res) => sendCreated(req, res));
      fake.on('POST', `${SB}/code`, (_req, res) => sendNdjson(res, [{ type: 'end', status: 'ok' }]));
      fake.on('POST', `${SB}/commands`, (req, res) =>
        req.json.background ? sendJson(res, 201, { command_id: 'c1', pid: 2 }) : sendNdjson(res, [{ type: 'exit', exit_code: 0 }]),
      );
      fake.on('POST', `${SB}/contexts`, (_req, res) => sendJson(res, 201, { context_id: 'x', language: 'python' }));
      fake.on('POST', `${SB}/keepalive`, (_req, res) => sendJson(res, 200, sandboxDoc()));
      fake.on('POST', `${SB}/transfers`, (_req, res) => sendNdjson(res, [{ type: 'transfer', id: 't', status: 'ok' }]));
    });
    after(() => fake.close());

    /** Keys sent over all the given requests must be properties; properties unsent must be listed. */
    function checkRequest(what: string, schema: Schema | string, sent: RecordedRequest[], unused: string[] = []): void {
      const props = Object.keys(properties(schema));
      const pending = PENDING[what] ?? [];
      const keys = new Set(sent.flatMap((r) => Object.keys(r.json ?? {})));
      for (const key of keys) {
        assert.ok(
          props.includes(key) || pending.includes(key),
          `${what}: the SDK sends '${key}', which openapi.json does not describe`,
        );
      }
      for (const prop of props) {
        assert.ok(keys.has(prop) || unused.includes(prop), `${what}: openapi.json describes '${prop}', which no SDK option sends`);
      }
    }

    it('POST /v1/sandboxes (SandboxSpec)', async () => {
      sbx = await Sandbox.create({
        url: fake.url,
        profile: 'p',
        language: 'python',
        name: 'n',
        envs: { A: 'b' },
        metadata: { k: 'v' },
        keepAlive: 60,
        lifetime: 120,
        persistent: true,
        mounts: ['hostdir:data'],
        isolation: 'gvisor',
      });
      checkRequest('SandboxSpec', 'SandboxSpec', [fake.last('POST', '/v1/sandboxes')]);
    });

    it('POST .../code (CodeSpec), .../contexts, .../keepalive', async () => {
      await sbx.runCode('1', { language: 'python', context: 'ctx', timeout: 5, envs: { A: 'b' } });
      checkRequest('CodeSpec', 'CodeSpec', [fake.last('POST', `${SB}/code`)]);
      await sbx.createCodeContext({ language: 'python', cwd: '/tmp' });
      const contexts = '/v1/sandboxes/{sb}/contexts';
      checkRequest(`POST ${contexts}`, requestSchema(contexts, 'post'), [fake.last('POST', `${SB}/contexts`)]);
      await sbx.setTimeout(60, { lifetime: 600 });
      checkRequest('keepalive', requestSchema('/v1/sandboxes/{sb}/keepalive', 'post'), [fake.last('POST', `${SB}/keepalive`)]);
    });

    it('POST .../commands (CommandSpec), .../transfers (TransferSpec)', async () => {
      await sbx.commands.run('echo', { envs: { A: 'b' }, cwd: '/tmp', stdin: 'in', timeout: 5 });
      await sbx.commands.run(['cat'], { stdin: Buffer.from([1]), background: true });
      const commands = fake.requests.filter((r) => r.method === 'POST' && r.path === `${SB}/commands`);
      // The SDK reads every command as a stream of events: it never asks for the one-document answer.
      checkRequest('CommandSpec', 'CommandSpec', commands, ['stream']);
      await sbx.transferIn('https://example.com/a.tar.gz', '/home/user/in');
      await sbx.transferOut('hostdir:out/a.tar.gz', '/home/user/in');
      const transfers = fake.requests.filter((r) => r.method === 'POST' && r.path === `${SB}/transfers`);
      checkRequest('TransferSpec', 'TransferSpec', transfers, ['stream']);
    });
  });
});
