/**
 * The Integrations area's page: one bundle of our own code and its
 * dependencies into `dist/` (served by `crm-relay serve` on PORTAL_PORT).
 * Nothing is loaded from elsewhere (no CDN, no web fonts) and nothing is
 * inline, so it works on a closed network under `default-src 'self'`.
 */
import { defineConfig } from "vite"

export default defineConfig({
  base: "/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    // No inlined assets: the CSP allows this origin's files only.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    reportCompressedSize: true
  },
  oxc: { jsx: { runtime: "automatic" } }
})
