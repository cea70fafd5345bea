#!/usr/bin/env node
// The binary runs the bundle of src/bin.ts and everything it imports (one file per lazily loaded part), built by
// `npm run build` and before packing (scripts/package-assets.mjs): resolving and loading ~700 separate modules cost
// every `oar` process about half a second (BENCHMARKS.md, "CLI startup").
import '../bundle/oar.js';
