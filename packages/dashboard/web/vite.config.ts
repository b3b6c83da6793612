// The dashboard's single-page app: Preact, built by Vite into packages/dashboard/dist (npm install
// runs it; the service serves the result at /dashboard). JSX goes through esbuild (no Babel).
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/dashboard/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: fileURLToPath(new URL('../dist', import.meta.url)),
    emptyOutDir: true,
    // No inline script anywhere: the Content-Security-Policy allows scripts from this origin only.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    target: 'es2020',
  },
});
