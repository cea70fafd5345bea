#!/usr/bin/env node
// Where the suite's time goes, from the JSON report `vitest run` writes (vitest.config.ts: reporters 'json').
//   node scripts/test-times.mjs [REPORT] [--top N]
// Prints the run's wall time, each package's total (the sum of its files' durations: files run side by side, so
// the totals add up to more than the wall time), the slowest files and the N slowest tests (20 by default).
import { readFileSync } from 'node:fs';
import { relative, resolve } from 'node:path';

const args = process.argv.slice(2);
const topAt = args.indexOf('--top');
const top = topAt >= 0 ? Number(args.splice(topAt, 2)[1]) : 20;
const reportPath = args[0] ?? 'node_modules/.cache/oar/vitest-results.json';
const report = JSON.parse(readFileSync(reportPath, 'utf8'));
const root = resolve(import.meta.dirname, '..');

/** `packages/cli`, `examples/business-cli`, … : the first two segments of a test file's path. */
const packageOf = (file) => file.split('/').slice(0, 2).join('/');
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;
const pad = (text, width) => String(text).padEnd(width);

const files = report.testResults.map((result) => ({
  file: relative(root, result.name),
  ms: result.endTime - result.startTime,
  tests: result.assertionResults,
}));
const first = Math.min(...report.testResults.map((r) => r.startTime));
const last = Math.max(...report.testResults.map((r) => r.endTime));

console.log(
  `${report.numTotalTests} tests (${report.numPassedTests} passed, ${report.numFailedTests} failed, ` +
    `${report.numPendingTests + report.numTodoTests} skipped) in ${files.length} files; ` +
    `first file start to last file end: ${seconds(last - first)}`,
);

const packages = new Map();
for (const { file, ms, tests } of files) {
  const entry = packages.get(packageOf(file)) ?? { ms: 0, files: 0, tests: 0 };
  entry.ms += ms;
  entry.files += 1;
  entry.tests += tests.length;
  packages.set(packageOf(file), entry);
}
console.log('\nper package (sum of file durations):');
for (const [name, entry] of [...packages].sort((a, b) => b[1].ms - a[1].ms)) {
  console.log(`  ${pad(name, 34)} ${pad(seconds(entry.ms), 10)} ${entry.files} files, ${entry.tests} tests`);
}

console.log(`\n${top} slowest files:`);
for (const { file, ms, tests } of [...files].sort((a, b) => b.ms - a.ms).slice(0, top)) {
  console.log(`  ${pad(seconds(ms), 9)} ${file} (${tests.length} tests)`);
}

console.log(`\n${top} slowest tests:`);
const tests = files.flatMap(({ file, tests }) => tests.map((t) => ({ file, name: t.fullName, ms: t.duration ?? 0 })));
for (const { file, name, ms } of tests.sort((a, b) => b.ms - a.ms).slice(0, top)) {
  console.log(`  ${pad(seconds(ms), 9)} ${file} > ${name}`);
}
