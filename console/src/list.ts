// The owner's sessions: one page of rows, newest first, filtered open/closed, paged by the
// API's cursor. Kept current with one conditional GET a second: the list's ETag goes back in
// If-None-Match, and a 304 (nothing in this page moved) costs no rendering at all.

import { api } from "./api.js";
import { h, replaceKeepingFocus, short, statusBadge, timeEl } from "./dom.js";
import type { ListRow } from "./types.js";
import { fail, guard, Page } from "./ui.js";

const POLL_MS = 1000;
const PAGE_SIZE = 25;

interface ListState {
  filter: "" | "open" | "closed";
  /** The cursors of the pages before this one (the first page's is null). */
  trail: (string | null)[];
  cursor: string | null;
}

// Kept across visits, so that coming back from a session shows the same page.
const state: ListState = { filter: "", trail: [], cursor: null };

export function renderList(page: Page, main: HTMLElement): void {
  main.id = "list";
  const filter = h(
    "select",
    { id: "state-filter" },
    h("option", { value: "" }, "All sessions"),
    h("option", { value: "open" }, "Open"),
    h("option", { value: "closed" }, "Closed"),
  );
  filter.value = state.filter;
  const body = h("tbody");
  const table = h(
    "table",
    { id: "sessions" },
    h("caption", { class: "visually-hidden" }, "Your sessions, the most recently updated first"),
    h(
      "thead",
      null,
      h(
        "tr",
        null,
        ...["Session", "Machine", "Turn", "Status", "Runtime", "Package", "Updated"].map((t) => h("th", { scope: "col" }, t)),
      ),
    ),
    body,
  );
  const empty = h("p", { class: "muted", hidden: true }, "No sessions here yet.");
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  main.replaceChildren(
    h("h1", null, "Sessions"),
    h("div", { class: "toolbar" }, h("label", { for: "state-filter" }, "Show"), filter),
    h("div", { class: "table-wrap" }, table),
    empty,
    pager,
  );

  let etag: string | null = null;
  let shown = "";
  let inFlight: AbortController | null = null;
  page.onDispose(() => inFlight?.abort());

  const load = async (): Promise<void> => {
    inFlight?.abort();
    const controller = new AbortController();
    inFlight = controller;
    const query = { state: state.filter || undefined, limit: PAGE_SIZE, cursor: state.cursor ?? undefined };
    const answer = await api.listIfChanged(query, etag, controller.signal);
    if (!page.alive || inFlight !== controller) return;
    inFlight = null;
    if (!answer) return;
    etag = answer.etag;
    const text = JSON.stringify(answer.page);
    if (text === shown) return;
    shown = text;
    draw(answer.page.handoffs, answer.page.cursor);
  };

  const draw = (rows: ListRow[], next: string | null): void => {
    const sorted = [...rows].sort((a, b) => (a.updated_at < b.updated_at ? 1 : a.updated_at > b.updated_at ? -1 : 0));
    replaceKeepingFocus(body, ...sorted.map(row));
    empty.hidden = sorted.length > 0;
    const buttons: HTMLButtonElement[] = [];
    if (state.trail.length > 0) {
      const first = h("button", { type: "button", id: "first-page", "data-key": "first-page" }, "Newest");
      first.addEventListener("click", () => go([], null));
      buttons.push(first);
    }
    if (next !== null) {
      const older = h("button", { type: "button", id: "next-page", "data-key": "next-page" }, "Older");
      older.addEventListener("click", () => go([...state.trail, state.cursor], next));
      buttons.push(older);
    }
    replaceKeepingFocus(pager, ...buttons);
  };

  const go = (trail: (string | null)[], cursor: string | null): void => {
    state.trail = trail;
    state.cursor = cursor;
    etag = null;
    shown = "";
    load().catch(fail);
  };

  filter.addEventListener(
    "change",
    guard(() => {
      state.filter = filter.value as ListState["filter"];
      go([], null);
    }),
  );

  const poll = (): void => {
    page.later(POLL_MS, () => {
      if (document.hidden) return poll();
      load()
        .catch((error: unknown) => {
          if (!(error instanceof DOMException && error.name === "AbortError")) fail(error);
        })
        .finally(() => page.alive && poll());
    });
  };
  load()
    .catch(fail)
    .finally(poll);
}

function row(r: ListRow): HTMLTableRowElement {
  // One badge says needs-you (marked, so that it stands out); a question it waits on is marked too.
  const badge = statusBadge(r.status);
  if (r.status === "needs-you") badge.classList.add("mark-needs-you");
  const status = h("td", null, badge);
  if (r.question && !r.question.answer) status.append(" ", h("span", { class: "mark mark-question", title: "waits on your answer" }, "question"));
  if (r.suggestion) status.append(" ", h("span", { class: "mark mark-suggestion" }, "suggestion"));
  if (r.state === "closed") status.append(" ", h("span", { class: "mark mark-closed" }, "closed"));
  if (r.summary) status.append(h("span", { class: "summary" }, r.summary));
  return h(
    "tr",
    { class: "session-row", "data-id": r.id, "data-version": r.version, "data-status": r.status, "data-state": r.state },
    h("th", { scope: "row" }, h("a", { href: `#/s/${r.id}`, "data-key": `row:${r.id}` }, r.session)),
    h("td", null, r.machine),
    h("td", { class: "num" }, r.turn),
    status,
    h("td", null, r.runtime ?? ""),
    h("td", null, r.package_version ? `v${r.package_version} ${short(r.package_hash)}` : ""),
    h("td", null, timeEl(r.updated_at)),
  );
}
