import { existsSync, readFileSync, statSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { parseHtpasswd } from "./htpasswd.ts";
import { RolesFile, type RoleEntry } from "./identity.ts";

/** What the conductor knows about a user between two reloads. */
export interface UserRecord {
  digest: string;
  /** undefined: the user has no entry in the roles file. */
  roles: RoleEntry | undefined;
}

export interface UserStoreOptions {
  userFile: string;
  /** null: no roles file, every user in the htpasswd file is a system administrator (Ironic's http_basic). */
  rolesFile: string | null;
  now?: () => number;
  /** How often the files' stat is looked at (0: at every lookup). */
  checkIntervalMs?: number;
  onReload?: (generation: number, error: string | null) => void;
}

type Stamp = string;

function stampOf(path: string | null): Stamp {
  if (path === null) return "";
  try {
    const s = statSync(path);
    return `${s.ino}:${s.size}:${s.mtimeMs}`;
  } catch {
    return "absent";
  }
}

/**
 * The htpasswd file and the roles file, reloaded when either changes (inode, size or mtime), at most once per
 * `checkIntervalMs`. A file that fails to parse keeps the previous good contents (and the error is reported).
 */
export class UserStore {
  private users = new Map<string, string>();
  private roles: RolesFile = { users: {} };
  private stamps: [Stamp, Stamp] = ["", ""];
  private lastCheck = -Infinity;
  private gen = 0;
  private readonly now: () => number;
  lastError: string | null = null;

  constructor(private readonly options: UserStoreOptions) {
    this.now = options.now ?? Date.now;
    this.reload(true);
  }

  /** Bumped at every reload; cached credentials of an older generation are void. */
  get generation(): number {
    return this.gen;
  }

  get hasRolesFile(): boolean {
    return this.options.rolesFile !== null;
  }

  /**
   * The bcrypt cost of the file's strongest entry (4 for an empty file): what a made-up digest for an unknown
   * user must cost so that timing does not tell which names exist. Looks for a reload first.
   */
  get strongestCost(): number {
    this.maybeReload();
    let strongest = 4;
    for (const digest of this.users.values()) strongest = Math.max(strongest, bcryptCost(digest));
    return strongest;
  }

  /** The user's digest and role (after a reload if the files changed). */
  lookup(user: string): UserRecord | undefined {
    this.maybeReload();
    const digest = this.users.get(user);
    if (digest === undefined) return undefined;
    return { digest, roles: Object.hasOwn(this.roles.users, user) ? this.roles.users[user] : undefined };
  }

  /**
   * The user's entry as a token is bound to it (password digest, and role and project when a roles file is
   * used), or undefined when the user is gone: any change to the entry voids the user's tokens.
   */
  credential(user: string): string | undefined {
    const record = this.lookup(user);
    if (!record) return undefined;
    const roles = this.hasRolesFile ? (record.roles ?? null) : "admin";
    return JSON.stringify([record.digest, roles]);
  }

  private maybeReload(): void {
    const now = this.now();
    if (now - this.lastCheck < (this.options.checkIntervalMs ?? 1000)) return;
    this.lastCheck = now;
    const stamps: [Stamp, Stamp] = [stampOf(this.options.userFile), stampOf(this.options.rolesFile)];
    if (stamps[0] !== this.stamps[0] || stamps[1] !== this.stamps[1]) this.reload(false);
  }

  /** @throws InvalidUserFile, ZodError, Error (unreadable file) when `strict` (at start) */
  private reload(strict: boolean): void {
    const stamps: [Stamp, Stamp] = [stampOf(this.options.userFile), stampOf(this.options.rolesFile)];
    try {
      const users = parseHtpasswd(readFileSync(this.options.userFile, "utf8"));
      const rolesPath = this.options.rolesFile;
      const roles =
        rolesPath === null
          ? { users: {} }
          : RolesFile.parse((parseYaml(readFileSync(rolesPath, "utf8")) as unknown) ?? {});
      this.users = users;
      this.roles = roles;
      this.lastError = null;
    } catch (error) {
      if (strict) throw error;
      this.lastError = error instanceof Error ? error.message : String(error);
    }
    this.stamps = stamps;
    this.gen++;
    this.options.onReload?.(this.gen, this.lastError);
  }
}

/** The cost field of a bcrypt digest ($2y$12$...), or 4 if it has none readable. */
export function bcryptCost(digest: string): number {
  const cost = Number(digest.slice(4, 6));
  // bcrypt's costs run 4..31; a malformed entry fails its own compare and says nothing about timing
  return Number.isInteger(cost) && cost >= 4 && cost <= 31 ? cost : 4;
}

/** The roles file the conductor uses: the configured one, else roles.yaml beside the htpasswd file if present. */
export function rolesFileFor(userFile: string, configured: string | undefined): string | null {
  if (configured !== undefined) return configured;
  const beside = userFile.replace(/[^/]*$/, "roles.yaml");
  return existsSync(beside) ? beside : null;
}
