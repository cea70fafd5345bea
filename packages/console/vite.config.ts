import preact from '@preact/preset-vite';
import { defineConfig } from 'vite';

// The console is a static single-page app: `oar serve` serves dist/ at `/` (client routes fall back to index.html).
export default defineConfig({
  plugins: [preact()],
  base: '/',
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false, target: 'es2022', chunkSizeWarningLimit: 1000 },
  server: { proxy: { '/v1': 'http://127.0.0.1:8787' } },
});
