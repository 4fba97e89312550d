/** Ironic API microversions: "1.N" compared by N. */
export const MIN_VERSION = 1;
export const MAX_VERSION = 115;
export const MIN_VERSION_STRING = `1.${MIN_VERSION}`;
export const MAX_VERSION_STRING = `1.${MAX_VERSION}`;

export type VersionParse = { ok: true; minor: number } | { ok: false; status: 406; message: string };

/** Parses X-OpenStack-Ironic-API-Version; absent means the minimum, as Ironic does. Pure. */
export function parseVersionHeader(header: string | undefined): VersionParse {
  if (header === undefined || header.trim() === "") return { ok: true, minor: MIN_VERSION };
  const value = header.trim();
  if (value.toLowerCase() === "latest") return { ok: true, minor: MAX_VERSION };
  const match = /^(\d+)\.(\d+)$/.exec(value);
  if (!match)
    return { ok: false, status: 406, message: "Invalid value for X-OpenStack-Ironic-API-Version header" };
  const major = Number(match[1]);
  const minor = Number(match[2]);
  if (major !== 1 || minor < MIN_VERSION || minor > MAX_VERSION) {
    return {
      ok: false,
      status: 406,
      message: `Version ${value} was requested but the minor version is not supported by this service. The supported version range is: [${MIN_VERSION_STRING}, ${MAX_VERSION_STRING}].`,
    };
  }
  return { ok: true, minor };
}
