// airlock Node.js prestart driver: a node process started ahead of its program, for the warm pool.
//
// Run as `node --expose-internals -e DRIVER -- MODULE...`. It require()s the MODULEs, then blocks
// on fd 0 for exactly one request: a decimal byte length, "\n", then that many bytes of JSON
// {"code": str | null, "path": str | null, "args": [str]}. It then runs the program as
// `node -e CODE -- ARGS...` or `node PATH ARGS...` would, in this process, with the rest of fd 0
// as process.stdin, and the process ends the way that node would.
//
// The driver goes through node's own entry points, reached with --expose-internals: `-e` code
// runs through internal/process/execution's evalScript() exactly as internal/main/eval_string
// calls it, a file through Module.runMain() as internal/main/run_main_module does. The process
// state that `-e` gave the driver itself (the [eval] globals, the built-in modules as globals,
// process._eval, execArgv) is set to what the program's own command line would give. Stack
// traces get node's bottom frames back: a prepare-stack-trace callback wrapped around node's
// own replaces the driver's frames (from the function named airlockPrestartProgram down) with
// the frame that native startup has there. Known differences are listed in docs/plugins.md
// ("Prestart drivers").
//
// The request is read with fs.readSync on fd 0, never through process.stdin, so no byte of the
// program's stdin is consumed or buffered. The source must not contain the word the `-e` entry
// point looks for to define the web-crypto global (hence the string pieces below): node would
// wrap this driver in a function.
'use strict';
{
  const fs = require('fs');
  const path = require('path');
  const Module = require('module');
  const {evalScript, evalModuleEntryPoint} = require('internal/process/execution');
  const {executeUserEntryPoint} = require('internal/modules/run_main');
  const {getOptionValue} = require('internal/options');
  const {prepareStackTraceCallback} = require('internal/errors');

  const emitWarning = process.emitWarning;
  const quietly = (fn) => {
    process.emitWarning = () => {};
    try {
      return fn();
    } finally {
      process.emitWarning = emitWarning;
    }
  };
  // internal/test/binding warns that it is for tests: not on this process's stderr.
  const {internalBinding, primordials} = quietly(() => require('internal/test/binding'));
  const {ArrayPrototypePush, ReflectApply, StringPrototypeIndexOf, StringPrototypeSplit} =
    primordials;

  const fail = (message) => {
    fs.writeSync(2, `airlock prestart: ${message}\n`);
    process.exit(2);
  };

  // --- stack traces ------------------------------------------------------------------------------

  // The driver's own call sites, down to the entry point that started it (eval_string).
  const callSites = () => {
    const limit = Error.stackTraceLimit;
    const prepare = Object.getOwnPropertyDescriptor(Error, 'prepareStackTrace');
    Error.stackTraceLimit = Infinity;
    Error.prepareStackTrace = (error, trace) => trace;
    const trace = new Error().stack;
    Error.stackTraceLimit = limit;
    if (prepare) Object.defineProperty(Error, 'prepareStackTrace', prepare);
    else delete Error.prepareStackTrace;
    return trace;
  };
  const outer = callSites();
  const siteProto = Object.getPrototypeOf(outer[0]);
  const getFunctionName = siteProto.getFunctionName;
  const getFileName = siteProto.getFileName;
  const evalStringSite = outer[outer.length - 1];  // node:internal/main/eval_string:L:C

  // A frame of node's run_main_module, which this process never ran: where it calls the entry
  // point, found in its source, as V8 would print it.
  const fakeSite = (file, line, column) => ({
    __proto__: null,
    getThis: () => undefined,
    getTypeName: () => null,
    getFunction: () => undefined,
    getFunctionName: () => null,
    getMethodName: () => null,
    getFileName: () => file,
    getLineNumber: () => line,
    getColumnNumber: () => column,
    getEvalOrigin: () => undefined,
    getScriptNameOrSourceURL: () => file,
    isToplevel: () => true,
    isEval: () => false,
    isNative: () => false,
    isConstructor: () => false,
    isAsync: () => false,
    isPromiseAll: () => false,
    getPromiseIndex: () => null,
    toString: () => `${file}:${line}:${column}`,
  });
  const runMainSite = (call) => {
    try {
      const id = 'internal/main/run_main_module';
      const source = quietly(() => process.binding('natives'))[id];
      const lines = StringPrototypeSplit(source, '\n');
      for (let i = 0; i < lines.length; i++) {
        const at = StringPrototypeIndexOf(lines[i], call);
        if (at >= 0) return fakeSite(`node:${id}`, i + 1, at + 1 + (call[0] === '.' ? 1 : 0));
      }
    } catch {
      // no such source in this node: the trace just ends one frame early
    }
    return null;
  };

  const kMark = 'airlockPrestartProgram';
  let tail = null;  // what replaces the driver's frames once the program runs
  internalBinding('errors').setPrepareStackTraceCallback((global, error, trace) => {
    if (tail !== null) {
      for (let k = 0; k < trace.length; k++) {
        const site = trace[k];
        if (ReflectApply(getFunctionName, site, []) === kMark &&
            ReflectApply(getFileName, site, []) === '[eval]') {
          const kept = [];
          for (let i = 0; i < k; i++) ArrayPrototypePush(kept, trace[i]);
          for (let i = 0; i < tail.length; i++) ArrayPrototypePush(kept, tail[i]);
          trace = kept;
          break;
        }
      }
    }
    return prepareStackTraceCallback(global, error, trace);
  });

  // --- preload -----------------------------------------------------------------------------------

  const modules = process.argv.slice(1);
  process.argv.splice(1);

  // Whatever the modules write while loading belongs to no program: fds 1 and 2 point at
  // /dev/null meanwhile (pipes, terminals and devices only; a file reopened through /proc would
  // start at offset 0). node cannot dup2: each is closed and reopened, and the lowest free
  // descriptor is the one just closed as long as fd 0 is open. Warnings are dropped.
  const silence = () => {
    const saved = [];
    const {O_WRONLY, O_NONBLOCK} = fs.constants;
    const reopen = (fd, from) => {
      if (fs.openSync(from, O_WRONLY) !== fd) fail(`lost fd ${fd} while preloading`);
    };
    try {
      fs.fstatSync(0);
    } catch {
      return () => {};
    }
    for (const fd of [1, 2]) {
      let copy;
      try {
        const st = fs.fstatSync(fd);
        if (!st.isFIFO() && !st.isCharacterDevice()) continue;
        // Non-blocking: a pipe nobody reads any more fails here instead of blocking the open.
        copy = fs.openSync(`/proc/self/fd/${fd}`, O_WRONLY | O_NONBLOCK);
      } catch {
        break;  // no /proc, or no reader: leave this and later descriptors alone
      }
      fs.closeSync(fd);
      const nul = fs.openSync('/dev/null', O_WRONLY);
      if (nul !== fd) {  // another thread took fd meanwhile: give up silencing
        fs.closeSync(nul);
        reopen(fd, `/proc/self/fd/${copy}`);
        fs.closeSync(copy);
        break;
      }
      saved.push([fd, copy]);
    }
    return () => {
      for (const [fd, copy] of saved) {
        fs.closeSync(fd);
        reopen(fd, `/proc/self/fd/${copy}`);
        fs.closeSync(copy);
      }
    };
  };
  if (modules.length > 0) {
    const restore = silence();
    quietly(() => {
      for (const name of modules) {
        try {
          require(name);
        } catch {
          // as if never tried: the program's own require() fails as it would natively
        }
      }
    });
    restore();
    process.exitCode = undefined;
  }

  // --- the request -------------------------------------------------------------------------------

  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  const read = (buffer, offset, length) => {
    for (;;) {
      try {
        return fs.readSync(0, buffer, offset, length, null);
      } catch (e) {
        if (e.code !== 'EAGAIN') fail(`cannot read the request: ${e.message}`);
        Atomics.wait(sleeper, 0, 0, 5);  // a non-blocking stdin: poll, leaving its flags alone
      }
    }
  };
  const byte = Buffer.alloc(1);
  let header = '';
  for (;;) {
    if (read(byte, 0, 1) === 0) {
      if (header !== '') fail('stdin ended inside the request header');
      process.exit(0);  // the pool let this process go before giving it a program
    }
    if (byte[0] === 0x0a) break;
    if (byte[0] < 0x30 || byte[0] > 0x39 || header.length >= 12) {
      fail('request header is not a decimal length and a newline');
    }
    header += String.fromCharCode(byte[0]);
  }
  if (header === '') fail('request header is not a decimal length and a newline');
  const body = Buffer.alloc(Number(header));
  for (let off = 0; off < body.length;) {
    const n = read(body, off, body.length - off);
    if (n === 0) fail(`stdin ended inside the request (${body.length - off} bytes missing)`);
    off += n;
  }
  let request;
  try {
    request = JSON.parse(new TextDecoder('utf-8', {fatal: true}).decode(body));
  } catch (e) {
    fail(`request is not JSON: ${e.message}`);
  }
  if (request === null || typeof request !== 'object' || Array.isArray(request)) {
    fail('request is not a JSON object');
  }
  const code = request.code ?? null;
  let file = request.path ?? null;
  const args = request.args ?? [];
  if ((code === null) === (file === null)) fail("request needs exactly one of 'code' and 'path'");
  if (typeof (code ?? file) !== 'string') fail("'code' and 'path' must be strings");
  if (file === '') fail("'path' is empty");
  if (!Array.isArray(args) || !args.every((a) => typeof a === 'string')) {
    fail("'args' must be a list of strings");
  }

  // --- the program -------------------------------------------------------------------------------

  process.exitCode = undefined;
  if (code !== null) {
    // `node -e CODE -- ARGS...`, as internal/main/eval_string runs it.
    process.argv.splice(1, process.argv.length, ...args);
    process.execArgv.splice(0, process.execArgv.length, '-e', code);
    Object.defineProperty(process, '_eval', {
      __proto__: null, value: code, writable: false, configurable: true, enumerable: true,
    });
    // What evalScript saves and puts back after the code: there, the `module` global is still
    // the lazy built-in module; here the driver's own [eval] module stands in it.
    globalThis.module = Module;
    tail = [evalStringSite];
    const defaultTypeModule = getOptionValue('--experimental-default-type') === 'module';
    const run = function airlockPrestartProgram() {
      if (getOptionValue('--input-type') === 'module' ||
          (defaultTypeModule && getOptionValue('--input-type') !== 'commonjs')) {
        evalModuleEntryPoint(code, getOptionValue('--print'));
        return;
      }
      const word = 'cryp' + 'to';
      const usesWord = getOptionValue('--experimental-global-web' + word) &&
        new RegExp(`\\b${word}\\b`).exec(code) !== null;
      const define = usesWord && internalBinding('config').hasOpenSSL;
      if (usesWord && !define) {
        const setReal = (val) => {
          delete globalThis[word];
          globalThis[word] = val;
        };
        Object.defineProperty(globalThis, word, {__proto__: null, set: setReal});
      }
      const print = getOptionValue('--print');
      const source = !define ? code :
        print ? `let ${word}=require("node:${word}");{${code}}` :
          `(${word}=>{{${code}}})(require('node:${word}'))`;
      evalScript('[eval]', source, getOptionValue('--inspect-brk'), print, false);
    };
    run();
  } else {
    // `node FILE ARGS...`, as internal/main/run_main_module runs it, once what `-e` gave the
    // driver is undone.
    delete process._eval;
    process.execArgv.splice(0, process.execArgv.length);
    if (file[0] === '-') file = `./${file}`;  // as the plugin passes it to a one-shot node
    const mainEntry = path.resolve(file);
    process.argv.splice(1, process.argv.length, mainEntry, ...args);
    const viaRunMain = getOptionValue('--experimental-default-type') !== 'module';
    const site = runMainSite(viaRunMain ? '.runMain(' : 'executeUserEntryPoint(');
    tail = site !== null ? [site] : [];
    // From the tick queue, not from here: an exception must not pass through the vm script
    // running this driver, which would prepend the source line to its stack.
    process.nextTick(function airlockPrestartProgram() {
      // The [eval] globals; evalScript put `module` back after the driver's script ended.
      for (const name of ['__filename', 'module', 'exports', '__dirname', 'require']) {
        delete globalThis[name];
      }
      for (const name of Module.builtinModules) {
        const d = Object.getOwnPropertyDescriptor(globalThis, name);
        if (d !== undefined && d.set !== undefined && d.set.name === 'setReal') {
          delete globalThis[name];  // a built-in module as a lazy global, as -e and the REPL have
        }
      }
      /^/.exec('');  // resets the RegExp statics, as run_main_module does
      if (viaRunMain) Module.runMain(mainEntry);
      else executeUserEntryPoint(mainEntry);
    });
  }
}
