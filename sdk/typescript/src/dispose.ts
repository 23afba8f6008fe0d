// `await using sbx = await Sandbox.create()` (TypeScript 5.2+, or JavaScript where the runtime has
// explicit resource management) looks up Symbol.asyncDispose. Node defines it from 18.18 and
// 20.4; on older runtimes it is set here to the registered symbol Node itself uses, so the
// Sandbox class and the code disposing it agree on the key.
if (typeof Symbol.asyncDispose !== 'symbol') {
  Object.defineProperty(Symbol, 'asyncDispose', { value: Symbol.for('nodejs.asyncDispose') });
}

export {};
