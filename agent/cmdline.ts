/** Splits a kernel command line into key → value ("quiet" → ""); quoted values keep their spaces. */
export function parseKernelCmdline(text: string): Map<string, string> {
  const params = new Map<string, string>();
  for (const match of text.matchAll(/(?:[^\s"]+|"[^"]*")+/g)) {
    const token = match[0];
    const eq = token.indexOf("=");
    const key = eq < 0 ? token : token.slice(0, eq);
    const value = eq < 0 ? "" : token.slice(eq + 1).replace(/^"(.*)"$/, "$1");
    params.set(key, value);
  }
  return params;
}
