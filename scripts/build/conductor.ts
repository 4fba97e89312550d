/**
 * Builds the conductor as one ESM bundle (esbuild, with a source map beside it) at build/conductor/main.js, so the
 * installed service and the benches run plain JavaScript: no TypeScript loader in the process (tsx's costs
 * 35-48 MiB of RSS and start time). npm packages are bundled too, except native addons and what is loaded at run
 * time by path (better-sqlite3, pg's optional pg-native, esbuild for the dashboard's script).
 * The bundle sits two folders below the checkout, as conductor/main.ts does, so paths it resolves from its own
 * URL (the dashboard's ui/ folder) are the same from the source and from the build.
 * Usage: npm run build:conductor [-- --if-stale] [--external-packages]
 */
import { readFile, readdir, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { build } from "esbuild";

const ROOT = resolve(dirname(new URL(import.meta.url).pathname), "../..");
/** The folder the bundle goes to. */
export const CONDUCTOR_BUILD_DIR = "build/conductor";
export const CONDUCTOR_ENTRY = `${CONDUCTOR_BUILD_DIR}/main.js`;

/** Left to node's resolver: native addons, optional addons, and esbuild (it spawns its own binary). */
const EXTERNAL = ["better-sqlite3", "pg-native", "esbuild", "bufferutil", "utf-8-validate"];

export interface BuildConductorResult {
  files: { path: string; bytes: number }[];
  durationMs: number;
}

/**
 * `externalPackages` leaves every npm package to node's resolver (only the project's own code bundled); `root`
 * builds another checkout's sources (a baseline revision in a bench) with this build's settings.
 * @throws Error when esbuild reports an error.
 */
export async function buildConductor(
  options: { outDir?: string; externalPackages?: boolean; root?: string } = {},
): Promise<BuildConductorResult> {
  const started = Date.now();
  const root = options.root ?? ROOT;
  const outDir = resolve(root, options.outDir ?? CONDUCTOR_BUILD_DIR);
  await rm(outDir, { recursive: true, force: true });
  const result = await build({
    // NOTE: one file, no chunks: a module that resolves paths from its own URL must sit where main.js does.
    entryPoints: { main: join(root, "conductor/main.ts") },
    outdir: outDir,
    bundle: true,
    platform: "node",
    target: "node20",
    format: "esm",
    sourcemap: "linked",
    legalComments: "none",
    // strings, template literals, regular expressions and names with \u escapes: only comments keep non-ASCII
    charset: "ascii",
    logLevel: "warning",
    ...(options.externalPackages ? { packages: "external" as const } : { external: EXTERNAL }),
    // NOTE: the CommonJS packages bundled into an ES module still call require() for node's built-ins; give
    // them one, and the __filename/__dirname some of them read.
    banner: {
      js: [
        'import { createRequire as __anvilCreateRequire } from "node:module";',
        'import { fileURLToPath as __anvilFileURLToPath } from "node:url";',
        "const require = __anvilCreateRequire(import.meta.url);",
        "const __filename = __anvilFileURLToPath(import.meta.url);",
        "const __dirname = __anvilFileURLToPath(new URL('.', import.meta.url));",
      ].join("\n"),
    },
    metafile: true,
  });
  if (result.errors.length > 0) throw new Error(`esbuild failed: ${result.errors.map((e) => e.text).join("; ")}`);
  const files = await Promise.all(
    Object.entries(result.metafile.outputs).map(async ([path, output]) => {
      if (!path.endsWith(".js")) return { path, bytes: output.bytes };
      const js = asciiComments(await readFile(path, "utf8"));
      await writeFile(path, js);
      return { path, bytes: js.length };
    }),
  );
  return { files, durationMs: Date.now() - started };
}

/**
 * The bundle with every character outside ASCII (after `charset: "ascii"`, only in the packages' comments:
 * undici's `response’s`, a `§`) replaced by `?`, as many as its UTF-16 length, so the source map's columns
 * still hold. V8 keeps a module's source text as long as the process runs (functions compile from it
 * lazily), as UTF-16 once one character is not Latin-1: these comments made the 5.1 MB bundle a 10.7 MB
 * string, 5.4 MiB of the conductor's RSS. Not minified instead: a minified bundle (3.6 MB) was 15 MiB lower
 * idle, but the detail page ×1.35 slower (docs/performance.md).
 */
export function asciiComments(js: string): string {
  return js.replace(/[\u0080-\u{10ffff}]/gu, (char) => "?".repeat(char.length));
}

/** Sources that end up in the bundle; the build is stale when any is newer than it. */
const SOURCE_DIRS = ["conductor", "shared"];
const SOURCE_FILES = ["package-lock.json", "scripts/build/conductor.ts"];

/** True when the bundle is missing or older than any source it is built from. */
export async function conductorIsStale(outDir = CONDUCTOR_BUILD_DIR): Promise<boolean> {
  const built = await stat(resolve(ROOT, outDir, "main.js")).catch(() => null);
  if (built === null) return true;
  const files = SOURCE_FILES.map((file) => join(ROOT, file));
  for (const dir of SOURCE_DIRS) {
    const entries = await readdir(join(ROOT, dir), { recursive: true, withFileTypes: true });
    for (const entry of entries) {
      if (entry.isFile() && entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts"))
        files.push(join(entry.parentPath, entry.name));
    }
  }
  const times = await Promise.all(files.map((file) => stat(file).then((s) => s.mtimeMs, () => 0)));
  return times.some((time) => time > built.mtimeMs);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(ROOT, "scripts/build/conductor.ts")) {
  const { values } = parseArgs({
    options: {
      "out-dir": { type: "string" },
      "if-stale": { type: "boolean", default: false },
      "external-packages": { type: "boolean", default: false },
    },
  });
  const outDir = values["out-dir"];
  const skip = values["if-stale"] ? conductorIsStale(outDir).then((stale) => !stale) : Promise.resolve(false);
  skip
    .then(async (fresh) => {
      if (fresh) {
        process.stdout.write(`${outDir ?? CONDUCTOR_BUILD_DIR} is up to date\n`);
        return;
      }
      const built = await buildConductor({ outDir, externalPackages: values["external-packages"] });
      const js = built.files.filter((file) => file.path.endsWith(".js"));
      const bytes = js.reduce((sum, file) => sum + file.bytes, 0);
      process.stdout.write(
        `${outDir ?? CONDUCTOR_BUILD_DIR}: ${js.length} files, ${(bytes / 1024 / 1024).toFixed(1)} MiB of JS, built in ${(built.durationMs / 1000).toFixed(1)} s\n`,
      );
    })
    .then(
      () => undefined,
      (error: unknown) => {
        process.stderr.write(`build:conductor failed: ${error instanceof Error ? error.message : String(error)}\n`);
        process.exitCode = 1;
      },
    );
}
