import type { Identity } from "../auth/identity.ts";
import { nodeRedactions } from "../auth/node-access.ts";
import {
  NEWEST_NODE_FORM_MINOR,
  REDACTABLE_NODE_FIELDS,
  REDACTABLE_IN_TEXT_ORDER,
} from "../db/node-shown.ts";
import type { ShownNode } from "../db/store.ts";
import type { ViewContext } from "./views.ts";

/**
 * Whether a detail page at this microversion can be written from the stored shown texts: its full form is
 * the newest one (1.109 on). Older versions, `fields=` and rows without a current text take the view path.
 */
export function shownTextServes(minor: number): boolean {
  return minor >= NEWEST_NODE_FORM_MINOR;
}

const SUBRESOURCES = ["ports", "states", "portgroups", "volume"] as const;

/**
 * The `[…]` of a detail page from its rows' shown texts: each text with the caller's redactions spliced in
 * (node_sanitize's notes, by the same rules as redactNodeView), then what the request adds: `conductor`, the
 * links and the sub-resources' links. Equal to the view path's nodeView + redactNodeView, member for member;
 * no node is parsed or stringified.
 */
export function shownNodesJson(rows: readonly ShownNode[], ctx: ViewContext, who: Identity): Buffer {
  return shownNodesPage(rows, { ctx, who, open: "", close: "" });
}

/** What one page writes around its nodes' array (`{"nodes":` and the `next` link), and for whom. */
export interface ShownPageFrame {
  ctx: ViewContext;
  who: Identity;
  /** ASCII or not: written as UTF-8 before the `[` and after the `]` */
  open: string;
  close: string;
  /**
   * Where the page is written: a buffer of at least `size` bytes (the page is its first `size`). Default: a
   * fresh one of the page's size.
   */
  buffer?: (size: number) => Buffer;
}

/** One redacted member as written: its text and its length in bytes. */
type Note = { text: string; bytes: number } | undefined;
/** A row's notes per REDACTABLE_NODE_FIELDS slot; null when the caller sees every member as stored. */
type Notes = readonly Note[] | null;

/**
 * shownNodesJson with `open` before the array and `close` after it, written straight into one buffer (the
 * frame's, or one of the page's exact size): the lengths are summed first, then every piece is copied once (no
 * string is built per node: joining 1,000 texts with their links as template strings cost more than the rest
 * of the page, garbage collection included). Returns the page: the buffer's first bytes when it is longer.
 */
export function shownNodesPage(rows: readonly ShownNode[], frame: ShownPageFrame): Buffer {
  const { ctx, who } = frame;
  const links = linkPieces(ctx.baseUrl);
  // the notes depend on the caller and the node's owner and lessee only: worked out once per pair
  const notesOf = new Map<string | null, Map<string | null, Notes>>();
  // what follows a node's shown text depends on its conductor (a few per page) and its uuid's length
  const tailOf = new Map<string | null, Tail>();
  const notes = new Array<Notes>(rows.length);
  // the rows as written: a text read as bytes stays bytes where nothing is spliced in, else becomes text
  const written = new Array<ShownNode>(rows.length);
  const tails = new Array<Tail>(rows.length);
  const ids = new Array<string>(rows.length);
  let size =
    Buffer.byteLength(frame.open) + Buffer.byteLength(frame.close) + 2 + Math.max(0, rows.length - 1);
  for (let r = 0; r < rows.length; r++) {
    const row = rows[r]!;
    let byLessee = notesOf.get(row.owner);
    if (byLessee === undefined) notesOf.set(row.owner, (byLessee = new Map()));
    let rowNotes = byLessee.get(row.lessee);
    if (rowNotes === undefined) byLessee.set(row.lessee, (rowNotes = notesFor(who, row)));
    notes[r] = rowNotes;
    written[r] =
      rowNotes === null || typeof row.shown === "string"
        ? row
        : { ...row, shown: row.shown.toString("utf8") };
    // escaping is per character: the escaped uuid in the escaped base's links is the escaped link
    const id = inJsonString(row.uuid);
    ids[r] = id;
    const idBytes = Buffer.byteLength(id);
    const conductor = ctx.conductorOf(row);
    let tail = tailOf.get(conductor);
    if (tail === undefined || tail.idBytes !== idBytes) {
      tail = nodeTail(conductor, links, idBytes);
      tailOf.set(conductor, tail);
    }
    tails[r] = tail;
    size += shownBytes(written[r]!, rowNotes) + tail.bytes.length;
  }
  const into = frame.buffer?.(size) ?? Buffer.allocUnsafe(size);
  if (into.length < size) throw new Error(`detail page: a buffer of ${into.length} for ${size} bytes`);
  const page: Cursor = { out: into, at: 0 };
  const { out } = page;
  page.at = out.write(frame.open, 0, "utf8");
  out[page.at++] = 0x5b; // [
  for (let r = 0; r < rows.length; r++) {
    if (r > 0) out[page.at++] = 0x2c; // ,
    writeShown(page, written[r]!, notes[r]!);
    // the tail in one copy, then its uuid: written once, then copied to the other links
    const { bytes, slots, idBytes } = tails[r]!;
    const at = page.at;
    out.set(bytes, at);
    const first = at + slots[0]!;
    out.write(ids[r]!, first, "utf8");
    for (let s = 1; s < slots.length; s++) out.copyWithin(at + slots[s]!, first, first + idBytes);
    page.at = at + bytes.length;
  }
  out[page.at++] = 0x5d; // ]
  page.at += out.write(frame.close, page.at, "utf8");
  if (page.at !== size) throw new Error(`detail page: wrote ${page.at} of ${size} bytes`);
  return out.length === size ? out : out.subarray(0, size);
}

/**
 * A text as written between a JSON string's quotes. NOTE: a uuid (the API makes them) has no character to
 * escape, and a scan of its 36 characters costs a fifth of JSON.stringify and slice (0.2 ms a page of 1,000).
 */
export function inJsonString(text: string): string {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    // control characters, `"` and `\` are escaped; from DEL on JSON.stringify decides (lone surrogates)
    if (code < 0x20 || code === 0x22 || code === 0x5c || code >= 0x7f)
      return JSON.stringify(text).slice(1, -1);
  }
  return text;
}

/** A buffer being written, and where the next byte goes. */
interface Cursor {
  readonly out: Buffer;
  at: number;
}

/**
 * What follows a node's shown text, `,"conductor":…,"links":[…],"ports":[…],…}`, with room for its uuid
 * (`idBytes` long) at each of `slots`: the same bytes for every node of one conductor but the uuid.
 */
interface Tail {
  bytes: Buffer;
  slots: number[];
  idBytes: number;
}

function nodeTail(conductor: string | null, links: LinkPieces, idBytes: number): Tail {
  const head = Buffer.from(`,"conductor":${JSON.stringify(conductor)}${links.open}`);
  const bytes = Buffer.alloc(head.length + links.bytes + links.pieces.length * idBytes);
  let at = head.copy(bytes, 0);
  const slots: number[] = [];
  for (const piece of links.pieces) {
    slots.push(at);
    at += idBytes + piece.copy(bytes, at + idBytes);
  }
  return { bytes, slots, idBytes };
}

/** The members the caller's redactions put in place of the stored ones, per REDACTABLE_NODE_FIELDS slot. */
function notesFor(who: Identity, row: ShownNode): Notes {
  const redacted = new Map(nodeRedactions(who, row));
  if (redacted.size === 0) return null;
  return REDACTABLE_NODE_FIELDS.map((field) => {
    if (!redacted.has(field)) return undefined;
    const text = `,"${field}":${JSON.stringify(redacted.get(field))}`;
    return { text, bytes: Buffer.byteLength(text) };
  });
}

/**
 * The bytes of a shown text with its notes in place. A text read as bytes comes with no notes (shownNodesPage
 * makes it text where it has some: the cuts count characters).
 */
function shownBytes({ shown, cuts }: ShownNode, notes: Notes): number {
  if (typeof shown !== "string") return shown.length;
  if (notes === null) return Buffer.byteLength(shown);
  let bytes = 0;
  let from = 0;
  for (const slot of REDACTABLE_IN_TEXT_ORDER) {
    const note = notes[slot];
    if (note === undefined) continue;
    bytes += Buffer.byteLength(shown.slice(from, cuts[slot * 2])) + note.bytes;
    from = cuts[slot * 2 + 1]!;
  }
  return bytes + (from === 0 ? Buffer.byteLength(shown) : Buffer.byteLength(shown.slice(from)));
}

/** Writes a shown text with its notes in place at the cursor (as shownBytes counts it). */
function writeShown(page: Cursor, { shown, cuts }: ShownNode, notes: Notes): void {
  const { out } = page;
  if (typeof shown !== "string") {
    out.set(shown, page.at);
    page.at += shown.length;
    return;
  }
  let from = 0;
  for (const slot of REDACTABLE_IN_TEXT_ORDER) {
    const note = notes?.[slot];
    if (note === undefined) continue;
    page.at += out.write(shown.slice(from, cuts[slot * 2]), page.at, "utf8");
    page.at += out.write(note.text, page.at, "utf8");
    from = cuts[slot * 2 + 1]!;
  }
  page.at += out.write(from === 0 ? shown : shown.slice(from), page.at, "utf8");
}

/**
 * The links' text around each node's uuid, for one base URL: `open` ends `,"links":[{"href":"<base>/v1/nodes/`
 * (the uuid follows), each of `pieces` follows one copy of the uuid, the last closing the node. `bytes`: the
 * pieces' total.
 */
interface LinkPieces {
  open: string;
  pieces: Buffer[];
  bytes: number;
}

function linkPieces(baseUrl: string): LinkPieces {
  const base = JSON.stringify(baseUrl).slice(1, -1);
  const self = `${base}/v1/nodes/`;
  const bookmark = `${base}/nodes/`;
  // the text between the uuids: `<tail>","rel":"self"},{"href":"<bookmark>` and so on, per links array
  const texts: string[] = [];
  let before = "";
  for (const tail of ["", ...SUBRESOURCES.map((sub) => `/${sub}`)]) {
    const name = tail === "" ? "links" : tail.slice(1);
    if (tail !== "") texts.push(`${before}],"${name}":[{"href":"${self}`);
    texts.push(`${tail}","rel":"self"},{"href":"${bookmark}`);
    before = `${tail}","rel":"bookmark"}`;
  }
  texts.push(`${before}]}`);
  const pieces = texts.map((text) => Buffer.from(text));
  return {
    open: `,"links":[{"href":"${self}`,
    pieces,
    bytes: pieces.reduce((sum, piece) => sum + piece.length, 0),
  };
}
