import { randomUUID } from "node:crypto";
import type { OutgoingFrame, SwarmReplyFrame } from "../../shared/protocol.ts";
import type { SwarmAnswer } from "../../shared/swarm.ts";
import { SwarmLinkDown } from "../swarm/swarm-link.ts";
import type { SwarmLink, SwarmNotice, SwarmQuestion } from "../swarm/swarm-link.ts";

interface Pending {
  resolve: (answer: SwarmAnswer) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

/**
 * The SwarmLink over the agent's WebSocket: questions carry an id, answers settle them; a link that goes
 * down fails every open question at once (the swarm then falls back to the store), as does a late answer.
 */
export class SwarmChannel implements SwarmLink {
  private readonly pending = new Map<string, Pending>();

  constructor(
    private readonly send: (frame: OutgoingFrame) => boolean,
    private readonly address: () => string | undefined,
    private readonly tls: () => boolean,
  ) {}

  ask(question: SwarmQuestion, timeoutMs: number): Promise<SwarmAnswer> {
    const id = randomUUID();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new SwarmLinkDown(`the tracker did not answer ${question.type} in ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      if (!this.send({ ...question, id } as OutgoingFrame)) {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(new SwarmLinkDown("the link to the conductor is down"));
      }
    });
  }

  notify(notice: SwarmNotice): boolean {
    return this.send(notice);
  }

  localAddress(): string | undefined {
    return this.address();
  }

  secure(): boolean {
    return this.tls();
  }

  handleReply(frame: SwarmReplyFrame): void {
    const call = this.pending.get(frame.id);
    if (call === undefined) return;
    this.pending.delete(frame.id);
    clearTimeout(call.timer);
    call.resolve(frame.answer);
  }

  /** The socket closed: no answer will come for anything asked on it. */
  linkDown(): void {
    for (const [id, call] of this.pending) {
      clearTimeout(call.timer);
      this.pending.delete(id);
      call.reject(new SwarmLinkDown("the link to the conductor dropped"));
    }
  }
}
