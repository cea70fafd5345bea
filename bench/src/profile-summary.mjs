// Summarises a V8 .cpuprofile (node --cpu-prof): self time by function and by file/package, and inclusive
// (total) time by function, each sample counted once per function on its stack (recursion not double-counted).
//   node src/profile-summary.mjs <file.cpuprofile> [top=30] [filter]
// `filter` keeps only the inclusive rows whose label contains it (e.g. "runtime/dist"). On a busy machine set
// SAMPLES=1: each sample then counts as one sampling interval (the median delta), not its own delta, so a sample
// taken late (the thread was descheduled) is not charged the wait: closer to CPU time than to wall time.
import { readFileSync } from 'node:fs';

const [file, topArg, filter] = process.argv.slice(2);
if (!file) {
  process.stderr.write('usage: node profile-summary.mjs <file.cpuprofile> [top] [filter]\n');
  process.exit(2);
}
const top = Number(topArg ?? 30);
const profile = JSON.parse(readFileSync(file, 'utf8'));
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

const short = (url) =>
  url
    .replace(/^file:\/\//, '')
    .replace(/.*\/node_modules\//, 'nm:')
    .replace(/.*\/packages\//, '')
    .replace(/.*\/bench\//, 'bench/');
const label = (n) => {
  const f = n.callFrame;
  return `${f.functionName || '(anonymous)'} ${f.url ? `${short(f.url)}:${f.lineNumber + 1}` : ''}`.trim();
};
const fileOf = (n) => {
  const url = n.callFrame.url;
  if (!url) return n.callFrame.functionName; // (program), (garbage collector), (idle), natives
  const s = short(url);
  return s.startsWith('nm:')
    ? s
        .split('/')
        .slice(0, s.startsWith('nm:@') ? 2 : 1)
        .join('/')
    : s;
};

const self = new Map();
const selfFile = new Map();
const total = new Map();
let all = 0;
let idle = 0;
const { samples, timeDeltas } = profile;
const interval = [...timeDeltas].sort((a, b) => a - b)[timeDeltas.length >> 1] / 1000;
for (let i = 0; i < samples.length; i++) {
  // ms; a sample's time is the delta to the next (or one interval each, SAMPLES=1)
  const dt = process.env.SAMPLES === '1' ? interval : (timeDeltas[i + 1] ?? timeDeltas[i] ?? 0) / 1000;
  const node = nodes.get(samples[i]);
  if (node.callFrame.functionName === '(idle)') {
    idle += dt;
    continue;
  }
  all += dt;
  self.set(label(node), (self.get(label(node)) ?? 0) + dt);
  selfFile.set(fileOf(node), (selfFile.get(fileOf(node)) ?? 0) + dt);
  const seen = new Set();
  for (let id = node.id; id !== undefined; id = parent.get(id)) {
    const l = label(nodes.get(id));
    if (seen.has(l)) continue;
    seen.add(l);
    total.set(l, (total.get(l) ?? 0) + dt);
  }
}

const print = (title, map, rows = top, keep = () => true) => {
  process.stdout.write(`\n${title}\n`);
  const sorted = [...map].filter(([k]) => keep(k)).sort((a, b) => b[1] - a[1]);
  for (const [k, v] of sorted.slice(0, rows)) {
    const name = k.length > 120 ? `${k.slice(0, 117)}...` : k;
    process.stdout.write(`${v.toFixed(0).padStart(8)} ms ${((100 * v) / all).toFixed(1).padStart(5)}%  ${name}\n`);
  }
};
process.stdout.write(`busy ${all.toFixed(0)} ms, idle ${idle.toFixed(0)} ms\n`);
print('self time by file / package', selfFile);
print('self time by function', self);
print('total time by function', total, top, (k) => !filter || k.includes(filter));
