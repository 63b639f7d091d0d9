// Building the page: every string goes in as a text node, never as markup. The only markup
// the console ever inserts is the package's Markdown, sanitised (package.ts).

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | null | undefined>;

/** `h("p", {class: "x"}, "text", child)`: an element; attributes by setAttribute (a false or
 * null value leaves one out), children as nodes or text. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      if (value === false || value === null || value === undefined) continue;
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, ...children);
  return el;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el as T;
}

/** A link only for an absolute http(s) URL; anything else (a relative path, `javascript:`,
 * `data:`) stays text. */
export function safeLink(uri: string, label?: string): Node {
  let ok = false;
  try {
    const url = new URL(uri);
    ok = (url.protocol === "http:" || url.protocol === "https:") && /^https?:\/\//i.test(uri);
  } catch {
    ok = false;
  }
  if (!ok) return h("span", { class: "uri" }, label ?? uri);
  return h("a", { href: uri, rel: "noopener noreferrer nofollow", target: "_blank" }, label ?? uri);
}

/** The first `n` hex digits of a hash, with an ellipsis. */
export function short(hash: string | null | undefined, n = 8): string {
  return hash ? `${hash.slice(0, n)}…` : "";
}

export function when(iso: string | null | undefined): string {
  if (!iso) return "";
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
}

export function timeEl(iso: string | null | undefined): Node {
  if (!iso) return document.createTextNode("");
  return h("time", { datetime: iso, title: iso }, when(iso));
}

/** A status as a badge: its words carry the meaning, the colour only repeats it. */
export function statusBadge(status: string, id?: string): HTMLElement {
  return h("span", { class: `badge status-${status.replace(/[^a-z-]/g, "")}`, id }, status);
}

/** Replaces a container's children, keeping the keyboard focus on the element of the same
 * `data-key` when the focus was inside (a live update must not throw the user's place away);
 * when that element is gone (a button the new state does not offer), on the container's
 * first control, or else on the page's main. */
export function replaceKeepingFocus(container: Element, ...children: Child[]): void {
  const active = document.activeElement;
  const inside = active instanceof HTMLElement && active !== container && container.contains(active);
  const key = inside ? active.dataset.key : undefined;
  container.replaceChildren();
  append(container, ...children);
  if (!inside) return;
  const again =
    (key ? container.querySelector<HTMLElement>(`[data-key="${CSS.escape(key)}"]`) : null) ??
    container.querySelector<HTMLElement>("button, a[href], input, select, textarea, [tabindex]") ??
    document.querySelector<HTMLElement>("main");
  again?.focus();
}
