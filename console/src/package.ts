// The package page: the Markdown the service renders (through marked, then DOMPurify: never
// trusted as it comes), the canonical JSON the hash is computed over (sorted keys, no
// whitespace, without generated_at) in a collapsed <details>, checked here against the hash,
// the whole hash with a copy button, the state and any rejection, the package commands of the
// record's actions, and the briefing at a chosen budget with what it left out. Live: every
// new version of the record reads the package again.

import { api, HandoffError } from "./api.js";
import { actionButton, actionsOf, mayHavePackage, type CommandContext } from "./commands.js";
import { h, replaceKeepingFocus, timeEl } from "./dom.js";
import { watch } from "./live.js";
import { renderMarkdown } from "./markdown.js";
import type { Handoff, LatestPackage } from "./types.js";
import { busy, coalesced, fail, Page, say } from "./ui.js";

/** How many times in a row the page reads the package again when its JSON and Markdown
 * came from two packages. */
const REREADS_MAX = 3;

const PACKAGE_ACTIONS = new Set(["compile", "accept", "reject"]);

/** The canonical JSON of a package: sorted keys, no whitespace, without generated_at. */
export function canonical(value: unknown, top = true): string {
  if (Array.isArray(value)) return `[${value.map((v) => canonical(v, false)).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([k]) => !(top && k === "generated_at"))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v, false)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

async function sha256Hex(text: string): Promise<string | null> {
  if (!crypto.subtle) return null;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

const REJECTED = /^handoff rejected \(([a-z_]+)\): ([\s\S]*)$/;

export function renderPackage(page: Page, main: HTMLElement, id: string, role: "owner" | "machine"): void {
  main.id = "package";
  main.dataset.id = id;
  const title = h("h1", null, "Package");
  const back = h("p", { class: "sub" }, h("a", { href: `#/s/${id}` }, "Back to the session"));
  const head = h("div", { class: "package-head" });
  const actions = h("div", { class: "actions", role: "group", "aria-label": "Package actions" });
  const rejection = h("div", { class: "rejection-slot" });
  const markdown = h("article", { id: "package-markdown", class: "markdown", "aria-label": "The package, rendered" });
  const json = h("pre", { class: "json", tabindex: 0, "aria-label": "Canonical JSON" });
  const verified = h("p", { class: "muted", id: "hash-check" });
  const details = h("details", { id: "package-json" }, h("summary", null, "Canonical JSON (what the hash is computed over)"), verified, json);
  const budget = h("input", { id: "budget", type: "number", min: 256, max: 65536, step: 256, value: 8192, inputmode: "numeric" });
  const preview = h("button", { type: "button", id: "preview-briefing" }, "Preview briefing");
  const leftOut = h("div", { class: "left-out-slot" });
  const briefing = h("pre", { id: "briefing", class: "briefing", tabindex: 0, "aria-label": "Briefing", hidden: true });
  const rendered = h("section", { "aria-labelledby": "rendered-heading" }, h("h2", { id: "rendered-heading" }, "The package"), markdown, details);
  main.replaceChildren(
    h("div", { class: "page-head" }, title),
    back,
    head,
    rejection,
    actions,
    rendered,
    h(
      "section",
      { "aria-labelledby": "briefing-heading", class: "briefing-section" },
      h("h2", { id: "briefing-heading" }, "Briefing preview"),
      h("p", { class: "muted" }, "The plain-text briefing a runtime is given, cut to a byte budget; it says what it left out."),
      h("div", { class: "toolbar" }, h("label", { for: "budget" }, "Budget (bytes)"), budget, preview),
      leftOut,
      briefing,
    ),
  );

  let record: Handoff | null = null;
  let latest: LatestPackage | null = null;
  let shownVersion = 0;

  const ctx: CommandContext = {
    role,
    apply: (r) => offer(r),
    refresh: () => void load(),
    shownPackage: () => latest,
    newest: () => record,
  };

  const offer = (r: Handoff): void => {
    if (!page.alive) return;
    if (!record || r.version > record.version) record = r;
    if (r.version > shownVersion) void load();
  };

  let rereads = 0;
  const once = async (): Promise<void> => {
    const r = await api.get(id);
    let maybe = mayHavePackage(r, role, []);
    if (!maybe) maybe = mayHavePackage(r, role, (await api.turns(id)).turns);
    const [pkg, md] = await Promise.all([
      !maybe ? null : api.getPackage(id).catch((error: unknown) => {
        if (error instanceof HandoffError && error.code === "package.not_found") return null;
        throw error;
      }),
      !maybe ? null : api.getPackageMarkdown(id).catch((error: unknown) => {
        if (error instanceof HandoffError && error.code === "package.not_found") return null;
        throw error;
      }),
    ]);
    if (!page.alive) return;
    if (pkg && md !== null && !md.includes(pkg.package_hash) && rereads < REREADS_MAX) {
      // A recompile fell between the two reads: the Markdown (which names its whole hash) is
      // another package than the JSON. Read both again rather than show them side by side
      // (a few times at most: a Markdown that never names the hash is shown as it is).
      rereads++;
      void load();
      return;
    }
    rereads = 0;
    if (!record || r.version >= record.version) record = r;
    latest = pkg;
    shownVersion = record.version;
    await draw(record, pkg, md);
  };

  const load = coalesced(once, () => page.alive, fail);

  const draw = async (r: Handoff, pkg: LatestPackage | null, md: string | null): Promise<void> => {
    title.textContent = pkg ? `Package v${pkg.package_version} of ${r.session}` : `Package of ${r.session}`;
    const allowed = actionsOf(r, role).filter((a) => PACKAGE_ACTIONS.has(a));
    replaceKeepingFocus(actions, ...allowed.map((a) => actionButton(a, r, ctx)));
    rendered.hidden = !pkg;
    for (const section of main.querySelectorAll<HTMLElement>(".briefing-section")) section.hidden = !pkg;
    if (!pkg) {
      delete main.dataset.version;
      delete main.dataset.hash;
      delete main.dataset.state;
      head.replaceChildren(h("p", { class: "muted" }, "No package yet: compile one, or hand off a turn to a runtime."));
      rejection.replaceChildren();
      markdown.replaceChildren();
      json.textContent = "";
      verified.textContent = "";
      return;
    }
    main.dataset.version = String(pkg.package_version);
    main.dataset.hash = pkg.package_hash;
    main.dataset.state = pkg.state;
    const copy = h("button", { type: "button", id: "copy-hash", "data-key": "copy-hash" }, "Copy hash");
    copy.addEventListener("click", busy(copy, () => copyHash(pkg.package_hash)));
    replaceKeepingFocus(
      head,
      h(
        "dl",
        { class: "facts" },
        h("dt", null, "State"),
        h("dd", null, h("span", { id: "package-state", class: `badge package-${pkg.state}` }, pkg.state)),
        h("dt", null, "Hash (SHA-256)"),
        h("dd", { class: "hash-line" }, h("code", { id: "package-hash" }, pkg.package_hash), " ", copy),
        h("dt", null, "Next"),
        h("dd", null, `${pkg.package.next.runtime}: ${pkg.package.next.objective}`),
        h("dt", null, "Purpose"),
        h("dd", null, pkg.package.next.purpose),
        h("dt", null, "Generated"),
        h("dd", null, timeEl(pkg.package.generated_at), ` · record v${r.version}`),
      ),
    );
    rejection.replaceChildren(...rejectionOf(pkg));
    markdown.replaceChildren(md === null ? "" : renderMarkdown(withoutRawJson(md)));
    const text = canonical(pkg.package);
    json.textContent = text;
    const hash = await sha256Hex(text).catch(() => null);
    verified.textContent =
      hash === null ? "" : hash === pkg.package_hash ? "Its SHA-256 is the hash above: this is the document you are looking at." : `Its SHA-256 here is ${hash}, not the hash above.`;
  };

  preview.addEventListener(
    "click",
    busy(preview, async () => {
      const n = Number(budget.value);
      if (!Number.isInteger(n) || n < 256 || n > 65536) throw new HandoffError(400, "request.invalid", "budget: a whole number of bytes from 256 to 65536");
      const text = await api.briefing(id, { budget: n });
      briefing.hidden = false;
      briefing.textContent = text;
      replaceKeepingFocus(leftOut, ...leftOutOf(text, n));
      say(`briefing: ${new TextEncoder().encode(text).length} of ${n} bytes`);
    }),
  );

  void load().then(() => {
    if (!page.alive || !record || record.state === "closed") return;
    watch(page, id, { record: offer, state: () => {} });
  }, fail);
}

function rejectionOf(pkg: LatestPackage): Node[] {
  let reason: string | undefined;
  let note: string | undefined;
  let lead = "This package was rejected";
  if (pkg.rejection) {
    reason = pkg.rejection.reason;
    note = pkg.rejection.note;
  } else {
    for (const line of pkg.package.state.unresolved) {
      const m = REJECTED.exec(line);
      if (m) {
        reason = m[1];
        note = m[2];
        lead = "The package before this one was rejected";
      }
    }
  }
  if (reason === undefined) return [];
  return [
    h(
      "section",
      { id: "rejection", class: "callout callout-warn", "aria-labelledby": "rejection-heading" },
      h("h2", { id: "rejection-heading" }, "Rejected"),
      h("p", null, `${lead}: `, h("strong", { class: "rejection-reason" }, reason ?? "")),
      h("p", { class: "rejection-note" }, note ?? ""),
      pkg.rejection?.by ? h("p", { class: "meta" }, `by the ${pkg.rejection.by} · `, timeEl(pkg.rejection.rejected_at)) : "",
    ),
  ];
}

/** The briefing's "Left out" section, shown on its own. */
function leftOutOf(text: string, budget: number): Node[] {
  const m = /(?:^|\n)## Left out\n([\s\S]*?)(?=\n## |\n*$)/.exec(text);
  const body = m?.[1]?.trim();
  if (!body) return [h("p", { class: "note", id: "left-out" }, `Nothing was left out at ${budget} bytes.`)];
  return [h("div", { class: "callout", id: "left-out" }, h("h3", null, "Left out"), h("p", { class: "pre-line" }, body))];
}

async function copyHash(hash: string): Promise<void> {
  try {
    await navigator.clipboard.writeText(hash);
    say("hash copied");
  } catch {
    const code = document.getElementById("package-hash");
    const selection = window.getSelection();
    if (code && selection) {
      const range = document.createRange();
      range.selectNodeContents(code);
      selection.removeAllRanges();
      selection.addRange(range);
    }
    say("the clipboard is not available here: the hash is selected, copy it with Ctrl+C");
  }
}

/** The service's Markdown ends with the raw JSON, which this page shows in its own collapsed
 * `<details>`: the rendered document stops before it. Machine text cannot start a heading
 * line (the service escapes it), so the last such heading is the service's own. */
function withoutRawJson(md: string): string {
  const at = md.lastIndexOf("\n## Raw package JSON\n");
  return at < 0 ? md : md.slice(0, at);
}
