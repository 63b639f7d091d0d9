// The record, live: one WebSocket per page (GET …/watch, subprotocols `handoff.v1` and
// `bearer.<token>`, since a browser cannot set headers on a WebSocket). Each frame
// `{"handoff": record}` is acknowledged at once with `{"after": version}` (the service closes a
// socket that leaves 64 frames or 512 KiB unacknowledged with 1013). The service ends the
// watch with 1000 after the hand-off closes; 4401 says the token expired (a device's page holds a
// fresher one by then and reconnects with it); any other close is followed by a reconnect with
// backoff, from the last version seen, so no version is missed.

import { api, HandoffError } from "./api.js";
import { getToken } from "./auth.js";
import type { Handoff } from "./types.js";
import { fail, type Page } from "./ui.js";

export type LiveState = "connecting" | "live" | "reconnecting" | "ended";

export interface LiveHandlers {
  /** A record: each frame's, and before each reconnect a fresh read's. */
  record(handoff: Handoff): void;
  state(state: LiveState): void;
}

/** Before a reconnect, a fresh read of the record: a refusal (the token, the hand-off gone) is
 * shown and stops reconnecting; a network failure only delays the next try. */
async function resync(id: string, handlers: LiveHandlers): Promise<void> {
  try {
    handlers.record(await api.get(id));
  } catch (error) {
    if (error instanceof HandoffError && error.status >= 400 && error.status < 500) {
      fail(error);
      throw error;
    }
  }
}

const PING_MS = 30_000;
const BACKOFF_MS_MIN = 500;
const BACKOFF_MS_MAX = 15_000;

/** Follows hand-off `id` for as long as `page` lives, from `after=0` (the current record
 * comes at once), then from the last version seen on each reconnect. */
export function watch(page: Page, id: string, handlers: LiveHandlers): void {
  let after = 0;
  let retries = 0;
  let socket: WebSocket | null = null;
  let ping: ReturnType<typeof setInterval> | undefined;

  const stop = () => {
    clearInterval(ping);
    const s = socket;
    socket = null;
    // Closing a socket still connecting makes Chromium log an error: close it once it opens.
    if (s?.readyState === WebSocket.CONNECTING) s.addEventListener("open", () => s.close(1000));
    else if (s?.readyState === WebSocket.OPEN) s.close(1000);
  };
  page.onDispose(stop);

  const connect = () => {
    if (!page.alive) return;
    const token = getToken();
    if (!token) return;
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const target = `${scheme}//${location.host}/v1/handoffs/${encodeURIComponent(id)}/watch?after=${after}`;
    let s: WebSocket;
    try {
      s = new WebSocket(target, ["handoff.v1", `bearer.${token}`]);
    } catch {
      handlers.state("ended");
      return;
    }
    socket = s;
    handlers.state(retries === 0 ? "connecting" : "reconnecting");
    s.addEventListener("open", () => {
      if (socket !== s) return;
      handlers.state("live");
      clearInterval(ping);
      ping = setInterval(() => s.readyState === WebSocket.OPEN && s.send("ping"), PING_MS);
    });
    s.addEventListener("message", (event) => {
      if (socket !== s || typeof event.data !== "string" || event.data === "pong") return;
      let frame: { handoff?: Handoff };
      try {
        frame = JSON.parse(event.data) as { handoff?: Handoff };
      } catch {
        return;
      }
      const record = frame.handoff;
      if (!record || typeof record.version !== "number") return;
      retries = 0;
      if (record.version > after) after = record.version;
      if (s.readyState === WebSocket.OPEN) s.send(JSON.stringify({ after }));
      handlers.record(record);
    });
    s.addEventListener("close", (event) => {
      if (socket !== s) return;
      socket = null;
      clearInterval(ping);
      if (!page.alive) return;
      if (event.code === 1000) {
        handlers.state("ended");
        return;
      }
      if (event.code === 4401 && getToken() === token) {
        handlers.state("ended");
        fail(new HandoffError(401, "auth.invalid", "the token has expired; sign in again"));
        return;
      }
      handlers.state("reconnecting");
      // A reader closed for falling behind (1013) catches up at once the first time; again
      // and again, it backs off like any other close.
      const backoff = Math.min(BACKOFF_MS_MAX, BACKOFF_MS_MIN * 2 ** retries) * (0.5 + Math.random() / 2);
      const wait = event.code === 1013 && retries === 0 ? 0 : backoff;
      retries++;
      page.later(wait, () => {
        resync(id, handlers)
          .then(connect)
          .catch(() => handlers.state("ended"));
      });
    });
  };

  connect();
}
