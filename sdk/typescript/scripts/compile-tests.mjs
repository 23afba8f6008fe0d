#!/usr/bin/env node
// Compiles the SDK and its tests into OUT_DIR (default build-test/) with the TypeScript that
// `npm ci` installed, so ctest can run `node --test OUT_DIR/test/<suite>/` with no npm in the
// loop. A missing node_modules is a failure that says how to fix it. OUT_DIR gets a link to the
// SDK's node_modules (its runtime dependency, undici, resolves from there) and a package.json
// marking the compiled files as ES modules, so it may live anywhere (ctest's build tree).

import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
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
const link = join(outDir, 'node_modules');
if (existsSync(link) || isLink(link)) rmSync(link, { recursive: false, force: true });
mkdirSync(outDir, { recursive: true });
if (resolve(outDir) !== sdkDir) symlinkSync(join(sdkDir, 'node_modules'), link, 'dir');
writeFileSync(join(outDir, 'package.json'), '{"type": "module"}\n');
console.log(`sdk/typescript: compiled the SDK and its tests into ${outDir}`);

function isLink(path) {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}
