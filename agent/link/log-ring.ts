/**
 * The agent's most recent log lines, kept in memory so collect_logs can send them: the ramdisk has no journal
 * and the agent's output goes to the console only. Bounded by bytes; the oldest lines go first.
 */
export class LogRing {
  private readonly lines: string[] = [];
  private bytes = 0;

  constructor(private readonly maxBytes = 1024 * 1024) {}

  /** pino's destination interface: one serialised line (or several) per call. */
  write(chunk: string): void {
    const line = chunk.length > this.maxBytes ? chunk.slice(chunk.length - this.maxBytes) : chunk;
    this.lines.push(line);
    this.bytes += line.length;
    while (this.bytes > this.maxBytes && this.lines.length > 1) this.bytes -= this.lines.shift()?.length ?? 0;
  }

  text(): string {
    return this.lines.join("");
  }
}
