// The notices (#message for outcomes, #error for refusals as "code: message") and the life of
// a page: whatever a page starts (timers, sockets) it registers here, and leaving it stops them.

import { HandoffError } from "./api.js";
import { byId } from "./dom.js";

export function say(message: string): void {
  byId("error").textContent = "";
  byId("message").textContent = message;
}

export function clearNotices(): void {
  byId("error").textContent = "";
  byId("message").textContent = "";
}

let onUnauthorized: (error: HandoffError) => void = () => {};

export function whenUnauthorized(handler: (error: HandoffError) => void): void {
  onUnauthorized = handler;
}

/** Shows an error in #error; a refused or expired token sends the user back to sign in. */
export function fail(error: unknown): void {
  if (error instanceof DOMException && error.name === "AbortError") return;
  if (error instanceof HandoffError && error.status === 401) {
    onUnauthorized(error);
    return;
  }
  if (!(error instanceof HandoffError)) {
    // A mistake of the page, not a refusal: shown, and logged where a developer (and the
    // browser tests, which fail on any console error) will see it.
    console.error(error);
  }
  const text =
    error instanceof HandoffError
      ? error.message
      : `page.error: ${error instanceof Error ? error.message : String(error)}`;
  byId("message").textContent = "";
  byId("error").textContent = text;
}

/** Runs an async handler, its error shown instead of thrown. */
export function guard<A extends unknown[]>(fn: (...args: A) => Promise<void> | void): (...args: A) => void {
  return (...args: A) => {
    try {
      const result = fn(...args);
      if (result instanceof Promise) result.catch(fail);
    } catch (error) {
      fail(error);
    }
  };
}

/** What the current page holds open; disposed when the route changes. */
export class Page {
  alive = true;
  private cleanups: (() => void)[] = [];

  onDispose(fn: () => void): void {
    this.cleanups.push(fn);
  }

  dispose(): void {
    this.alive = false;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    for (const fn of this.cleanups.splice(0)) {
      try {
        fn();
      } catch {
        // a cleanup never stops the next page
      }
    }
  }

  /** setTimeout that stops with the page. */
  later(ms: number, fn: () => void): void {
    if (!this.alive) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (this.alive) fn();
    }, ms);
    this.timers.add(timer);
  }

  private timers = new Set<ReturnType<typeof setTimeout>>();
}

/** Runs a button's command once at a time: the button is busy (aria-disabled) meanwhile. */
export function busy(button: HTMLButtonElement, fn: () => Promise<void>): () => void {
  return guard(async () => {
    if (button.getAttribute("aria-busy") === "true") return;
    button.setAttribute("aria-busy", "true");
    try {
      await fn();
    } finally {
      button.removeAttribute("aria-busy");
    }
  });
}

/** `run`, at most one at a time: a call while one is under way asks for one more run after it
 * (however many calls came), so the page ends on the newest state without piling up requests.
 * Stops once `alive()` is false; a failure goes to `fail`. */
export function coalesced(run: () => Promise<void>, alive: () => boolean, fail: (error: unknown) => void): () => Promise<void> {
  let running = false;
  let again = false;
  return async () => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        await run();
      } while (again && alive());
    } catch (error) {
      fail(error);
    } finally {
      running = false;
    }
  };
}
