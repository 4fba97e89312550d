/**
 * The store's size against a baseline revision (issue 22: "the store code at least 30 % smaller"). Counts code
 * lines (lines holding a token that is not a comment; blank and comment-only lines do not count) of the store
 * proper: the baseline's two dialect stores against this checkout's SQL core, its table descriptors and its two
 * dialects. Migrations, the Store interface and the helpers both sides share (candidates, summary JSON) are
 * left out of both sides.
 *
 * Two figures: the whole store now, and the store for the same features as the baseline, i.e. without the
 * members that serve only what came after it (listed in AFTER_BASELINE, each with its reason; a generic option
 * of the core that only a newer resource uses stays counted, so the second figure errs on the large side).
 * Usage: node --import tsx scripts/bench/store-size.ts [--base fa3bfa8]
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import ts from "typescript";

const ROOT = resolve(import.meta.dirname, "../..");
const BASE_FILES = ["conductor/db/sqlite/sqlite-store.ts", "conductor/db/postgres/pg-store.ts"];
const NOW_FILES = [
  "conductor/db/sql/sql-store.ts",
  "conductor/db/sql/dialect.ts",
  "conductor/db/sql/tables.ts",
  "conductor/db/sqlite/sqlite-store.ts",
  "conductor/db/postgres/pg-store.ts",
];

/** Members (methods, or top-level constants) that serve only features added after fa3bfa8, by file. */
const AFTER_BASELINE: Record<string, Record<string, string>> = {
  "conductor/db/sql/sql-store.ts": {
    keepShown: "detail texts kept on write (issue 28)",
    fillShownTexts: "detail texts backfill (issue 28)",
    listNodeShown: "detail page from stored texts (issue 28)",
    SHOWN_JOIN: "detail page from stored texts (issue 28)",
    SHOWN_UPSERT: "detail texts kept on write (issue 28)",
    listShards: "GET /v1/shards (1.82)",
    sharedSecret: "secrets shared by a cluster's conductors (Keystone, consoles)",
    listDeployTemplatesByNames: "deploy templates (1.55)",
    insertToken: "API tokens stored as digests (trust, second round)",
    revokeToken: "API tokens",
    tokenByDigest: "API tokens",
    tokenById: "API tokens",
    listTokens: "API tokens",
    tokens: "API tokens",
    refused: "delete refused while held (chassis, 1.1)",
  },
  "conductor/db/sql/tables.ts": {
    PORTGROUPS: "port groups (1.23)",
    CHASSIS: "chassis",
    VOLUME_SORT: "volume resources (1.32)",
    VOLUME_CONNECTORS: "volume resources (1.32)",
    VOLUME_TARGETS: "volume resources (1.32)",
    STEP_LIST_SORT: "deploy templates and runbooks",
    DEPLOY_TEMPLATES: "deploy templates (1.55)",
    RUNBOOKS: "runbooks (1.92)",
    INSPECTION_RULES: "inspection rules (1.96)",
  },
  "conductor/db/sqlite/sqlite-store.ts": {
    grouped: "group commit of creates (issue 28)",
    commitQueued: "group commit of creates (issue 28)",
  },
  "conductor/db/postgres/pg-store.ts": {
    grouped: "group commit of creates (issue 28)",
  },
};

/** The 1-based line numbers within [from, to) that hold at least one token (comments are not tokens). */
function codeLines(source: ts.SourceFile, from = 0, to = source.text.length): Set<number> {
  const lines = new Set<number>();
  const line = (pos: number): number => source.getLineAndCharacterOfPosition(pos).line + 1;
  const visit = (node: ts.Node): void => {
    if (node.kind >= ts.SyntaxKind.FirstJSDocNode && node.kind <= ts.SyntaxKind.LastJSDocNode) return;
    const start = node.getStart(source);
    if (node.getEnd() <= from || start >= to) return;
    const children = node.getChildren(source);
    if (children.length > 0) {
      for (const child of children) visit(child);
      return;
    }
    if (node.kind === ts.SyntaxKind.EndOfFileToken) return;
    // a leaf: a token, or a literal that may span lines (a template's SQL)
    for (let n = line(start); n <= line(Math.max(start, node.getEnd() - 1)); n++) lines.add(n);
  };
  visit(source);
  return lines;
}

/** Where each named class member or top-level constant of a file starts and ends. */
function members(source: ts.SourceFile): Map<string, [number, number]> {
  const found = new Map<string, [number, number]>();
  const visit = (node: ts.Node): void => {
    if (ts.isClassDeclaration(node))
      for (const member of node.members)
        if (member.name && ts.isIdentifier(member.name))
          found.set(member.name.text, [member.getStart(source), member.getEnd()]);
    if (ts.isVariableStatement(node))
      for (const declaration of node.declarationList.declarations)
        if (ts.isIdentifier(declaration.name))
          found.set(declaration.name.text, [node.getStart(source), node.getEnd()]);
  };
  source.forEachChild(visit);
  return found;
}

const parse = (path: string, text: string): ts.SourceFile =>
  ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);

function main(): void {
  const { values } = parseArgs({ options: { base: { type: "string", default: "fa3bfa8" } } });
  const base = values.base;
  let before = 0;
  for (const file of BASE_FILES) {
    const text = execFileSync("git", ["show", `${base}:${file}`], { cwd: ROOT, encoding: "utf8" });
    const n = codeLines(parse(file, text)).size;
    before += n;
    console.log(`${base}  ${String(n).padStart(5)}  ${file}`);
  }
  let now = 0;
  let later = 0;
  const reasons = new Map<string, number>();
  for (const file of NOW_FILES) {
    const source = parse(file, readFileSync(resolve(ROOT, file), "utf8"));
    const n = codeLines(source).size;
    now += n;
    const spans = members(source);
    let fileLater = 0;
    for (const [name, reason] of Object.entries(AFTER_BASELINE[file] ?? {})) {
      const span = spans.get(name);
      if (!span) throw new Error(`${file}: no member ${name} (update AFTER_BASELINE)`);
      const lines = codeLines(source, span[0], span[1]).size;
      fileLater += lines;
      reasons.set(reason, (reasons.get(reason) ?? 0) + lines);
    }
    later += fileLater;
    console.log(
      `now      ${String(n).padStart(5)}  ${file} (${fileLater} of them for features after ${base})`,
    );
  }
  const pct = (x: number): string => `${(((x - before) / before) * 100).toFixed(1)} %`;
  console.log("");
  for (const [reason, lines] of reasons) console.log(`  ${String(lines).padStart(4)}  ${reason}`);
  console.log("");
  console.log(`store code, ${base}: ${before} lines`);
  console.log(`store code, now, whole: ${now} lines (${pct(now)})`);
  console.log(`store code, now, the features ${base} had: ${now - later} lines (${pct(now - later)})`);
}

main();
