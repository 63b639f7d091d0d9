// The package's Markdown for a person: parsed by marked, then sanitised by DOMPurify into a
// fragment (never an HTML string put back through innerHTML), whatever the text says.

import DOMPurify from "dompurify";
import { Marked } from "marked";

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

// Raw HTML in the Markdown is shown as the text it is, and an image as its alt text: the
// page loads nothing a package names. DOMPurify below is the second line, not the first.
const marked = new Marked({
  async: false,
  gfm: true,
  renderer: {
    html: ({ text }) => escapeHtml(text),
    image: ({ text }) => escapeHtml(text),
  },
});

// A link keeps its href only for an absolute http(s) URL: a `javascript:`, `data:` or
// relative one becomes plain text.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.nodeName !== "A") return;
  const href = node.getAttribute("href") ?? "";
  if (!/^https?:\/\//i.test(href)) node.removeAttribute("href");
  else node.setAttribute("rel", "noopener noreferrer nofollow");
});

/** Sanitises rendered Markdown into a fragment: no script, no style, no forms, nothing that
 * loads a resource (the CSP would refuse it anyway). */
function sanitise(html: string): DocumentFragment {
  return DOMPurify.sanitize(html, {
    RETURN_DOM_FRAGMENT: true,
    FORBID_TAGS: ["img", "style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed", "video", "audio", "source", "picture", "svg", "math", "link", "meta", "base"],
    FORBID_ATTR: ["style", "srcset", "id", "class", "tabindex", "target"],
  });
}

/** The Markdown's headings sit under the page's h2 "The package": h1 becomes h3, and so on. */
function demoteHeadings(fragment: DocumentFragment): DocumentFragment {
  for (const old of fragment.querySelectorAll("h1, h2, h3, h4, h5, h6")) {
    const level = Math.min(6, Number(old.tagName.slice(1)) + 2);
    const heading = document.createElement(`h${level}`);
    heading.append(...old.childNodes);
    old.replaceWith(heading);
  }
  return fragment;
}

/** Markdown → a sanitised fragment, its headings under the page's own. */
export function renderMarkdown(md: string): DocumentFragment {
  return demoteHeadings(sanitise(marked.parse(md, { async: false })));
}
