/** Apache htpasswd entries with bcrypt digests, the only kind Ironic's http_basic accepts. */
export class InvalidUserFile extends Error {
  constructor(message: string) {
    super(message);
    this.name = "InvalidUserFile";
  }
}

const BCRYPT_PREFIXES = ["$2y$", "$2a$", "$2b$"];

/**
 * Parses an htpasswd file: `user:digest` per line, blank lines ignored, the first entry of a user wins
 * (Ironic reads the file top down). @throws InvalidUserFile for an entry that is not bcrypt.
 */
export function parseHtpasswd(text: string): Map<string, string> {
  const users = new Map<string, string>();
  for (const raw of text.split(/\r?\n/)) {
    const entry = raw.trim();
    if (!entry || !entry.includes(":")) continue;
    const at = entry.indexOf(":");
    const user = entry.slice(0, at);
    const digest = entry.slice(at + 1);
    if (!BCRYPT_PREFIXES.includes(digest.slice(0, 4))) {
      throw new InvalidUserFile(`Only bcrypt digested passwords are supported for ${user}`);
    }
    if (!users.has(user)) users.set(user, digest);
  }
  return users;
}
