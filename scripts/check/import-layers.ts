/**
 * The conductor's folders import one way. Fails on (i) any import cycle between files (type-only imports and
 * re-exports included: a cycle of types still ties the files together) and (ii) a file importing a folder
 * above its own in LAYERS. Run by `npm run lint`; test/unit/import-layers.test.ts plants both kinds.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";

/**
 * Top to bottom: a file may import its own layer's folders and any layer below, never one above. Names are
 * folders under conductor/, or root files (`config.ts`). Anything unlisted fails the check, so a new folder
 * is placed on purpose.
 */
export const LAYERS: readonly (readonly string[])[] = [
  ["main.ts", "demo.ts", "server.ts", "cli", "ui"],
  ["api"],
  ["cluster"],
  ["operations"],
  ["flows"],
  ["tasks"],
  ["agents", "console"],
  ["drivers"],
  ["allocations", "auth", "history", "metrics", "images", "tls"],
  ["db", "events", "states"],
  ["config-loader.ts"],
  ["config.ts", "errors.ts", "listen-address.ts", "idle-compaction.ts", "page-buffers.ts"],
];

export interface ImportEdge {
  from: string;
  to: string;
}

/** The unit a file belongs to in LAYERS: its first folder under the root, or its own name at the root. */
export function unitOf(file: string): string {
  return file.split("/")[0] ?? file;
}

function layerOf(unit: string): number {
  return LAYERS.findIndex((layer) => layer.includes(unit));
}

/** Every .ts file under `dir` (tests excluded: they may reach anywhere), as paths relative to `dir`. */
export function sourceFiles(dir: string, under = dir): string[] {
  const files: string[] = [];
  for (const name of readdirSync(under).sort()) {
    const path = join(under, name);
    if (statSync(path).isDirectory()) files.push(...sourceFiles(dir, path));
    else if (name.endsWith(".ts") && !name.endsWith(".test.ts"))
      files.push(relative(dir, path).split(sep).join("/"));
  }
  return files;
}

/** Relative imports of one file that stay under `dir` (import, import type, export from, import()). */
export function importsOf(dir: string, file: string, text: string): ImportEdge[] {
  const info = ts.preProcessFile(text, true, true);
  const edges: ImportEdge[] = [];
  for (const { fileName } of info.importedFiles) {
    if (!fileName.startsWith(".")) continue;
    const to = relative(dir, resolve(dir, dirname(file), fileName))
      .split(sep)
      .join("/");
    if (!to.startsWith("..")) edges.push({ from: file, to });
  }
  return edges;
}

/** Import cycles among files, each once, as the files around it (first repeated at the end). */
export function cyclesOf(edges: readonly ImportEdge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const { from, to } of edges) next.set(from, [...(next.get(from) ?? []), to]);
  const cycles: string[][] = [];
  const seen = new Set<string>();
  const done = new Set<string>();
  // iterative DFS would be longer; the conductor's import depth is a few dozen files
  const visit = (file: string, path: string[]): void => {
    if (done.has(file)) return;
    const at = path.indexOf(file);
    if (at >= 0) {
      const cycle = path.slice(at);
      const key = [...cycle].sort().join(" ");
      if (!seen.has(key)) {
        seen.add(key);
        cycles.push([...cycle, file]);
      }
      return;
    }
    path.push(file);
    for (const to of next.get(file) ?? []) visit(to, path);
    path.pop();
    done.add(file);
  };
  for (const file of [...next.keys()].sort()) visit(file, []);
  return cycles;
}

/** Imports that reach a layer above the importing file's, and files in no layer. */
export function layerViolations(edges: readonly ImportEdge[], files: readonly string[]): string[] {
  const problems: string[] = [];
  for (const file of files) {
    if (layerOf(unitOf(file)) < 0) problems.push(`${file}: "${unitOf(file)}" is in no layer of LAYERS`);
  }
  for (const { from, to } of edges) {
    const [a, b] = [layerOf(unitOf(from)), layerOf(unitOf(to))];
    if (a >= 0 && b >= 0 && b < a)
      problems.push(`${from} imports ${to}: ${unitOf(to)} is above ${unitOf(from)}`);
  }
  return problems;
}

/** Every problem in the tree under `dir` (empty: it imports one way). */
export function checkImportLayers(dir: string): string[] {
  const files = sourceFiles(dir);
  const edges = files.flatMap((file) => importsOf(dir, file, readFileSync(join(dir, file), "utf8")));
  return [
    ...cyclesOf(edges).map((cycle) => `import cycle: ${cycle.join(" -> ")}`),
    ...layerViolations(edges, files),
  ];
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  const dir = resolve(import.meta.dirname, "../../conductor");
  const problems = checkImportLayers(dir);
  for (const problem of problems) console.error(`conductor/: ${problem}`);
  if (problems.length) {
    console.error(`${problems.length} import problem(s); see scripts/check/import-layers.ts for the layers`);
    process.exit(1);
  }
  console.log(`conductor/: ${sourceFiles(dir).length} files import one way`);
}
