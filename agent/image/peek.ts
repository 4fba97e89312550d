/**
 * Reads the first `length` bytes of a stream without consuming them: returns those bytes (fewer if the stream
 * is shorter) and a stream that yields everything from the start again. The head is copied, so sources may
 * yield views of reused buffers.
 */
export async function peek(
  source: AsyncIterable<Buffer>,
  length: number,
): Promise<{ head: Buffer; stream: AsyncIterable<Buffer> }> {
  const iterator = source[Symbol.asyncIterator]();
  const seen: Buffer[] = [];
  let size = 0;
  let ended = false;
  while (size < length) {
    const step = await iterator.next();
    if (step.done) {
      ended = true;
      break;
    }
    seen.push(Buffer.from(step.value)); // the source may reuse its buffers on the next read
    size += step.value.length;
  }
  const head = Buffer.concat(seen).subarray(0, length);
  async function* replay(): AsyncGenerator<Buffer> {
    try {
      yield* seen;
      if (ended) return;
      for (;;) {
        const step = await iterator.next();
        if (step.done) return;
        yield step.value;
      }
    } finally {
      // The consumer may stop early (an error downstream): let the source release its connection.
      if (!ended) await iterator.return?.();
    }
  }
  return { head, stream: replay() };
}
