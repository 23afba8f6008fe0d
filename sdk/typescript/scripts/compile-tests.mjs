#!/usr/bin/env node
// Compiles the SDK and its tests into OUT_DIR (default build-test/) with the TypeScript that
// `npm ci` installed, so ctest can run `node --test OUT_DIR/test/<suite>/` with no npm in the
// loop. A missing node_modules is a failure that says how to fix it.

import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const sdkDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const outDir = resolve(process.argv[2] ?? join(sdkDir, 'build-test'));
const tsc = join(sdkDir, 'node_modules', 'typescript', 'bin', 'tsc');
const nodeTypes = join(sdkDir, 'node_modules', '@types', 'node', 'package.json');

if (!existsSync(tsc) || !existsSync(nodeTypes)) {
  console.error(
    `sdk/typescript: node_modules is missing (no ${existsSync(tsc) ? '@types/node' : 'typescript'}): ` +
      `run \`npm ci\` in sdk/typescript first, e.g. \`cd ${sdkDir} && npm ci\``,
  );
  process.exit(1);
}

const result = spawnSync(process.execPath, [tsc, '-p', join(sdkDir, 'tsconfig.test.json'), '--outDir', outDir], {
  stdio: 'inherit',
});
if (result.status !== 0) {
  console.error(`sdk/typescript: tsc failed (exit ${result.status ?? result.signal})`);
  process.exit(1);
}
console.log(`sdk/typescript: compiled the SDK and its tests into ${outDir}`);
