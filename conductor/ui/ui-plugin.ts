import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import { authorize } from "../auth/policy.ts";
import type { Store } from "../db/store.ts";

const UI_DIR = fileURLToPath(new URL("../../ui/", import.meta.url));

/** Bundles the dashboard (Preact, TSX) with esbuild into one script; once per process, in memory. */
async function bundle(): Promise<string> {
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: [`${UI_DIR}app.tsx`],
    bundle: true,
    write: false,
    format: "esm",
    minify: true,
    target: "es2022",
    jsx: "automatic",
    jsxImportSource: "preact",
    legalComments: "none",
  });
  return result.outputFiles[0]!.text;
}

/**
 * The dashboard loads only its own script and stylesheet and talks only to this API: nothing inline, no
 * other origin, never inside a frame (clickjacking), no content-type guessing.
 */
export const UI_HEADERS = {
  "Content-Security-Policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "X-Frame-Options": "DENY",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
} as const;

/**
 * The web dashboard at /ui/: static page, stylesheet and the bundled app, all from this process (no CDN),
 * plus the fleet summary the page's counters show. Everything else it reads is the Ironic API itself,
 * with the user's own credentials, so it can do exactly what the API lets that user do.
 */
export function uiPlugin(deps: { store: Store }) {
  return async (app: FastifyInstance): Promise<void> => {
    let script: Promise<string> | undefined;
    // registered as its own plugin, so the hook covers the dashboard's routes only
    app.addHook("onSend", async (_request, reply, payload) => {
      for (const [name, value] of Object.entries(UI_HEADERS)) reply.header(name, value);
      return payload;
    });
    app.get("/ui/", async (_request, reply) =>
      reply.type("text/html; charset=utf-8").send(await readFile(`${UI_DIR}index.html`)),
    );
    app.get("/ui/app.css", async (_request, reply) =>
      reply.type("text/css; charset=utf-8").send(await readFile(`${UI_DIR}app.css`)),
    );
    app.get("/ui/app.js", async (_request, reply) => {
      script ??= bundle();
      return reply
        .type("text/javascript; charset=utf-8")
        .header("Cache-Control", "no-cache")
        .send(await script);
    });
    /** Counts by provision and power state for the whole fleet, served from the store's indexes. */
    app.get("/ui/summary", async (request) => {
      // fleet-wide counts: for those who may list the whole fleet (a project's users see their page only)
      authorize("baremetal:node:list_all", request.identity);
      const [provision, power] = await Promise.all([
        deps.store.countNodesBy("provision_state"),
        deps.store.countNodesBy("power_state"),
      ]);
      return { provision_state: provision, power_state: power };
    });
  };
}
