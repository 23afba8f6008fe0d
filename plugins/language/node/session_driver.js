// airlock Node.js session driver: one long-lived node process per code context.
//
// Requests arrive on stdin, one JSON object per line: {"id": "r1", "code": "...", "timeout_ms":
// 30000}. Events go to the control pipe (fd 3 at start), one JSON object per line: "ready" once,
// then per request any number of "result" and "error" events and exactly one "done". The code's
// own output goes to fds 1 and 2. Embedded into the node language plugin and run as
// `node --expose-internals -e`.
//
// Cells run in the main context (vm.Script#runInThisContext), as the REPL does with useGlobal:
// var/function declarations land on globalThis and let/const/class in the global lexical scope,
// so all of them persist; values the code gets from require()d modules belong to the same realm,
// so `instanceof Array` and friends keep working (a separate vm context would break them).
// Top-level await goes through the REPL's own rewriter (internal/repl/await, hence
// --expose-internals), which hoists declarations and returns the last expression's value.
'use strict';
{
  const fs = require('fs');
  const vm = require('vm');
  const util = require('util');
  const net = require('net');
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const hrtime = process.hrtime.bigint;

  // process.stdout and process.stderr become plain synchronous writers to fds 1 and 2. Node's
  // own pipe streams keep state in JS: a run interrupted (timeout, SIGINT) in the middle of a
  // console.log leaves them "writing" forever and the context mute; these have nothing to
  // corrupt. Writes also reach the pipe before the driver reports done, with no flushing.
  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  const writeAll = (fd, data) => {
    for (let off = 0; off < data.length;) {
      try {
        off += fs.writeSync(fd, data, off);
      } catch (e) {
        if (e.code === 'EPIPE') return;  // nobody reads the output any more
        if (e.code !== 'EAGAIN') throw e;
        Atomics.wait(sleeper, 0, 0, 1);  // a non-blocking pipe is full: wait for the reader
      }
    }
  };
  const {Writable} = require('stream');
  for (const [name, fd] of [['stdout', 1], ['stderr', 2]]) {
    const stream = new Writable({
      write(chunk, encoding, callback) {
        writeAll(fd, chunk);
        callback();
      },
    });
    stream.write = (chunk, encoding, callback) => {
      if (typeof encoding === 'function') [callback, encoding] = [encoding, undefined];
      writeAll(fd, typeof chunk === 'string' ? Buffer.from(chunk, encoding || 'utf8') : chunk);
      if (typeof callback === 'function') process.nextTick(callback);
      return true;
    };
    stream.fd = fd;
    Object.defineProperty(process, name, {configurable: true, enumerable: true, value: stream});
  }

  // The command stream and the control pipe move to private close-on-exec fds (reopened through
  // /proc: node has no dup), so neither the code nor its subprocesses can read requests or write
  // events; fd 0 becomes /dev/null so child processes see EOF instead of the next request.
  let commandFd = 0;
  let controlFd = 3;
  try {
    commandFd = fs.openSync('/proc/self/fd/0', fs.constants.O_RDONLY);
    controlFd = fs.openSync('/proc/self/fd/3', fs.constants.O_WRONLY);
    fs.closeSync(3);
    fs.closeSync(0);
    const nullFd = fs.openSync('/dev/null', fs.constants.O_RDONLY);  // lowest free fd: 0
    if (nullFd !== 0) throw new Error(`/dev/null opened as fd ${nullFd}, not 0`);
  } catch (e) {
    process.stderr.write(`airlock: session driver cannot hide its pipes: ${e.message}\n`);
  }

  const emit = (event) => {
    const line = stringify(event, (k, v) =>
      typeof v === 'string' && v.toWellFormed ? v.toWellFormed() : v) + '\n';
    const data = Buffer.from(line);
    for (let off = 0; off < data.length;) off += fs.writeSync(controlFd, data, off);
  };

  // Loaded on the first code mentioning await: it brings acorn, a third of the start time.
  let processTopLevelAwait;
  const topLevelAwait = () => {
    if (processTopLevelAwait === undefined) {
      try {
        ({processTopLevelAwait} = require('internal/repl/await'));
      } catch {
        // Without it, code using await runs in an async function: no declarations persist from
        // it and there is no last-expression value.
        processTopLevelAwait = null;
      }
    }
    return processTopLevelAwait;
  };
  // import() in cells, resolved like the main script's. Node 20 calls it experimental and warns
  // on first use; the warning is about the driver's choice, not the code, so it is dropped.
  const importModuleDynamically = vm.constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER;
  if (importModuleDynamically) {
    const emitWarning = process.emitWarning;
    process.emitWarning = function(warning, ...rest) {
      if (String(warning?.message ?? warning).includes('USE_MAIN_CONTEXT_DEFAULT_LOADER')) return;
      return emitWarning.call(this, warning, ...rest);
    };
  }

  const compile = (code, filename) => {
    const options = {filename};
    if (importModuleDynamically) options.importModuleDynamically = importModuleDynamically;
    if (code.includes('await')) {
      let wrapped = null;
      try {
        wrapped = topLevelAwait() ? processTopLevelAwait(code) : `(async () => {\n${code}\n})()`;
      } catch {
        // A syntax error: compiling the original below reports it.
      }
      if (wrapped !== null) return {script: new vm.Script(wrapped, options), awaited: true};
    }
    // `{a: 1}` is an object, not a block, as in the REPL.
    if (/^\s*{/.test(code) && !/;\s*$/.test(code)) {
      try {
        return {script: new vm.Script(`(${code.trim()})\n`, options), awaited: false};
      } catch {
        // Not an expression after all.
      }
    }
    return {script: new vm.Script(code, options), awaited: false};
  };

  // The run waiting for a promise, interruptible by SIGINT or its deadline.
  let pending = null;
  const interruption = (message, code) => {
    const e = new Error(message);
    e.code = code;
    e.stack = `Error [${code}]: ${message}`;
    return e;
  };
  const sigintInterruption = () => interruption('Script execution was interrupted by `SIGINT`',
                                                 'ERR_SCRIPT_EXECUTION_INTERRUPTED');
  // SIGINT. vm's breakOnSigint starts node's SIGINT watchdog for each script and stops it
  // afterwards, and around that removes and restores process 'SIGINT' listeners: in between,
  // SIGINT has its default action and a well-timed one ends the process. Started once here
  // (as the REPL does before each eval) the watchdog stays up for good: its handler owns SIGINT,
  // the per-script start/stop only nest inside, and a SIGINT outside a script is recorded, not
  // fatal. Awaiting runs poll that record. Without the binding, a process listener does it.
  let sigintPending = null;  // () => whether a SIGINT came since the last call
  try {
    const contextify = process.binding('contextify');
    if (contextify.startSigintWatchdog()) {
      sigintPending = () => {
        contextify.startSigintWatchdog();
        return contextify.stopSigintWatchdog();  // a nested stop: reads and clears the record
      };
    }
  } catch {
  }
  if (!sigintPending) {
    process.on('SIGINT', () => {
      if (pending) pending.reject(sigintInterruption());
    });
  }

  const traceback = (stack) => {
    const lines = String(stack).split('\n');
    // The first frame of the driver (or of vm calling into the cell) and everything below it.
    const cut = lines.findIndex((l, i) => i > 0 && /^\s+at /.test(l) &&
                                          (l.includes('node:vm:') || l.includes('[eval]')));
    return cut < 0 ? lines : lines.slice(0, cut);
  };

  // Errors from work the code left running must not end the context.
  const report = (what) => (e) => {
    try {
      const text = e instanceof Error && typeof e.stack === 'string' ?
          traceback(e.stack).join('\n') : util.inspect(e);
      process.stderr.write(`${what}: ${text}\n`);
    } catch {
    }
  };
  process.on('uncaughtException', report('Uncaught'));
  process.on('unhandledRejection', report('Unhandled promise rejection'));

  const isInterrupt = (e) => e && (e.code === 'ERR_SCRIPT_EXECUTION_TIMEOUT' ||
                                   e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED');

  const settle = (promise, deadline, timeoutMs) => new Promise((resolve, reject) => {
    let timer = null;
    let poll = null;
    const done = (fn) => (v) => {
      if (timer) clearTimeout(timer);
      if (poll) clearInterval(poll);
      pending = null;
      fn(v);
    };
    pending = {reject: done(reject)};
    if (sigintPending) {
      sigintPending();  // one that came before the promise is not for it
      poll = setInterval(() => sigintPending() && pending && pending.reject(sigintInterruption()),
                         20);
    }
    if (deadline !== undefined) {
      const ms = Math.max(0, Number(deadline - hrtime()) / 1e6);
      timer = setTimeout(() => pending && pending.reject(interruption(
          `Script execution timed out after ${timeoutMs}ms`,
          'ERR_SCRIPT_EXECUTION_TIMEOUT')), ms);
    }
    Promise.resolve(promise).then(done(resolve), done(reject));
  });

  const isThenable = (v) => v !== null && (typeof v === 'object' || typeof v === 'function') &&
                            typeof v.then === 'function';

  const errorEvent = (id, e) => {
    if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e && 'message' in e)) {
      let stack;
      try {
        stack = typeof e.stack === 'string' ? e.stack : `${e.name}: ${e.message}`;
      } catch {
        stack = String(e.message);
      }
      return {type: 'error', id, name: String(e.name), value: String(e.message),
              traceback: traceback(stack)};
    }
    const value = util.inspect(e);
    return {type: 'error', id, name: 'Uncaught', value, traceback: [`Uncaught ${value}`]};
  };

  let runs = 0;
  const finish = (id, status, events, started) => {
    for (const event of events) emit(event);
    const ms = Number(hrtime() - started) / 1e6;
    emit({type: 'done', id, status, duration_ms: Math.round(ms * 1000) / 1000});
  };

  const run = async (id, code, timeoutMs) => {
    const events = [];
    let status = 'ok';
    const started = hrtime();
    const deadline = timeoutMs ? started + BigInt(Math.round(timeoutMs * 1e6)) : undefined;
    const state = {finished: false, awaiting: false};
    // node's watchdogs (timeout, breakOnSigint) terminate whatever JS runs next: an interrupt
    // landing just as the script ends cuts short the driver's own code after it, this function
    // and its callers included. One loop turn later this finishes such a run as interrupted and
    // restarts the queue, so every request still gets its done event.
    setImmediate(() => {
      if (state.finished || state.awaiting) return;
      state.finished = true;
      pending = null;
      finish(id, 'interrupted', [errorEvent(id, interruption(
          'Script execution was interrupted', 'ERR_SCRIPT_EXECUTION_INTERRUPTED'))], started);
      busy = false;
      drain();
    });
    try {
      const {script, awaited} = compile(code, `<cell-${++runs}>`);
      const options = {displayErrors: false, breakOnSigint: true};
      if (timeoutMs) options.timeout = Math.min(Math.max(1, Math.ceil(timeoutMs)), 2 ** 31);
      let value = script.runInThisContext(options);
      if (awaited) {
        state.awaiting = true;
        value = await settle(value, deadline, timeoutMs);
        if (processTopLevelAwait) value = value?.value;
      }
      if (isThenable(value)) {
        state.awaiting = true;
        value = await settle(value, deadline, timeoutMs);
      }
      if (value !== undefined) {
        events.push({type: 'result', id, data: {'text/plain': util.inspect(value)}});
      }
    } catch (e) {
      status = isInterrupt(e) ? 'interrupted' : 'error';
      events.push(errorEvent(id, e));
    }
    if (state.finished) return;
    state.finished = true;
    finish(id, status, events, started);
  };

  const badRequest = (id, message) => {
    emit({type: 'error', id, name: 'RequestError', value: message,
          traceback: [`RequestError: ${message}`]});
    emit({type: 'done', id, status: 'error', duration_ms: 0});
  };

  const handle = async (line) => {
    let request;
    try {
      request = parse(line);
    } catch (e) {
      return badRequest(null, `request is not JSON: ${e.message}`);
    }
    if (request === null || typeof request !== 'object' || Array.isArray(request)) {
      return badRequest(null, 'request is not a JSON object');
    }
    const id = request.id;
    if (typeof id !== 'string') return badRequest(null, "request has no string 'id'");
    if (typeof request.code !== 'string') {
      return badRequest(id, `request '${id}' has no string 'code'`);
    }
    const timeoutMs = request.timeout_ms;
    if (timeoutMs !== undefined && timeoutMs !== null &&
        !(typeof timeoutMs === 'number' && timeoutMs > 0 && Number.isFinite(timeoutMs))) {
      return badRequest(id, `request '${id}': 'timeout_ms' must be a positive number`);
    }
    // env: process.env for this run only; what it replaced comes back after the run.
    const env = request.env ?? {};
    if (typeof env !== 'object' || Array.isArray(env) ||
        !Object.values(env).every((v) => typeof v === 'string')) {
      return badRequest(id, `request '${id}': 'env' must map variable names to strings`);
    }
    const saved = Object.keys(env).map((k) => [k, Object.hasOwn(process.env, k), process.env[k]]);
    Object.assign(process.env, env);
    try {
      await run(id, request.code, timeoutMs || 0);
    } finally {
      for (const [k, had, old] of saved) {
        if (had) process.env[k] = old;
        else delete process.env[k];
      }
    }
  };

  // One request at a time, in order; a run awaiting a promise holds the next one back.
  const queue = [];
  let busy = false;
  let ended = false;  // the supervisor closed the command stream: finish what is queued, exit
  const drain = async () => {
    if (busy) return;
    busy = true;
    try {
      while (queue.length) {
        const line = queue.shift();
        try {
          await handle(line);
        } catch (e) {
          if (e && e.code === 'EPIPE') process.exit(0);  // the supervisor ended the context
          report('airlock session driver')(e);
        }
      }
    } finally {
      busy = false;
    }
    if (ended) process.exit(0);
  };

  const stat = fs.fstatSync(commandFd);
  const commands = stat.isFIFO() || stat.isSocket() ?
      new net.Socket({fd: commandFd, readable: true, writable: false}) :
      fs.createReadStream(null, {fd: commandFd});  // a file: tests, or a replayed session
  commands.setEncoding('utf8');
  let partial = '';
  commands.on('data', (chunk) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop();
    for (const line of lines) {
      if (line.trim()) queue.push(line);
    }
    drain();
  });
  commands.on('end', () => {
    ended = true;
    if (!busy) drain();
  });
  commands.on('error', (e) => {
    report('airlock session driver: command stream')(e);
    process.exit(1);
  });

  emit({type: 'ready', language: 'node', version: process.versions.node});
}
