// The execution's audit summary (docs/audit.md, docs/api.md "Audit"): carried by the `end` (code)
// and `exit` (command) event when the sandbox's profile audits.

import { isObject, num, objects, optStr, str, type JsonObject } from './json.js';

/** One distinct connection attempt, with the rule that decided it. */
export interface AuditConnection {
  /** "allow" or "deny". */
  verdict: string;
  protocol: string;
  address: string;
  port: number;
  /** "rule:2", "loopback", "protected:10.0.0.0/8", "mode:none", ... */
  rule: string;
  ruleText: string;
  count: number;
}

export interface AuditProcess {
  nsPid: number;
  path: string;
  argv: string[];
}

export interface AuditSummary {
  /** The execution's id in the audit log (`airlock audit query --execution`). */
  execution: string | null;
  processesStarted: number;
  processes: AuditProcess[];
  connectionsAllowed: number;
  connectionsDenied: number;
  connections: AuditConnection[];
  bytesSent: number;
  bytesReceived: number;
  eventsDropped: number;
  /** Events were dropped and the profile fails closed: the execution failed. */
  failed: boolean;
  /** The rule that refused the first refused connection, as a sentence; null when none was. */
  firstDenial: string | null;
  /** Why this execution has no summary of its own (another one of the sandbox was audited). */
  skipped: string | null;
  /** The object as sent, unknown fields included. */
  raw: JsonObject;
}

export function parseAudit(o: JsonObject): AuditSummary {
  return {
    execution: optStr(o, 'execution'),
    processesStarted: num(o, 'processes_started'),
    processes: objects(o, 'processes').map((p) => ({
      nsPid: num(p, 'ns_pid'),
      path: str(p, 'path'),
      argv: Array.isArray(p['argv']) ? p['argv'].filter((a): a is string => typeof a === 'string') : [],
    })),
    connectionsAllowed: num(o, 'connections_allowed'),
    connectionsDenied: num(o, 'connections_denied'),
    connections: objects(o, 'connections').map((c) => ({
      verdict: str(c, 'verdict'),
      protocol: str(c, 'protocol'),
      address: str(c, 'address'),
      port: num(c, 'port'),
      rule: str(c, 'rule'),
      ruleText: str(c, 'rule_text'),
      count: num(c, 'count'),
    })),
    bytesSent: num(o, 'bytes_sent'),
    bytesReceived: num(o, 'bytes_received'),
    eventsDropped: num(o, 'events_dropped'),
    failed: o['failed'] === true,
    firstDenial: optStr(o, 'first_denial') || null,
    skipped: optStr(o, 'skipped'),
    raw: o,
  };
}

/** The audit summary of a run's last event; null when the profile audits nothing. */
export function optAudit(o: JsonObject, key = 'audit'): AuditSummary | null {
  const value = o[key];
  return isObject(value) ? parseAudit(value) : null;
}
