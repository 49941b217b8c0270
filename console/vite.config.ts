// The console builds into the API server's package, which serves it at `/` and ships it in
// the wheel and the image. Assets go under /static/ (content-hashed, so cached for good):
// /assets/ is the API server's node files.
import { brotliCompressSync, constants, gzipSync } from "node:zlib";
import type { Plugin } from "vite";
import { defineConfig } from "vitest/config";

// Brotli and gzip copies of each script, style and image beside it: the API server sends the
// one a browser accepts (aiohttp's FileResponse), so a cold load moves about a third of the
// bytes with no compression on any request.
function precompressed(): Plugin {
  return {
    name: "corral-precompressed",
    apply: "build",
    // Last: Vite's own generateBundle still rewrites chunks (a dynamic import's preload list
    // is filled in there), and a copy taken before that would differ from the file it sits by.
    generateBundle: {
      order: "post",
      handler(_options, bundle) {
        for (const file of Object.values(bundle)) {
          if (!/\.(js|css|svg)$/.test(file.fileName)) continue;
          const data = Buffer.from(file.type === "chunk" ? file.code : file.source);
          const brotli = { [constants.BROTLI_PARAM_QUALITY]: constants.BROTLI_MAX_QUALITY };
          this.emitFile({ type: "asset", fileName: `${file.fileName}.br`, source: brotliCompressSync(data, { params: brotli }) });
          this.emitFile({ type: "asset", fileName: `${file.fileName}.gz`, source: gzipSync(data, { level: 9 }) });
        }
      },
    },
  };
}

export default defineConfig({
  base: "/",
  plugins: [precompressed()],
  build: {
    outDir: "../apiserver/corral/apiserver/webconsole",
    emptyOutDir: true,
    assetsDir: "static",
    // Everything the page needs is a file of ours: no asset is inlined as a data: URL, so the
    // Content-Security-Policy needs no exception for one.
    assetsInlineLimit: 0,
    target: "es2022",
  },
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  test: { environment: "happy-dom", include: ["src/**/*.test.ts", "src/**/*.test.tsx"] },
});
